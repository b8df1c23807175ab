"""``python -m wengert adjoint FILE.py:FUNCTION [--table] [--args ARGS] [--argnums 0,1] [--jvp]
[--checkpoint all|binomial|ctz] [--snapshots S]``:
the derivative program built from a function's source, or the two-column view.

``--args`` gives the example arguments the program is specialised to, as in a call: by position
(``np.ones(3), 4``) or by name (``v=np.ones(3), n=4``), with ``np`` for NumPy; a parameter given
no value takes its default, else the float 1.0. A parameter the function's source shows is not a
float (indexed, iterated over, a bound of ``range``, a length, a shape, a NumPy array method) gets
no 1.0: the command asks for ``--args`` instead, naming the parameter and the line. Bad input (no
such file or function, an expression that does not evaluate, arguments the function cannot run on)
prints one paragraph and exits with status 2; a function outside the transformable subset exits
with status 1."""

import ast
import importlib.util
import inspect
import os
import sys
import textwrap

import numpy as np

from wengert.program.source.api import source_grad, source_jvp
from wengert.program.source.control import TransformError

__all__ = ["run", "load_function", "example_arguments", "BadInput"]

_PROG = "python -m wengert adjoint"


class BadInput(Exception):
    """Input the command cannot work with: reported in one paragraph, exit status 2."""


