"""The source front end: a Python function's source (``inspect`` + ``ast``) to a structured program.

The function body is interpreted statement by statement on symbols (``tracing.Symbol``): every
expression is evaluated by Python itself on symbols, so operators, ``wengert.numpy``/NumPy calls
and the rule table's primitives are recorded exactly as ``Program.from_trace`` records them (and
``math`` functions are sent to ``wengert.numpy``). Control flow is *not* run: an ``if`` on a traced
value becomes an :class:`~wengert.program.source.control.If` node (both arms recorded, their differing
variables, and the entries of lists changed alike in both, merged by phi outputs; ``a if c else b``
too), ``for`` over ``range(...)`` or over an array's first axis and
``while`` become :class:`~wengert.program.source.control.Loop` nodes whose body is recorded once, with the
loop-carried variables (names assigned in the body that exist before the loop) explicit.
``break``/``continue`` become flags guarding the rest of the body; the loop ends after an iteration
whose break flag is set; a loop's ``else`` block runs after it under a flag that each ``break``
clears (``source.parse``). ``int()`` of a traced number without derivative stays traced
(``range(int(wg.stop_gradient(a)))``: a trip count known at run time); of one with a derivative it is
refused, as on the tape. A ``try`` whose body computes nothing with traced values runs
at build time, as Python runs it. Control flow on static values (ints, shapes, constants) runs at build
time, as in ``from_trace``. Calls to other user functions are interpreted the same way, inline
(their parsed source is cached per function), and so are nested defs, lambdas and comprehensions
(``source.nested``: closures read at call time, comprehensions unrolled); a ``with`` block's context
managers run around the reading of its body. The program is specialised to the arguments' shapes
(floats when none are given): ints and other non-array arguments are static.

Anything else raises :class:`~wengert.program.source.control.TransformError` naming the construct, the
file and the line; the tape (``wg.grad``) handles such code.

This module holds :class:`SourceProgram` and :func:`from_source`; the reading is in
``source.parse``, the interpreter in ``source.interpreter`` and ``source.loops``, the derivatives
in ``source.adjoint``.
"""

import functools
import types

import numpy as np

from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.program import rendering
from wengert.program.captures import scan
from wengert.program.compiled_args import Compiled
from wengert.program.ir import Variable
from wengert.program.source.adjoint import grad_source, jvp_source
from wengert.program.source.builder import SourceBuilder
from wengert.program.source.checkpoint import check_policy
from wengert.program.source.codegen import block_source, compile_block
from wengert.program.source.control import TransformError
from wengert.program.source.inplace import update_in_place
from wengert.program.source.interpreter import Interpreter
from wengert.program.source.parse import parsed_source
from wengert.program.source.values import unsymbolic
from wengert.program.tracing import is_input_leaf, python_identifier

__all__ = ["SourceProgram", "from_source", "TransformError"]


class SourceProgram:
    """A program built from a function's source (``wg.Program.from_source``): ``inputs``
    (Variables; the user's parameter names), ``body`` (a block with ``If``/``Loop`` nodes),
    ``outputs``; ``statics``: the non-array arguments it was specialised to, by position."""

    def __init__(self, name, inputs, body, outputs, *, params, statics, out_tree, filename=None):
        self.name = name
        self.inputs = list(inputs)
        self.body = list(body)
        self.outputs = list(outputs)
        self.params = list(params)  # per positional argument: Variable or static value
        self.statics = statics
        self.out_tree = out_tree
        self.filename = filename
        self.examples = {}  # Variable -> the value abstract evaluation computed (rules run on these)
        self.captures = None  # what the function reads besides its arguments (program.captures)
        self.n_captured = 0  # the last inputs: the captured arrays, read at each call
        self._function = None

    @property
    def source(self):
        """The program as Python source (loops stay loops)."""
        return block_source(self.name, self.inputs, update_in_place(self.body), self.outputs)[0]

    def __str__(self):
        return self.source

    def __repr__(self):
        return f"<wengert SourceProgram {self.name}: {len(self.inputs)} inputs, {len(self.body)} nodes>"

    def flat_inputs(self, args):
        """The input values among ``args``, checked against what the program was built for."""
        if len(args) != len(self.params):
            raise TypeError(f"program {self.name}: takes {len(self.params)} arguments, got {len(args)}")
        values = []
        for a, p in zip(args, self.params):
            if type(p) is Variable:
                if np.shape(a) != p.shape:
                    raise ValueError(f"program {self.name}: argument {p.name} was shaped {p.shape} when the "
                                     f"program was built, got {np.shape(a)}; build it again for this shape")
                values.append(a)
            elif not (type(a) is type(p) and a == p):
                raise ValueError(f"program {self.name}: built for the static argument {p!r}, got {a!r}")
        return values

    def captured(self):
        """The captured arrays' values now; an error when a captured value it was built for changed."""
        if self.captures is None:
            return ()
        values = self.captures.reader()()
        if values is None:
            raise ValueError(f"program {self.name}: the captured value {self.captures.changed()} changed "
                             f"since the program was built; build it again (wg.source_grad and "
                             f"wg.source_jvp do)")
        return values

    def __call__(self, *args):
        """Run the program."""
        if self._function is None:
            self._function = compile_block(self.name, self.inputs, update_in_place(self.body), self.outputs)
        out = self._function(*self.flat_inputs(args), *self.captured())
        return tree_unflatten(self.out_tree, [out] if len(self.outputs) == 1 else list(out))

    def grad(self, argnums=0, checkpoint="all", snapshots=None):
        """The gradient program (reverse mode, loops kept as loops; ``checkpoint``: see ``source_grad``)."""
        check_policy(checkpoint, snapshots, f"Program.grad({self.name})")
        return grad_source(self, argnums, checkpoint=checkpoint, snapshots=snapshots)

    def jvp(self):
        """The forward-mode program: inputs, then one tangent per input."""
        return jvp_source(self)


