"""The user-facing transforms (``grad``, ``jvp``, ...), ``Tape``, ``Tensor`` and checkpointing, built on
the engines."""
