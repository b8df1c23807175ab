"""Tests of wengert.core: the trace, primitives and their extension API, exits of traced values."""
