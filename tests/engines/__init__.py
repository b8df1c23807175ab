"""Tests of wengert.engines: the reverse tape, dual numbers, in-place updates, and every engine
against the others."""