def _callable_kind(fun):
    """``(function to interpret, positional arguments bound first, keywords bound)`` for what
    ``source_grad`` and ``source_jvp`` accept; refuses what has no source to transform."""
    pre, kw = (), {}
    while True:
        if isinstance(fun, Compiled):
            if fun.transform is not None:
                raise TransformError(f"{fun!r} is a compiled derivative; the source transformation reads "
                                     f"Python source. Give it the function itself (source_grad(f)), or "
                                     f"keep the compiled one (wg.compile(f).grad()).")
            fun = fun.fun
        elif isinstance(fun, functools.partial):
            pre, kw = tuple(fun.args) + pre, {**fun.keywords, **kw}
            fun = fun.func
        else:
            break
    if isinstance(fun, types.FunctionType):
        return fun, pre, kw
    what = type(fun).__name__
    raise TransformError(f"{getattr(fun, '__name__', fun)!r} is a {what}, not a Python function with source "
                         f"to transform (the source transformation reads a def or a lambda). Differentiate "
                         f"it with the tape (wg.grad), or wrap it: def f(x): return "
                         f"{getattr(fun, '__name__', 'fun')}(x).")


def from_source(fun, *example_args):
    """``wg.Program.from_source(fun, *example_args)``: ``fun``'s source as a structured program,
    specialised to the shapes of ``example_args`` (Python floats for every parameter if none).
    ``fun`` is a def or a lambda (or ``wg.compile`` of one, or a ``functools.partial`` of one)."""
    fun, pre, bound_kw = _callable_kind(fun)
    parsed = parsed_source(fun)
    params = [a.arg for a in parsed.node.args.args]
    free = [p for p in params[len(pre):] if p not in bound_kw]
    defaults = dict(zip(params[len(params) - len(fun.__defaults__ or ()):], fun.__defaults__ or ()))
    if not example_args:
        example_args = tuple(1.0 for p in free if p not in defaults)
    if not len([p for p in free if p not in defaults]) <= len(example_args) <= len(free):
        raise TypeError(f"{parsed.name} takes {len(free)} arguments, got {len(example_args)}")
    # names the generated module defines (helpers, math functions) or the code uses: the user's
    # variables of those names are renamed (cos -> cos2), never shadow them
    taken = {"np", "math", "stack", "range", "len"} | rendering.reserved_names()
    builder = SourceBuilder(names=taken)  # arguments too: an argument named cos must not hide math's cos
    captures = scan(fun, f"source transformation of {parsed.name}", strict=False)  # the interpreter refuses
    # writes itself, naming the line
    captured = [builder.symbol(Variable.like(builder.fresh(name), n.value), n.value)
                for name, n in zip(captures.input_names(params), captures.arrays)]
    variables = [c.variable for c in captured]
    snapshot = captures.snapshot()
    with captures.installed(captured):  # the captured arrays are inputs, read at each call
        program = _interpret(fun, parsed, builder, free, example_args, params, pre, bound_kw, defaults)
    captures.check_unwritten(captured, variables)
    captures.check_unchanged(snapshot)
    program.inputs += variables
    program.captures, program.n_captured = (captures if captures.nodes else None), len(variables)
    return program


def _interpret(fun, parsed, builder, free, example_args, params, pre, bound_kw, defaults):
    interp = Interpreter(fun, builder)
    inputs, slots = [], []
    for name, a in zip(free, example_args):
        if isinstance(a, (list, tuple, dict)):
            raise TypeError(f"{parsed.name}: argument {name} is a {type(a).__name__}; the source "
                            f"transformation takes arrays, numbers and static values (use wg.grad for "
                            f"pytrees)")
        if is_input_leaf(a):
            var = Variable.like(builder.fresh(name), a)
            inputs.append(var)
            slots.append(var)
            interp.env[name] = builder.symbol(var, a)  # the argument is its example: rules run on it
        else:
            slots.append(a)
            interp.env[name] = a
    for name, value in list(zip(params, pre)) + list(bound_kw.items()):
        interp.env[name] = value
    for name, value in defaults.items():
        interp.env.setdefault(name, value)
    out = interp.run_function()
    leaves, out_tree = tree_flatten(out)
    outputs = [unsymbolic(o) for o in leaves]
    program = SourceProgram(python_identifier(fun.__name__), inputs, builder.statements, outputs,
                            params=slots, statics=None, out_tree=out_tree, filename=parsed.filename)
    program.examples = builder.examples
    return program
