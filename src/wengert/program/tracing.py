"""Lazy tracing (DyNet's lazy evaluation): run a function on symbols and record its statements.

A :class:`Symbol` is a traced value with no data: primitives called on it are recorded by its
:class:`ProgramBuilder` as statements instead of being computed. Shapes and dtypes come from
*abstract evaluation by example*: each primitive's implementation is run once on an example of
each argument. The examples of a trace's inputs are the arguments it is traced with (the values
``fun`` is known to accept: a placeholder of ones would make ``inv`` singular, ``cholesky`` fail
and ``arccos``'s derivative divide by zero); variables without one (cotangents, tangents) get a
placeholder (ones, or zeros for integers). The examples only give shapes and dtypes: the program
never depends on them, and Python control flow on a symbol's value is refused all the same.
Python control flow on shapes and constants works; on a symbol's value it cannot (the value is not
known yet), and raises :class:`TracingError` naming the user's line and the remedies.
"""

import inspect
import linecache
import os
import sys

import numpy as np

import wengert.numpy as wnp
from wengert.api.transforms import restate_exit
from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core import exits as _exits
from wengert.core.errors import TracingError
from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, Trace, register_box
from wengert.engines.box import ArrayBox
from wengert.engines.kept import kept_array
from wengert.engines.mutation import note_view
from wengert.numpy._dispatch import UnsupportedNumpyFunction
from wengert.program.ir import NO_KWARGS, Statement, Variable, map_vars, placeholder, var_name
from wengert.rules import elementwise, nondiff
from wengert.rules import shape as shape_ops
from wengert.rules.indexing import getitem, untake

__all__ = ["Symbol", "ProgramBuilder", "TracingError", "trace", "user_location", "is_input_leaf",
           "python_identifier", "TRACING"]

TRACING = [0]
"""How many :func:`trace` calls are running (``wg.iterate`` asks: ``loop_node``)."""

_GETITEM = getitem.primitive

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # wengert/
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_SHAPE_QUERIES = frozenset((nondiff.shape, nondiff.ndim, nondiff.size))
_REMEDY = ("Use wengert.numpy.where for elementwise choices; trace data-dependent control flow "
           "with the source front end (wg.Program.from_source), or differentiate with the tape "
           "(wg.grad), which follows Python control flow as it runs.")


def user_location():
    """``(filename, lineno, line)`` of the innermost frame outside wengert and NumPy, or None."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR)):
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            return frame.f_code.co_filename, frame.f_lineno, line
        frame = frame.f_back
    return None


def _where():
    loc = user_location()
    if loc is None:
        return ""
    file, lineno, line = loc
    return f" at {file}, line {lineno}" + (f": `{line}`" if line else "")


def _traceback_location(error):
    """`` at FILE, line N`` for the innermost frame of ``error``'s traceback outside wengert and NumPy."""
    found = ""
    tb = error.__traceback__
    while tb is not None:
        path = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not (path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR)):
            found = f" at {tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno}"
        tb = tb.tb_next
    return found


