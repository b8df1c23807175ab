"""Tests of wengert.program: the IR, its passes, wg.compile and the source transformation."""
