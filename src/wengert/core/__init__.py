"""The core: traces and the box registry, primitives and the extension API, errors.

The lowest layer: it imports no other part of wengert. Engines register their box types here.
"""