@register_box
class Symbol(ArrayBox):
    """A traced value without data: a Variable of the program being recorded, and a placeholder
    of its shape and dtype for abstract evaluation."""

    # not "var": ndarray.var is a method
    __slots__ = ("variable", "example", "_trace", "_view", "__weakref__")
    # _view, set only on a view of another symbol's example (mutation.note_view)

    def __init__(self, var, example, trace):
        self.variable = var
        self.example = example
        self._trace = trace

    @property
    def shape(self):
        return self.variable.shape

    @property
    def dtype(self):
        return self.variable.dtype

    def __len__(self):
        if not self.variable.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.variable.shape[0]

    def __repr__(self):
        return f"<symbol {self.variable.name}: {self.variable.describe()}>"

    def _kind(self):
        return f"the traced value {self.variable.name} of a program being traced (wg.compile)"

    def _refuse(self, what, instead=_REMEDY):
        frame, _ = _exits.user_site()
        if frame is not None and _exits.storing(frame):  # buf[i] = x into a plain array: as every box
            raise _exits.refusal(self, what, instead)
        raise TracingError(
            f"{what} of the traced value {self.variable.name} ({self.variable.describe()}){_where()}: its "
            f"value is "
            f"not known while a program is traced (wg.Program.from_trace, wg.compile). {instead}")

    def __bool__(self):
        self._refuse("Python control flow (if, while, and/or, bool()) on the value")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("Using as a Python index")

    def __complex__(self):
        self._refuse("complex()")

    def __array__(self, dtype=None, copy=None):
        self._refuse("Converting to a NumPy array (np.asarray, or a NumPy function without a rule)",
                     "Use wengert.numpy functions; a list holding traced values given to a NumPy "
                     "function (np.mean([a, b])) is stacked first: np.mean(wnp.stack([a, b])). The tape "
                     "(wg.grad) refuses it too; the source front end (wg.source_grad) reads np.asarray(x), "
                     "np.array(x) and np.array([a, b]) of traced values.")

    def __setitem__(self, idx, value):
        """``x[idx] = value``: the symbol now stands for ``index_update(x, idx, value)`` (as the tape's
        boxes, see ``wengert.engines.mutation``); a traced boolean mask is refused (data-dependent)."""
        if _has_bool_symbol(idx):
            if type(idx) is Symbol and idx.variable.shape == self.variable.shape and np.ndim(value) == 0:
                new = elementwise.where(idx, value, self)  # x[mask] = scalar: the same as a where
                if new.variable.dtype != self.variable.dtype:
                    new = shape_ops.astype(new, self.variable.dtype)
                self.variable, self.example = new.variable, new.example
                return
            self._refuse("Assignment through a traced boolean mask (x[mask] = ...) of other than a "
                         "scalar to a mask of x's shape", "Use x = wnp.where(mask, value, x) instead.")
        ArrayBox.__setitem__(self, idx, value)

    def __radd__(self, other):  # sum(...)'s start value 0 (ArrayBox's reads the box's value)
        if type(other) is int and self.variable.kind == "float":
            other = float(other)
        return elementwise.add(other, self)

    # Boolean masks combine in rules (clip's ``(a >= lo) & (a <= hi)``): logical, not bitwise.
    def __and__(self, other):
        return nondiff.logical_and(self, other)

    def __rand__(self, other):
        return nondiff.logical_and(other, self)

    def __or__(self, other):
        return nondiff.logical_or(self, other)

    def __ror__(self, other):
        return nondiff.logical_or(other, self)

    def __xor__(self, other):
        return nondiff.logical_xor(self, other)

    def __invert__(self):
        return nondiff.logical_not(self)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.shape:
            return self.variable.shape
        if func is np.ndim:
            return len(self.variable.shape)
        if func is np.size:
            return int(np.prod(self.variable.shape))
        if func is np.result_type:
            return np.result_type(*[a.example if type(a) is Symbol else a for a in args])
        return ArrayBox.__array_function__(self, func, types, args, kwargs)


SYMBOLIC_TYPES.add(Symbol)


