"""wengert's tests, one folder per layer of ``src/wengert`` (see ``conftest.py``)."""
