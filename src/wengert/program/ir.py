"""The IR: a straight-line program in SSA/ANF form (a Wengert list as a program).

Every :class:`Statement` applies one primitive of the rule table (``wengert.rules``) to variables and
constants and assigns its result to a fresh :class:`Variable`: no compound expressions, every
variable assigned once. A :class:`Program` has named inputs, statements and outputs; it prints
in SSA notation (``v1 = log(v_1)``), renders as plain NumPy source, and runs as a Python
function made by ``exec`` of that source.
"""

from types import MappingProxyType

import numpy as np

from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core.primitive import Primitive

__all__ = ["Variable", "Statement", "Program", "var_name", "map_vars", "vars_in", "placeholder", "zero_of",
           "dup", "provide", "renamed", "binary"]

_PROVIDED = {}
"""What the modules built on the IR do with a program, by the name ``Program`` knows it by: the
printer and the code generator (``codegen``), the dot picture (``dot``), the tracer
(``tracing``), derivative programs (``adjoint``), the source front end (``source``). The IR is
the bottom of ``wengert.program`` and imports none of them; ``wengert.program``'s ``__init__``
hands them over with :func:`provide` when the package is imported (before any Program exists)."""


def provide(**functions):
    """Registers the functions ``Program``'s methods call (see ``_PROVIDED``)."""
    _PROVIDED.update(functions)


def _provided(name):
    return _PROVIDED[name]


def _dup_impl(x, n=2):
    """``(x, x, ...)``: one value, ``n`` uses (explicit duplication: every variable used once)."""
    return (x,) * n


dup = Primitive(_dup_impl, name="dup")
"""Explicit duplication, inserted by ``passes.explicit_dup``; its adjoint is ``+``."""


_FLOAT64 = np.dtype(np.float64)

NO_KWARGS = MappingProxyType({})
"""The keyword arguments of a statement that has none: one shared, read-only empty mapping (a long
program's statements mostly have none; a dict each would be a tracked object each)."""


class Variable:
    """One SSA variable: a name, and the shape, dtype and kind (``"float"`` for a Python float,
    ``"scalar"`` for a NumPy scalar, ``"array"`` for an ndarray) of the values it holds."""

    __slots__ = ("name", "shape", "dtype", "kind")

    def __init__(self, name, shape, dtype, kind):
        self.name = name
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.kind = kind

    @classmethod
    def like(cls, name, value):
        """A variable named ``name`` holding values like ``value``."""
        if type(value) is float:
            return cls(name, (), _FLOAT64, "float")
        if isinstance(value, np.ndarray):
            return cls(name, value.shape, value.dtype, "array")
        if isinstance(value, np.generic):
            return cls(name, (), value.dtype, "scalar")
        if isinstance(value, (bool, int, complex)):
            return cls(name, (), np.result_type(value), type(value).__name__)
        raise TypeError(f"a traced program's values must be arrays or numbers, got {type(value).__name__}")

    def describe(self):
        """``float64[3,4]``, or ``float`` for a Python float."""
        if self.kind == "float":
            return "float"
        return f"{self.dtype.name}[{','.join(str(n) for n in self.shape)}]"

    def __repr__(self):
        return self.name


def renamed(var, name):
    """``Variable(name, var.shape, var.dtype, var.kind)``, made field by field (passes make many)."""
    v = _new_variable(Variable)
    v.name, v.shape, v.dtype, v.kind = name, var.shape, var.dtype, var.kind
    return v


def binary(out, prim, x, y):
    """``Statement((out,), prim, (x, y))``, made field by field (passes make many)."""
    s = _new_statement(Statement)
    s.outs, s.prim, s.args, s.kwargs, s.inplace = (out,), prim, (x, y), NO_KWARGS, False
    s._uses = s.args if type(x) is Variable and type(y) is Variable else None
    return s


def var_name(k):
    """The naming: v_1 for v_{-1}, v0, v1, ..."""
    return f"v_{-k}" if k < 0 else f"v{k}"


def placeholder(var):
    """A value of ``var``'s shape, dtype and kind (ones; zeros for integers and booleans, which
    are then valid indices): what abstract evaluation computes on instead of data."""
    fill = 1 if var.dtype.kind in "fc" else 0
    if var.kind == "float":
        return 1.0
    if var.kind in ("int", "bool", "complex"):
        return {"int": 0, "bool": False, "complex": 1.0 + 0j}[var.kind]
    if var.kind == "scalar":
        return var.dtype.type(fill)
    return np.full(var.shape, fill, dtype=var.dtype)


def zero_of(var):
    """The zero of ``var``'s kind, shape and dtype."""
    if var.kind == "float":
        return 0.0
    if var.kind != "array":
        return var.dtype.type(0)
    return np.zeros(var.shape, var.dtype)


