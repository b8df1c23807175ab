"""Tests of wengert.nn."""
