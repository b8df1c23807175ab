"""Tests of wengert.numpy, the NumPy front end."""
