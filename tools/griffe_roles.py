"""A Griffe extension (loaded by mkdocstrings, see ``mkdocs.yml``): the Sphinx roles in docstrings
(``:func:`hvp```) become cross-references to the public reference entries, as
``reference_pages.links`` writes them, instead of showing as literal text on the site."""

import sys
from pathlib import Path

import griffe

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent / "src"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from reference_pages import links  # noqa: E402


class SphinxRolesAsLinks(griffe.Extension):
    """Rewrites each docstring's roles when Griffe loads its object."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is None or ":" not in obj.docstring.value:
            return
        module = obj.module.path
        parent = obj if obj.is_class else obj.parent
        cls = parent.path[len(module) + 1:] if parent is not None and parent.is_class else None
        obj.docstring.value = links(obj.docstring.value, module, cls or None)
