"""Tests of wengert.api: the transforms, Tape, Tensor and checkpointing."""
