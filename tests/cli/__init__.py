"""Tests of the command line, ``python -m wengert``."""
