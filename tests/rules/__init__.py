"""Tests of wengert.rules: the systematic rule-table test and its cases (cases/)."""