_CONTAINERS = (tuple, list, dict)


def map_vars(obj, f):
    """``obj`` (an argument: a constant, a Variable, or tuples/lists/dicts/slices of them) with
    every Variable ``v`` replaced by ``f(v)``."""
    t = type(obj)
    if t is Variable:
        return f(obj)
    if t is tuple or t is list:
        return t([f(o) if type(o) is Variable else (map_vars(o, f) if type(o) in _CONTAINERS else o)
                  for o in obj])
    if t is dict:
        return {k: map_vars(v, f) for k, v in obj.items()}
    return obj


def vars_in(obj, found=None):
    """The Variables in ``obj`` (see :func:`map_vars`), in order, with repeats."""
    found = [] if found is None else found
    t = type(obj)
    if t is Variable:
        found.append(obj)
    elif t is tuple or t is list:
        for o in obj:
            if type(o) is Variable:
                found.append(o)
            elif type(o) in _CONTAINERS:
                vars_in(o, found)
    elif t is dict:
        for o in obj.values():
            vars_in(o, found)
    return found


class Statement:
    """``outs = prim(*args, **kwargs)``; ``inplace`` marks an accumulation that the code generator
    may write as ``a += b`` (set by ``passes.accumulate_in_place`` only)."""

    __slots__ = ("outs", "prim", "args", "kwargs", "inplace", "_uses")

    def __init__(self, outs, prim, args, kwargs=None, inplace=False):
        self.outs = tuple(outs)
        self.prim = prim
        self.args = tuple(args)
        self.kwargs = dict(kwargs) if kwargs else NO_KWARGS
        self.inplace = inplace
        self._uses = None

    @property
    def out(self):
        """The single output (every primitive but ``dup`` has one)."""
        return self.outs[0]

    def uses(self):
        """The Variables this statement reads, with repeats (a statement is never changed: passes
        make new ones, so this is computed once)."""
        if self._uses is None:
            args = self.args
            if not self.kwargs and all([type(a) is Variable for a in args]):
                self._uses = args  # the common case: no tuple of its own (fewer objects to collect)
            else:
                found = vars_in(args)
                self._uses = tuple(vars_in(self.kwargs, found) if self.kwargs else found)
        return self._uses

    def replaced(self, f, outs=None):
        """A copy with every argument Variable ``v`` replaced by ``f(v)``."""
        return Statement(self.outs if outs is None else outs, self.prim, map_vars(self.args, f),
                         map_vars(self.kwargs, f) if self.kwargs else None, self.inplace)

    def __repr__(self):
        return _provided("pretty_statement")(self)


_new_variable, _new_statement = Variable.__new__, Statement.__new__


def _same_static(a, b):
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return a is b


