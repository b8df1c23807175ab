"""Helpers shared by several test folders, imported as ``tests.support.<module>``."""