class ProgramBuilder(Trace):
    """Records statements. ``names`` holds every name given out, so generated names never clash."""

    __slots__ = ("statements", "names", "counter", "versions", "examples", "_shaped", "_held",
                 "refuse_constant")

    def __init__(self, first=1, names=(), examples=None):
        super().__init__()
        self.statements = []
        self.examples = dict(examples or {})  # Variable -> the example value its symbol computed on
        self.names = set(names)
        self.counter = first
        self.versions = {}  # base name -> next version number to try
        self._shaped = {}  # _shape_key -> a large example computed already for that key
        self._held = {}  # id -> the read-only copy of a constant array a statement holds (_argument)
        self.refuse_constant = None  # a check of each constant array before it is held (wg.compile's)

    def _argument(self, x):
        """What a statement holds for argument ``x``: a symbol's variable; a constant array's read-only
        copy as it is now (the function may write into the array after this operation, as a work
        buffer filled anew on each pass of a loop: ``engines.kept.kept_array``); else ``x``."""
        t = type(x)
        if t is Symbol:
            return x.variable
        if isinstance(x, np.ndarray):
            if self.refuse_constant is not None:
                self.refuse_constant(x)
            return kept_array(self._held, x)
        return x

    def fresh(self, base=None):
        """A new variable name: the next ``vN``, or ``base`` (``base2``, ``base3``, ... if taken)."""
        if base is None:
            names, k = self.names, self.counter
            name = f"v{k}" if k >= 0 else var_name(k)
            while name in names:
                k += 1
                name = f"v{k}" if k >= 0 else var_name(k)
            self.counter = k + 1
        else:
            name, k = base, self.versions.get(base, 2)
            while name in self.names:
                name, k = f"{base}{k}", k + 1
            self.versions[base] = k
        self.names.add(name)
        return name

    def symbol(self, var, example=None):
        """A symbol of this trace for ``var``."""
        self.names.add(var.name)
        if example is None:
            example = self.examples.get(var)
        if example is None:
            example = placeholder(var)
        self.examples[var] = example
        return Symbol(var, example, self)

    def constant(self, value):
        return value

    def _example(self, x):
        if type(x) is Symbol:
            if x._trace is not self:
                raise TracingError(f"a symbol of another program ({x.variable.name}) reached this trace")
            return x.example
        if type(x) in BOX_TYPES:
            raise TracingError(
                f"a value traced by another differentiation ({type(x).__name__}) reached a function "
                f"being traced to a program{_where()}; pass it as an argument instead of capturing it")
        return x

    def apply(self, prim, args, kwargs):
        ex_args = var_args = None
        numbers = True  # every example a Python float or int: no array example to share (_shape_key)
        only_symbols = not kwargs  # every argument a symbol: the variables are the statement's uses
        if not kwargs:  # the common case first: symbols of this trace and numbers
            ex_args, var_args = [], []
            for a in args:
                t = type(a)
                if t is Symbol and a._trace is self:
                    ex_args.append(a.example)
                    var_args.append(a.variable)
                    if numbers and type(a.example) is not float:
                        numbers = False
                elif t is float or t is int:
                    ex_args.append(a)
                    var_args.append(a)
                    only_symbols = False
                else:
                    ex_args = var_args = None
                    only_symbols = False
                    break
        if ex_args is None:
            if not prim.nondiff:
                stacked = _stack_lists(args)
                if stacked is not None:  # a list holding traced floats: one stacked array in the program
                    args = stacked
            ex_args = _map_leaves(args, self._example)
            numbers = False
        ex_kwargs = _map_leaves(kwargs, self._example) if kwargs else kwargs
        key = None if numbers and prim is not untake else _shape_key(prim, args, kwargs)
        example = self._shaped.get(key) if key is not None else None
        if example is None:
            try:
                example = prim.fun(*ex_args, **ex_kwargs)  # callers hold np.errstate(all="ignore")
            except (ArithmeticError, np.linalg.LinAlgError) as e:
                example = _evaluate_generic(prim, ex_args, ex_kwargs, e)
            if (key is not None and type(example) is np.ndarray and example.size >= _SHARED_EXAMPLE_SIZE
                    and example.base is None and not any(example is a for a in ex_args)):
                self._shaped[key] = example  # a new array of its own (never an argument), never written
        if prim in _SHAPE_QUERIES:
            return example
        if prim is _GETITEM and _has_bool_symbol(args[1:]):
            raise TracingError(f"Indexing with a traced boolean mask{_where()}: the result's shape "
                               f"depends on the data. Use wnp.where(mask, x, 0) instead.")
        try:
            if type(example) is float:  # Variable.like(self.fresh(), example), field by field
                var = _new_variable(Variable)
                var.name, var.shape, var.dtype, var.kind = self.fresh(), (), _FLOAT64, "float"
            else:
                var = Variable.like(self.fresh(), example)
        except TypeError:
            raise TracingError(f"primitive '{prim.__name__}' returns {type(example).__name__}, which a "
                               f"traced program cannot hold{_where()}") from None
        self.examples[var] = example
        if var_args is None:
            var_args = _map_leaves(args, self._argument)
        st = _new_statement(Statement)  # Statement((var,), prim, var_args, kwargs), field by field
        st.outs, st.prim, st.args, st.inplace = (var,), prim, tuple(var_args), False
        st._uses = st.args if only_symbols else None
        st.kwargs = _map_leaves(kwargs, self._argument) if kwargs else NO_KWARGS
        self.statements.append(st)
        symbol = _new_symbol(Symbol)  # Symbol(var, example, self)
        symbol.variable, symbol.example, symbol._trace = var, example, self
        if type(example) is np.ndarray and example.base is not None:  # a view: of an argument's?
            note_view(symbol, example, prim, args, kwargs, self, ex_args)
        return symbol


