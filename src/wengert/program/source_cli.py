"""``python -m wengert adjoint FILE.py:FUNCTION [--table] [--args EXPR] [--argnums 0,1] [--jvp]
[--checkpoint all|binomial|ctz] [--snapshots S]``:
the derivative program built from a function's source, or the second seed's two-column view."""

import importlib.util
import os
import sys

import numpy as np

__all__ = ["run", "load_function"]


def load_function(target):
    """The function named by ``FILE.py:FUNCTION`` (the file is imported as a module)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"python -m wengert adjoint: expected FILE.py:FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise SystemExit(f"python -m wengert adjoint: no file {path!r}")
    module_name = "wengert_adjoint_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(path))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    fun = getattr(module, name, None)
    if fun is None or not callable(fun):
        raise SystemExit(f"python -m wengert adjoint: {path} defines no function {name!r}")
    return fun


def run(args):
    """Print the program (or the table); returns the exit status."""
    import wengert as wg

    fun = load_function(args.target)
    example = ()
    if args.args:
        value = eval(args.args, {"np": np, "__builtins__": __builtins__})  # noqa: S307 - the user's own argument
        example = value if isinstance(value, tuple) else (value,)
    nums = tuple(int(a) for a in args.argnums.split(",") if a.strip())
    argnums = nums[0] if len(nums) == 1 else nums
    try:
        policy = {"checkpoint": getattr(args, "checkpoint", "all"),
                  "snapshots": getattr(args, "snapshots", None)}
        d = wg.source_jvp(fun) if args.jvp else wg.source_grad(fun, argnums, **policy)
        d.program(*example)
        print(d.table() if args.table and not args.jvp else d.source, end="")
        if args.table and not args.jvp:
            print()
    except wg.TransformError as e:
        print(f"python -m wengert adjoint: {e}", file=sys.stderr)
        return 1
    return 0