def load_function(target):
    """The function named by ``FILE.py:FUNCTION`` (the file is imported as a module)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise BadInput(f"expected FILE.py:FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise BadInput(f"no file {path!r}")
    module_name = "wengert_adjoint_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(path))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None:
        raise BadInput(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's module failed to import: say how, in one line
        raise BadInput(f"importing {path} failed: {type(e).__name__}: {e}{_user_line(e, path)}") from None
    finally:
        sys.path.pop(0)
    fun = getattr(module, name, None)
    if fun is None or not callable(fun):
        raise BadInput(f"{path} defines no function {name!r}")
    return fun


def _user_line(error, path):
    tb, found = error.__traceback__, ""
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(path):
            found = f" (line {tb.tb_lineno})"
        tb = tb.tb_next
    return found


def _collect(*args, **kwargs):
    return args, kwargs


def example_arguments(fun, text):
    """The positional example arguments for ``fun`` that ``--args TEXT`` gives (see the module docs)."""
    return _example_arguments(fun, text)[0]


def _example_arguments(fun, text):
    """``(arguments, names of the parameters given the float 1.0)``."""
    try:
        params = [p for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    args, kwargs = (), {}
    if text:
        try:
            args, kwargs = eval(f"_collect({text})", {"np": np, "_collect": _collect})  # noqa: S307 - the user's own argument
        except Exception as e:  # noqa: BLE001 - any error in the expression: one paragraph
            raise BadInput(f"--args {text!r} does not evaluate: {type(e).__name__}: {e}. Write the arguments "
                           f"as in a call, e.g. --args 'v=np.ones(3), n=4' (np is NumPy)") from None
    names = [p.name for p in params]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise BadInput(f"--args names {', '.join(unknown)}, which {fun.__name__}({', '.join(names)}) "
                       f"does not take")
    if len(args) > len(params):
        raise BadInput(f"--args gives {len(args)} arguments; {fun.__name__}({', '.join(names)}) takes "
                       f"{len(params)}")
    out, floats = [], []
    for k, p in enumerate(params):
        if k < len(args):
            if p.name in kwargs:
                raise BadInput(f"--args gives {p.name} twice (by position and by name)")
            out.append(args[k])
        elif p.name in kwargs:
            out.append(kwargs[p.name])
        elif p.default is not p.empty:
            if any(q.name in kwargs for q in params[k + 1:]):
                out.append(p.default)
            else:
                break
        else:
            out.append(1.0)
            floats.append(p.name)
    _check_floats(fun, floats, bool(text))
    return tuple(out), floats


# -- which parameters are obviously not floats: read from the function's source ------------------------

_ARRAY, _INT = "np.ones(3)", "4"
_SIZED = {"zeros", "ones", "empty", "full", "eye", "identity"}  # np.zeros(n): n is a size


def _not_float_uses(fun):
    """``{parameter: (what, line, example value)}``: each parameter's first use, in the source, that
    the float 1.0 cannot serve. Empty when the source cannot be read."""
    try:
        lines, first = inspect.getsourcelines(fun)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return {}
    fdef = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fdef is None:
        return {}
    params = {a.arg for a in fdef.args.posonlyargs + fdef.args.args}
    uses = []

    def note(node, what, example):
        if isinstance(node, ast.Name) and node.id in params:
            uses.append((node.lineno + first - 1, node.id, what, example))

    for node in ast.walk(fdef):
        if isinstance(node, ast.Subscript):
            note(node.value, "is indexed", _ARRAY)
            for part in ast.walk(node.slice):
                note(part, "is an index", _INT)
        elif isinstance(node, (ast.For, ast.comprehension)):
            note(node.iter, "is iterated over", _ARRAY)
        elif isinstance(node, ast.Attribute) and not hasattr(1.0, node.attr):
            note(node.value, f"has .{node.attr}", _ARRAY)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            note(node.left, "is a matrix operand of @", _ARRAY)
            note(node.right, "is a matrix operand of @", _ARRAY)
        elif isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if callee == "range":
                for a in node.args:
                    note(a, "is a bound of range()", _INT)
            elif callee == "len" and node.args:
                note(node.args[0], "is an argument of len()", _ARRAY)
            elif callee in _SIZED and node.args:
                note(node.args[0], f"is the size given to {callee}()", _INT)
    found = {}
    for line, name, what, example in sorted(uses):
        found.setdefault(name, (what, line, example))
    return found


def _check_floats(fun, floats, given):
    """BadInput naming the parameters in ``floats`` (about to be the float 1.0) that are not floats."""
    wrong = _not_float_uses(fun)
    named = [n for n in floats if n in wrong]
    if not named:
        return
    why = ", ".join(f"{n} {wrong[n][0]} (line {wrong[n][1]})" for n in named)
    example = ", ".join(f"{n}={wrong[n][2]}" for n in named)
    params = ", ".join(inspect.signature(fun).parameters)
    more = "" if given else "example arguments"
    raise BadInput(f"{fun.__name__}({params}) needs {more or 'more example arguments'}: {why}, so the "
                   f"float 1.0 will not do; give {'them' if len(named) > 1 else 'it'} with --args, e.g. "
                   f"--args '{example}' (by position or by name; np is NumPy)")


def _describe(fun, example):
    names = [p for p in inspect.signature(fun).parameters][:len(example)]
    shown = []
    for n, a in zip(names, example):
        shown.append(f"{n}=<array {a.dtype}{list(a.shape)}>" if isinstance(a, np.ndarray) else f"{n}={a!r}")
    return f"{fun.__name__}({', '.join(shown)})"


def run(args):
    """Print the program (or the table); returns the exit status."""
    try:
        fun = load_function(args.target)
        example, floats = _example_arguments(fun, args.args)
        try:
            nums = tuple(int(a) for a in args.argnums.split(",") if a.strip())
        except ValueError:
            raise BadInput(f"--argnums {args.argnums!r}: expected positions, e.g. 0 or 0,1") from None
        argnums = nums[0] if len(nums) == 1 else nums
        policy = {"checkpoint": getattr(args, "checkpoint", "all"),
                  "snapshots": getattr(args, "snapshots", None)}
        d = source_jvp(fun) if args.jvp else source_grad(fun, argnums, **policy)
        try:
            d.program(*example)
        except TransformError:
            raise
        except Exception as e:  # noqa: BLE001 - the function did not run on these arguments: one paragraph
            given = ", ".join(f"{f}=np.ones(3)" for f in floats)
            hint = (f"; {', '.join(floats)} {'was' if len(floats) == 1 else 'were'} the float 1.0: give "
                    f"example arguments with --args, e.g. --args '{given}' (by position or by name; np is "
                    f"NumPy)") if floats else ""
            raise BadInput(f"building the derivative of {_describe(fun, example)} failed: "
                           f"{type(e).__name__}: {e}{hint}") from None
        print(d.table() if args.table and not args.jvp else d.source, end="")
        if args.table and not args.jvp:
            print()
    except BadInput as e:
        print(f"{_PROG}: {e}", file=sys.stderr)
        return 2
    except TransformError as e:
        print(f"{_PROG}: {e}", file=sys.stderr)
        return 1
    return 0