_new_statement, _new_symbol, _new_variable = Statement.__new__, Symbol.__new__, Variable.__new__
_FLOAT64 = np.dtype(np.float64)

_SHARED_EXAMPLE_SIZE = 256
"""Examples of at least this many elements are computed once per :func:`_shape_key`."""


def _shape_key(prim, args, kwargs):
    """For an elementwise primitive (one that broadcasts, or one defined by its derivatives:
    ``core.extend.elementwise``), or ``untake``, applied to symbols and numbers, the key that
    determines its result's shape and dtype: the primitive, each symbol's shape, dtype and kind,
    each number's type and value. Examples are only ever read for their shape and dtype, so
    statements of one key may share one example: an adjoint adding n one-element cotangents into
    an n-vector would otherwise compute n examples of n elements (quadratic time). None for other
    primitives and arguments."""
    if kwargs or not (prim.broadcasts or prim is untake or getattr(prim, "derivatives", None) is not None):
        return None
    key = [prim]
    for a in args:
        t = type(a)
        if t is Symbol:
            v = a.variable
            key.append((v.shape, v.dtype, v.kind))
        elif t is int and prim is untake:  # an index: untake's result has the shape it is given
            key.append(int)
        elif t is float or t is int or t is bool or t is complex:
            key.append((t, a))
        elif t is tuple and all(type(p) is int for p in a):  # untake's shape, or an index
            key.append((t, a))
        else:
            return None
    return tuple(key)


def _stack_lists(args):
    """``args`` with each list or tuple argument that holds a traced float (``wnp.sum([1.0, a*a])``)
    replaced by one stacked array (``wnp.array`` of it, nested lists too), and each list of numbers
    by an array, as NumPy reads them; None when there is none. Index tuples (``x[i, j]``: integer
    symbols, ints, slices) stay as they are."""
    changed = None
    for k, a in enumerate(args):
        if type(a) is list or type(a) is tuple:
            if _has_float_symbol(a):
                value = wnp.array(a)
            elif type(a) is list and _all_numbers(a):  # [1.0, 2.0] @ x: rules compute with it
                try:
                    value = np.array(a)
                except ValueError:  # ragged: the primitive reports it
                    continue
            else:
                continue
            if changed is None:
                changed = list(args)
            changed[k] = value
    return None if changed is None else tuple(changed)


def _all_numbers(obj):
    t = type(obj)
    if t is list:
        return bool(obj) and all(_all_numbers(o) for o in obj)
    return t is float or t is int or t is complex


def _has_float_symbol(obj):
    found = []
    _map_leaves(obj, lambda x: found.append(x) if type(x) is Symbol and x.variable.dtype.kind in "fc" else x)
    return bool(found)


