"""The fuzz tests' Hypothesis profiles (``profiles.py``) are registered on import of this folder."""

from . import profiles  # noqa: F401 - registers ci, fuzz and dev
