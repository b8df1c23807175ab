"""``Program``: a straight-line program (the IR's statements with named inputs and outputs) and what
can be done with one, each method a direct call into the module that does it: traced from a
function (``tracing``) or built from its source (``source.program``), differentiated (``adjoint``),
printed and compiled (``codegen``), drawn (``dot``). The passes (``pipeline``) take and return
Programs; they make new ones with :meth:`Program.with_statements`.
"""

import numpy as np

from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.program import adjoint, codegen, dot, tracing
from wengert.program.ir import Variable
from wengert.program.source import program as source_program

__all__ = ["Program"]


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
    def from_trace(cls, fun, *example_args, refuse_constant=None):
        """Trace ``fun`` on symbols shaped like ``example_args`` (lazily: no data is computed on). The
        program holds each constant array as it was when the operation reading it ran (a copy);
        ``refuse_constant(array)``, if given, is called first and may refuse it by raising."""
        return cls(**tracing.trace(fun, example_args, refuse_constant))

    @classmethod
    def from_source(cls, fun, *example_args):
        """``fun``'s Python source as a program with structured control flow (``if``, loops), for
        arguments like ``example_args`` (Python floats if none): see docs/source.md."""
        return source_program.from_source(fun, *example_args)

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
        return adjoint.vjp_program(self)

    def grad(self, argnums=0):
        """The gradient program of a scalar-output program (``jax.grad`` of it)."""
        return adjoint.grad_program(self, argnums)

    def value_and_grad(self, argnums=0):
        """Returns ``(value, gradient)`` (``jax.value_and_grad`` of the program)."""
        return adjoint.grad_program(self, argnums, with_value=True)

    def jvp(self):
        """The forward-mode program: inputs and one tangent per input, returning
        ``(outputs, output tangents)``, from the rule table's JVP rules."""
        return adjoint.jvp_program(self)

    # -- views -----------------------------------------------------------------------------------
    def __str__(self):
        return codegen.pretty(self)

    def __repr__(self):
        return (f"<wengert Program {self.name}: {len(self.inputs)} inputs, {len(self.statements)} "
                f"statements, {len(self.outputs)} outputs>")

    @property
    def source(self):
        """The program as Python source: plain NumPy (and ``math`` for Python floats)."""
        return codegen.to_source(self)

    def to_dot(self):
        """The dataflow graph in Graphviz dot: inputs, one record per statement, outputs."""
        return dot.to_dot(self)

    # -- running ---------------------------------------------------------------------------------
    @property
    def function(self):
        """The compiled Python function (flat inputs, flat outputs), made once by exec of the source."""
        if self._function is None:
            self._function = codegen.compile_program(self)
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