class Program:
    """A straight-line program: ``inputs`` (Variables), ``statements``, ``outputs`` (Variables or
    constants). ``in_tree``/``in_leaves`` say how positional arguments (pytrees) map to inputs:
    each leaf is an input Variable or a static value the program was traced with; ``out_tree`` how
    the outputs are returned. ``input_names`` are the user's names, one per input."""

    def __init__(self, inputs, statements, outputs, *, name="f", input_names=None, in_tree=None,
                 in_leaves=None, out_tree=None, examples=None):
        self.inputs = list(inputs)
        self.statements = list(statements)
        self.outputs = list(outputs)
        self.name = name
        self.input_names = list(input_names) if input_names is not None else [v.name for v in self.inputs]
        self.in_leaves = list(in_leaves) if in_leaves is not None else list(self.inputs)
        if in_tree is None:
            in_tree = tree_flatten(tuple(range(len(self.in_leaves))))[1]
        self.in_tree = in_tree
        if out_tree is None:
            out_tree = tree_flatten(self.outputs[0] if len(self.outputs) == 1 else
                                    tuple(range(len(self.outputs))))[1]
        self.out_tree = out_tree
        self.examples = examples if examples is not None else {}
        """Variable -> the value it had when traced (abstract evaluation's examples, see
        ``tracing``): derivative programs evaluate their rules on them. Empty is valid (then
        placeholders are used); ``wg.compile`` keeps only its inputs' (the rest is computed again
        from them when a derivative program is derived)."""
        self.captures = None
        """``wg.compile``'s programs: what the function captured (``program.captures``); its arrays
        are the last ``len(captures.arrays)`` positional arguments, read now when they are left out."""
        self._function = None
        self._census = None
        self._counts = None  # passes.use_counts, where a pass computed it on the way (read-only)

    def census(self):
        """``(primitives, arrays)``: the set of primitives the statements apply, and whether one of
        them computes an array (what most passes test first to return the program unchanged).
        Computed once per program; a pass whose result applies no primitive and makes no array its
        input did not may hand it on (``with_statements(..., census=...)``): a superset is valid."""
        if self._census is None:
            statements = self.statements
            arrays = False
            for s in statements:
                outs = s.outs
                if outs[0].kind == "array" or (len(outs) > 1 and any([o.kind == "array" for o in outs])):
                    arrays = True
                    break
            self._census = ({s.prim for s in statements}, arrays)
        return self._census

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_trace(cls, fun, *example_args):
        """Trace ``fun`` on symbols shaped like ``example_args`` (lazily: no data is computed on)."""
        return _provided("trace_program")(fun, example_args)

    @classmethod
    def from_source(cls, fun, *example_args):
        """``fun``'s Python source as a program with structured control flow (``if``, loops), for
        arguments like ``example_args`` (Python floats if none): see docs/source.md."""
        return _provided("from_source")(fun, *example_args)

    def with_statements(self, statements, outputs=None, census=None, **changes):
        """A copy with other statements (and outputs); everything else kept. ``census``: the new
        statements' :meth:`census`, or a superset of it, where the caller knows one."""
        fields = dict(inputs=self.inputs, name=self.name, input_names=self.input_names,
                      in_tree=self.in_tree, in_leaves=self.in_leaves, out_tree=self.out_tree,
                      examples=self.examples)
        fields.update(changes)
        inputs = fields.pop("inputs")
        program = Program(inputs, statements, self.outputs if outputs is None else outputs, **fields)
        program._census = census
        return program

    # -- derivatives -----------------------------------------------------------------------------
    def vjp(self):
        """The reverse-mode program: inputs and one cotangent per output, returning
        ``(outputs, input cotangents)``; the adjoints are traced from the rule table's VJP rules."""
        return _provided("vjp_program")(self)

    def grad(self, argnums=0):
        """The gradient program of a scalar-output program (``jax.grad`` of it)."""
        return _provided("grad_program")(self, argnums)

    def value_and_grad(self, argnums=0):
        """Returns ``(value, gradient)`` (``jax.value_and_grad`` of the program)."""
        return _provided("grad_program")(self, argnums, with_value=True)

    def jvp(self):
        """The forward-mode program: inputs and one tangent per input, returning
        ``(outputs, output tangents)``, from the rule table's JVP rules."""
        return _provided("jvp_program")(self)

    # -- views -----------------------------------------------------------------------------------
    def __str__(self):
        return _provided("pretty")(self)

    def __repr__(self):
        return (f"<wengert Program {self.name}: {len(self.inputs)} inputs, {len(self.statements)} "
                f"statements, {len(self.outputs)} outputs>")

    @property
    def source(self):
        """The program as Python source: plain NumPy (and ``math`` for Python floats)."""
        return _provided("to_source")(self)

    def to_dot(self):
        """The dataflow graph in Graphviz dot: inputs, one record per statement, outputs."""
        return _provided("to_dot")(self)

    # -- running ---------------------------------------------------------------------------------
    @property
    def function(self):
        """The compiled Python function (flat inputs, flat outputs), made once by exec of the source."""
        if self._function is None:
            self._function = _provided("compile_program")(self)
        return self._function

    def flat_inputs(self, args):
        """The input values among ``args`` (checked against the traced structure and shapes); the
        captured arrays' values now when ``args`` leave them out (a program of ``wg.compile``)."""
        captures = self.captures
        n = len(self.in_tree[2]) - len(captures.arrays) if captures is not None else -1
        if captures is not None and captures.arrays and len(args) == n:
            captured = captures.reader()()
            if captured is None:
                raise ValueError(f"program {self.name}: the captured value {captures.changed()} changed "
                                 f"since it was traced; trace it again (wg.compile does so by itself)")
            args = tuple(args) + captured
        leaves, tree = tree_flatten(tuple(args))
        if tree != self.in_tree:
            raise TypeError(f"program {self.name}: called with arguments structured differently from "
                            f"those it was traced with; trace it again for these arguments")
        values = []
        for leaf, slot in zip(leaves, self.in_leaves):
            if type(slot) is Variable:
                if np.shape(leaf) != slot.shape:
                    raise ValueError(f"program {self.name}: input {slot.name} has shape {slot.shape}, "
                                     f"got {np.shape(leaf)}; trace it again for this shape")
                values.append(leaf)
            elif not _same_static(leaf, slot):
                raise ValueError(f"program {self.name}: traced with the static argument {slot!r}, called "
                                 f"with {leaf!r}; trace it again (wg.compile does so by itself)")
        return values

    def __call__(self, *args):
        """Run the program (``fun(*args)`` of the traced function, without tracing again)."""
        out = self.function(*self.flat_inputs(args))
        if len(self.outputs) == 1:
            return tree_unflatten(self.out_tree, [out])
        return tree_unflatten(self.out_tree, out)
