"""Tests of wengert.scipy, the SciPy front end."""
