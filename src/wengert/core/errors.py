"""Errors that every layer raises: a rule, an engine or a front end refusing what a symbolic trace
cannot record raises :class:`TracingError`, whichever transformation is tracing."""

__all__ = ["TracingError"]


class TracingError(TypeError):
    """A construct that a symbolic trace cannot record (data-dependent control flow, conversion
    of a traced value to a Python number or a NumPy array, in-place mutation)."""
