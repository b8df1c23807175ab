"""Errors that several layers raise (each names what to write instead)."""

__all__ = ["TracingError"]


class TracingError(TypeError):
    """A construct that a symbolic trace cannot record (data-dependent control flow, conversion
    of a traced value to a Python number or a NumPy array, in-place mutation)."""