def _generic(x):
    """A stand-in example of ``x``'s shape and dtype on which rules do not divide by zero or meet a
    singular matrix: NumPy scalars for Python numbers (inf and nan, not ZeroDivisionError), and
    ``2 I + 0.1`` (symmetric positive definite) for square matrices, 0.5 for other float arrays."""
    t = type(x)
    if t is float:
        return np.float64(x)
    if t is complex:
        return np.complex128(x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        if x.ndim >= 2 and x.shape[-1] == x.shape[-2]:
            n = x.shape[-1]
            return np.broadcast_to(2 * np.eye(n, dtype=x.dtype) + x.dtype.type(0.1), x.shape).copy()
        return np.full(x.shape, 0.5, x.dtype)
    return x


def _evaluate_generic(prim, ex_args, ex_kwargs, error):
    """The example of a statement whose rule failed on its examples' values (``1 / sqrt(1 - x*x)``
    at x = 1.0; ``inv`` of a singular placeholder): evaluated on generic stand-ins instead; only
    the shape and dtype are used. The original error if they fail too."""
    try:
        return prim.fun(*_map_leaves(ex_args, _generic), **(_map_leaves(ex_kwargs, _generic) if ex_kwargs
                                                             else {}))
    except Exception:  # noqa: BLE001 - any failure of the stand-ins: the error on the real examples
        raise error from None


def _symbol_to_var(x):
    return x.variable if type(x) is Symbol else x


_CONTAINERS = (tuple, list, dict)


def _map_leaves(obj, f):
    t = type(obj)
    if t is tuple or t is list:
        return t([_map_leaves(o, f) if type(o) in _CONTAINERS else f(o) for o in obj])
    if t is dict:
        return {k: _map_leaves(v, f) for k, v in obj.items()}
    return f(obj)


def _has_bool_symbol(obj):
    found = []
    _map_leaves(obj, lambda x: found.append(x) if type(x) is Symbol and x.variable.dtype.kind == "b" else x)
    return bool(found)


def is_input_leaf(x):
    """Whether a leaf of the arguments becomes a program input (arrays and floats) rather than a
    static value the trace specialises on (ints, strings, None, ...)."""
    return isinstance(x, (np.ndarray, np.generic, float, complex)) and not isinstance(x, bool)


def _param_names(fun, nargs):
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(nargs):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}_{i}")
        else:
            names.append(f"arg{i}")
    return names


def trace(fun, args, refuse_constant=None):
    """``Program.from_trace``: the statements ``fun(*args)`` performs, recorded on symbols, as the
    keyword arguments of the ``Program`` holding them (``refuse_constant``: called with each array a
    statement would hold as a constant, to refuse it by raising)."""
    args = tuple(args)
    leaves, in_tree = tree_flatten(args)
    arg_names = _param_names(fun, len(args))
    leaf_names = []
    for name, a in zip(arg_names, args):
        n = len(tree_flatten(a)[0])
        leaf_names += [name] if n == 1 else [f"{name}_{j}" for j in range(n)]
    n_inputs = sum(1 for x in leaves if is_input_leaf(x))
    builder = ProgramBuilder()
    builder.refuse_constant = refuse_constant
    inputs, input_names, in_leaves, boxed = [], [], [], []
    k = 1 - n_inputs
    for leaf, name in zip(leaves, leaf_names):
        if is_input_leaf(leaf):
            var = Variable.like(var_name(k), leaf)
            k += 1
            inputs.append(var)
            input_names.append(name)
            in_leaves.append(var)
            boxed.append(builder.symbol(var, leaf))  # the argument itself is the input's example
        else:
            in_leaves.append(leaf)
            boxed.append(leaf)
    TRACING[0] += 1
    try:
        with np.errstate(all="ignore"):  # abstract evaluation on placeholders may divide by zero
            out = fun(*tree_unflatten(in_tree, boxed))
    except ValueError as e:
        restate_exit(e)
    except UnsupportedNumpyFunction as e:
        fname = getattr(fun, "__name__", "the function")
        raise UnsupportedNumpyFunction(f"{e} (while tracing {fname}{_traceback_location(e)})") from e
    finally:
        TRACING[0] -= 1
    out_leaves, out_tree = tree_flatten(out)
    outputs = [map_vars(_symbol_to_var(o), lambda v: v) for o in out_leaves]
    for o in out_leaves:
        if type(o) in BOX_TYPES and type(o) is not Symbol:
            raise TracingError(f"{getattr(fun, '__name__', fun)} returned a {type(o).__name__} traced by "
                               f"another differentiation; a traced program's outputs are its own values")
    return dict(inputs=inputs, statements=builder.statements, outputs=outputs,
                name=python_identifier(getattr(fun, "__name__", "f")), input_names=input_names,
                in_tree=in_tree, in_leaves=in_leaves, out_tree=out_tree, examples=builder.examples)


def python_identifier(name):
    """``name`` made a Python identifier (for the generated function's name; ``f`` if nothing is left)."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "f"
    return name if not name[0].isdigit() and name != "_lambda_" else "f"
