"""Smoke tests of the benchmarks in ``benchmarks/`` at tiny sizes (no timing assertions)."""
