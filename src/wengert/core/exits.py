"""Where a traced value would leave for a plain Python number or NumPy array: the error saying so.

A derivative cannot ride on a Python float, an int, a list or a plain NumPy array, so each such exit
of a traced value -- ``float(x)``, ``int(x)``, ``complex(x)``, ``x.__index__()``, ``x.item()``,
``x.tolist()``, ``np.asarray(x)``, a NumPy function given a list holding ``x``, ``buf[i] = x`` into a
plain array -- raises :func:`refusal`'s error. It names the user's line (the innermost frame outside
wengert and NumPy) and says what to write instead. Only the exits pay for the stack walk.
"""

import dis
import linecache
import os
import sys

import numpy as np

__all__ = ["ExitError", "refusal", "user_site", "where", "name_of", "storing"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # src/wengert/
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_CONVERSIONS = frozenset(("__float__", "__int__", "__index__", "__complex__", "__array__"))

_STORE_INSTEAD = (
    "A plain NumPy array cannot hold a derivative. Make the buffer with np.zeros_like(x) of a traced x (or "
    "ones_like, empty_like, full_like), which takes traced stores; or collect the values in a list and write "
    "wnp.stack(values); or update functionally: buf = wnp.index_update(buf, i, value) (JAX's .at[i].set).")


class ExitError(TypeError):
    """A traced value was about to leave for a plain number or array. NumPy restates one raised while
    storing into a float array as its own ValueError ("setting an array element with a sequence"),
    keeping this as the ``__cause__``: a caller may raise that cause in its place."""


def _outside(path):
    path = os.path.abspath(path)
    return not (path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR))


def _in_wengert(frame):
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR)


def user_site():
    """``(frame, inside)``: the innermost frame outside wengert and NumPy (None if there is none),
    and the frames of wengert and NumPy on the way to it, innermost first."""
    frame, inside = sys._getframe(1), []
    while frame is not None:
        if _outside(frame.f_code.co_filename):
            return frame, inside
        inside.append(frame)
        frame = frame.f_back
    return None, inside


def where():
    """`` at FILE, line N: `code``` for the user's innermost frame, or "" when there is none."""
    frame, _ = user_site()
    return f" at {_location(frame)}" if frame is not None else ""


def _location(frame):
    file, lineno = frame.f_code.co_filename, frame.f_lineno
    line = linecache.getline(file, lineno).strip()
    return f"{file}, line {lineno}" + (f": `{line}`" if line else "")


def _numpy_function(frame):
    """``linalg.norm`` for a frame of NumPy's Python code: the public name of its function (of its
    class, for a method: ``vectorize`` for ``vectorize.__call__``)."""
    module = frame.f_globals.get("__name__") or ""
    sub = next((m + "." for m in ("linalg", "fft") if f".{m}" in module), "")
    return sub + getattr(frame.f_code, "co_qualname", frame.f_code.co_name).split(".")[0]


def refusal(box, what, instead, error=ExitError):
    """The error for exit ``what`` (``"float()"``) of ``box``, naming the user's line; ``instead`` says
    what to write. A store into a plain array (``buf[i] = x``), and a NumPy function converting a list
    that holds ``box``, are recognised and explained as such."""
    frame, inside = user_site()
    at = ""
    if frame is not None:
        at = f" at {_location(frame)}"
        # the frames that called the conversion method (ours, e.g. Tensor.__float__ -> ArrayBox.__float__)
        last = max((i for i, f in enumerate(inside) if f.f_code.co_name in _CONVERSIONS and _in_wengert(f)),
                   default=None)
        callers = inside[last + 1:] if last is not None else None
        if callers == [] and storing(frame):
            what = "Storing into a plain NumPy array (buf[i] = x)"
            instead = _STORE_INSTEAD
        elif callers and not any(_in_wengert(f) for f in callers):
            name = _numpy_function(callers[-1])
            what = f"numpy.{name}, which converts its arguments to plain arrays itself"
            if _wengert_has(name):
                instead = (f"Write wnp.{name}(wnp.stack(values)) (import wengert.numpy as wnp); "
                           f"wnp.{name}(values) where it is a reduction or a product (wnp.sum, wnp.mean, "
                           f"wnp.dot, ...), which stack a list themselves.")
            else:
                instead = (f"wengert.numpy has no {name}: compose wengert.numpy functions (wnp.stack(values) "
                           f"makes a list one traced array), or define it with wg.primitive and wg.defvjp.")
    kind, problem = getattr(box, "_kind", lambda: "a traced value")(), getattr(box, "_exit_problem", None)
    return error(f"{what}, applied to {kind} of shape {box.shape}{at}, "
                 f"{problem or 'would drop its derivative'}. {instead}")


def _wengert_has(name):
    """Whether wengert.numpy (if imported; it sits above this module) has ``name`` (``linalg.norm``)."""
    module = sys.modules.get("wengert.numpy")
    for part in name.split("."):
        module = getattr(module, part, None)
    return module is not None


def storing(frame):
    """Whether ``frame`` is executing ``target[index] = value`` right now."""
    try:
        return frame.f_code.co_code[frame.f_lasti] == _STORE_SUBSCR
    except (IndexError, AttributeError):
        return False


def name_of(fun):
    """How messages name a user's function: its ``__name__``, or its repr when it has none."""
    return getattr(fun, "__name__", repr(fun))
