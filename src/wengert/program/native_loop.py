"""``wg.iterate`` inside a program on Numba (``wg.compile(f, backend="numba")``): the loop statement's
forward and reverse sweeps as machine code, so that the program calling them compiles as a whole.

Contract. A loop statement (``loop_node``) whose step's forward and VJP programs Numba compiles
(``native_build.native_function``: each its own cached module) gets two njit drivers, written for the
loop to one more cached module: ``forward(*x, *params)`` runs the step n times; ``reverse(g, out, *x,
*params)`` follows the loop's schedule, generated as it is followed by :data:`SCHEDULES` (Numba
generators giving the actions of ``wengert.checkpointing.binomial`` / ``ctz``, a test compares
them), keeping states in one preallocated array per leaf of :func:`snapshot_slots` rows: O(snapshots)
states whatever n (``checkpoint="all"``: n - 1, as the Python statement keeps them). Both return what
the Python statement returns (packed). The values are the Python statement's to rounding: the same
steps from the same states, the cotangents summed in the same order. ``wengert.checkpointing.Stats``
does not count a native loop's evaluations.

A ``wg.checkpoint`` statement likewise calls its function's forward program and VJP program compiled by
Numba (:func:`checkpoint_kernel`), packing as the Python statement packs.

Where the loop cannot be native -- a leaf or parameter that is not a Python float or a float64 array
of at least one dimension, a step Numba cannot compile -- :func:`loop_kernel` says why in words, and
the program runs as Python with one ``NativeFallbackWarning`` naming the primitive (``native_build``).
"""

import re
import warnings

import numpy as np

from wengert.api.checkpointing.schedules import default_snapshots
from wengert.program.native import NativeFallbackWarning, require_numba
from wengert.program.native_build import _import, native_function
from wengert.program.rendering import helper_source

__all__ = ["SCHEDULES", "snapshot_slots", "loop_kernel", "checkpoint_kernel"]


# -- the schedules, in the dialect Numba compiles (their sources go into each loop's module) -----------

def popcount(i):
    """The number of bits set in ``i`` >= 0."""
    count = 0
    while i:
        i &= i - 1
        count += 1
    return count


def highest_bit(i):
    """The largest power of two <= ``i`` (``i`` >= 1): ``1 << (i.bit_length() - 1)``."""
    bit = 1
    while bit <= i // 2:
        bit *= 2
    return bit


def comb(n, k):
    """C(n, k) for n, k >= 0 (0 where k > n), exact in int64 where the result is."""
    if k > n:
        return 0
    if k > n - k:
        k = n - k
    c = 1
    for i in range(1, k + 1):
        c = c * (n - k + i) // i  # C(n-k+i-1, i-1) * (n-k+i) is i * C(n-k+i, i): exact
    return c


def repetitions(n, s, below):
    """``schedules._repetitions``: the r with C(s+r-1, s) < n <= C(s+r, s); ``below`` >= 0 a known
    upper bound searched downwards from (-1: none)."""
    if below >= 0:
        r = below
        while r > 0 and comb(s + r - 1, s) >= n:
            r -= 1
        return r
    r = 0
    while comb(s + r, s) < n:
        r += 1
    return r


def split_point(n, s, r):
    """``schedules._split``: where the binomial schedule puts its next snapshot in n steps, s slots."""
    m = n - comb(s + r - 1, s - 1)
    if r >= 2:
        m = max(m, comb(s + r - 2, s))
    return max(1, m)


def push(tasks, top, start, end, base, slots, r):
    """Put a binomial schedule's task on the stack ``tasks`` (rows ``top`` and up free); the new top."""
    if top >= tasks.shape[0]:  # never: the schedule holds at most one task per slot
        raise IndexError("binomial schedule: more pending tasks than slots")
    tasks[top, 0] = start
    tasks[top, 1] = end
    tasks[top, 2] = base
    tasks[top, 3] = slots
    tasks[top, 4] = r
    return top + 1


def all_actions(n, s):
    """The actions of ``checkpoint="all"`` over ``n`` >= 1 steps as ``(kind, position, steps, slot)``
    tuples of ints (kind 0 advance, 1 snapshot, 2 restore, 3 reverse: ``schedules``' module docs): every
    state x_p kept in slot p as the forward sweep reaches it, then restored to reverse step p. ``s``:
    unused (the signature of :func:`binomial_actions`)."""
    for p in range(n - 1):
        yield (1, p, 0, p)
        yield (0, p, 1, -1)
    yield (3, n - 1, 1, -1)
    for p in range(n - 2, -1, -1):
        yield (2, p, 0, p)
        yield (3, p, 1, -1)


def binomial_actions(n, s):
    """The actions of ``schedules.binomial(n, s)`` (``binomial_tuples``, the same steps) as
    :func:`all_actions` spells them, generated as they are followed."""
    yield (1, 0, 0, 0)
    current = 0
    tasks = np.empty((s + 1, 5), np.int64)  # a stack: at most one task per slot (see there)
    top = push(tasks, 0, 0, n, 0, s, repetitions(n, s, -1))
    while top > 0:
        top -= 1
        start, end, base, slots, r = tasks[top, 0], tasks[top, 1], tasks[top, 2], tasks[top, 3], \
            tasks[top, 4]
        if current != start:
            yield (2, start, 0, base)
            current = start
        length = end - start
        if length == 1:
            yield (3, start, 1, -1)
        elif slots == 1:
            for p in range(end - 1, start - 1, -1):
                if current != start:
                    yield (2, start, 0, base)
                if p > start:
                    yield (0, start, p - start, -1)
                yield (3, p, 1, -1)
                current = p
        elif length == 2:
            yield (0, start, 1, -1)
            yield (1, start + 1, 0, base + 1)
            yield (3, start + 1, 1, -1)
            yield (2, start, 0, base)
            yield (3, start, 1, -1)
            current = start
        else:
            m = split_point(length, slots, r)
            r_left = repetitions(m, slots, r)
            r_right = repetitions(length - m, slots - 1, r)
            yield (0, start, m, -1)
            yield (1, start + m, 0, base + 1)
            current = start + m
            top = push(tasks, top, start, start + m, base, slots, r_left)
            top = push(tasks, top, start + m, end, base + 1, slots - 1, r_right)


def ctz_actions(n, s):
    """The actions of ``schedules.ctz(n)`` (its forward sweep, then ``ctz_reverse_sweep``) as
    :func:`all_actions` spells them; ``s``: unused."""
    yield (1, 0, 0, 0)
    for i in range(n - 1):
        yield (0, i, 1, -1)
        yield (1, i + 1, 0, popcount(i + 1))
    held = np.zeros(66, np.int64)  # a stack of positions, bottom x_0: at most 2 + log2 n
    top = 1 + popcount(n - 1)  # x_0, then n - 1's prefixes (its bits from the highest) in order
    q, i = n - 1, top - 1
    while q > 0:
        held[i] = q
        q &= q - 1
        i -= 1
    yield (3, n - 1, 1, -1)
    for p in range(n - 2, -1, -1):
        while held[top - 1] > p:
            top -= 1
        q = held[top - 1]
        yield (2, q, 0, top - 1)
        rest = p - q
        while rest:
            bit = highest_bit(rest)
            yield (0, q, bit, -1)
            q += bit
            yield (1, q, 0, top)
            rest -= bit
            held[top] = q
            top += 1
        yield (3, p, 1, -1)


SCHEDULES = {"all": all_actions, "binomial": binomial_actions, "ctz": ctz_actions}
"""The generator of each policy's actions. One per policy: a loop's module compiles its own only
(Numba compiles one generator of all three in about three times as long)."""

_HELPERS = (popcount, highest_bit, comb, repetitions, split_point, push)



def snapshot_slots(policy, n, s):
    """How many slots a policy's :data:`SCHEDULES` generator writes at most (its largest slot + 1), from
    above: a slot j holds a state x_p with p >= j (slots are a stack of increasing positions), so at most n;
    binomial writes slots below s, CTZ below popcount bounds + 1, "all" below n - 1."""
    if policy == "all":
        bound = n - 1
    elif policy == "binomial":
        bound = s
    else:
        bound = max(1, n.bit_length()) + 2
    return max(1, min(bound, n))


# -- one loop's kernels -----------------------------------------------------------------------------

def _kind(v, scalars=False):
    """``"float"``, ``("array", shape)`` or None (not native) for a leaf's or parameter's example;
    ``scalars``: a 0-d float64 (a NumPy scalar's stand-in) is a float too (results of ``wg.checkpoint``)."""
    if type(v) is float or (scalars and isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 0):
        return "float"
    if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim >= 1:
        return ("array", tuple(int(d) for d in v.shape))
    return None


def _step_kernel(function, what):
    """The Numba dispatcher of a step's program (``function.program``), or the reason there is none."""
    program = getattr(function, "program", None)
    if program is None:
        return f"its {what} program is not at hand"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NativeFallbackWarning)
        got = native_function(program)
    said = [str(w.message) for w in caught if issubclass(w.category, NativeFallbackWarning)]
    if said:
        found = re.search(r"not native code: (.*)\. The values are the same", said[0], re.S)
        return f"its step's {what}: {found.group(1) if found else said[0]}"
    if not hasattr(got, "py_func"):  # a partial: a large captured array, a leading parameter
        return f"its step's {what} captures a large array"
    return got


def _ravel(name, kind):
    return name if kind == "float" else f"{name}.ravel()"


def _pack(names, kinds, indent="    "):
    """Lines returning ``names`` packed as ``packing._pack`` packs them (the value itself if one)."""
    if len(names) == 1:
        return [f"{indent}return {names[0]}"]
    sizes = [1 if k == "float" else int(np.prod(k[1])) for k in kinds]
    lines = [f"{indent}packed = np.empty({sum(sizes)}, np.float64)"]
    start = 0
    for name, kind, size in zip(names, kinds, sizes):
        if kind == "float":
            lines.append(f"{indent}packed[{start}] = {name}")
        else:
            lines.append(f"{indent}packed[{start}:{start + size}] = {name}.ravel()")
        start += size
    return lines + [f"{indent}return packed"]


def _unpack(source, kinds, names, indent="    "):
    """Lines setting ``names`` to the parts of the packed value ``source`` (own copies of arrays)."""
    if len(names) == 1:
        return [f"{indent}{names[0]} = {source if kinds[0] == 'float' else f'np.copy({source})'}"]
    lines, start = [], 0
    for name, kind in zip(names, kinds):
        if kind == "float":
            lines.append(f"{indent}{name} = {source}[{start}]")
            start += 1
        else:
            size = int(np.prod(kind[1]))
            lines.append(f"{indent}{name} = np.copy({source}[{start}:{start + size}]).reshape({kind[1]!r})")
            start += size
    return lines


def driver_source(name, policy, kinds, param_kinds, step, vjp):
    """The module text of the drivers of a loop of ``step`` (and ``vjp``: the step's kernels, Numba
    dispatchers the module imports) over leaves of ``kinds`` and parameters of ``param_kinds``:
    ``forward_sweep(n, *x, *params)`` and ``reverse_sweep(n, s, slots, g, out, *x, *params)``, following
    ``policy``'s schedule (``s``: binomial's snapshots; ``slots``: :func:`snapshot_slots`). The loop's
    length and snapshots are arguments: loops of one step and policy share the module and its machine
    code."""
    k, m = len(kinds), len(param_kinds)
    xs = [f"x{i}" for i in range(k)]
    cs = [f"c{i}" for i in range(k)]
    gs = [f"g{i}" for i in range(k)]
    ps = [f"p{j}" for j in range(m)]
    accs = [f"a{j}" for j in range(m)]
    call = f"step({', '.join(cs + ps)})"
    advance = f"{cs[0]} = {call}" if k == 1 else f"{', '.join(cs)} = {call}"
    start = [f"    {c} = {x if kind == 'float' else f'np.copy({x})'}" for c, x, kind in zip(cs, xs, kinds)]
    actions = SCHEDULES[policy]
    lines = [f"# wengert's Numba module for the drivers of wg.iterate({name}, checkpoint={policy!r}) "
             f"(docs/compiling.md); written and read by wengert",
             "import numpy as np",
             "import numba as _wengert_numba",
             f"from {step.py_func.__module__} import {step.py_func.__name__} as step",
             f"from {vjp.py_func.__module__} import {vjp.py_func.__name__} as step_vjp",
             "",
             "_wengert_njit = _wengert_numba.njit(cache=True, error_model='numpy')", "", ""]
    for fun in (*_HELPERS, actions):
        lines += ["@_wengert_njit", helper_source(fun.__name__, fun), "", ""]
    lines += ["@_wengert_njit", f"def forward_sweep(n, {', '.join(xs + ps)}):", *start,
              "    for _ in range(n):", f"        {advance}", *_pack(cs, kinds), "", ""]
    lines += ["@_wengert_njit", f"def reverse_sweep(n, s, slots, g, out, {', '.join(xs + ps)}):"]
    lines += _unpack("g", kinds, gs)
    lines += [f"    {a} = 0.0" if kind == "float" else f"    {a} = np.zeros({kind[1]!r})"
              for a, kind in zip(accs, param_kinds)]
    lines += [f"    keep{i} = np.empty(slots)" if kind == "float" else
              f"    keep{i} = np.empty((slots, {', '.join(map(str, kind[1]))}))"
              for i, kind in enumerate(kinds)]
    lines += start
    lines += [f"    for kind, position, steps, slot in {actions.__name__}(n, s):",
              "        if kind == 0:",
              "            for _ in range(steps):",
              f"                {advance}",
              "        elif kind == 1:"]
    lines += [f"            keep{i}[slot] = {c}" for i, c in enumerate(cs)]
    lines += ["        elif kind == 2:"]
    lines += [f"            {c} = keep{i}[slot]" + ("" if kind == "float" else ".copy()")
              for i, (c, kind) in enumerate(zip(cs, kinds))]
    lines += ["        else:", f"            got = step_vjp({', '.join(cs + ps + gs)})"]
    lines += [f"            {g} = got[{k + i}]" for i, g in enumerate(gs)]
    lines += [f"            {a} += got[{2 * k + j}]" for j, a in enumerate(accs)]
    lines += _pack(gs + accs, list(kinds) + list(param_kinds))
    return "\n".join(lines) + "\n"


def _example(kind):
    return 1.0 if kind == "float" else np.ones(kind[1])


def loop_kernel(loop, which):
    """``(module name, function name, leading arguments)`` of the Numba driver of ``loop``'s statement
    (``which``: "forward" or "reverse"; the statement's arguments follow the leading ones), or the
    reason it has none, in words (module docs). Built once a loop."""
    if loop.native is None:
        loop.native = _kernels(loop)
    if type(loop.native) is str:
        return loop.native
    n, module = loop.n, loop.native[0]
    if which == "forward":
        return module, "forward_sweep", (n,)
    s = default_snapshots(n) if loop.snapshots is None else int(loop.snapshots)
    return module, "reverse_sweep", (n, s, snapshot_slots(loop.policy, n, s))


def _kernels(loop):
    """``(the drivers' module name,)``, or why the loop cannot be native."""
    kinds = [_kind(v) for v in loop.like]
    param_kinds = [_kind(v) for v in loop.param_like]
    if None in kinds or None in param_kinds:
        return "its state or a value its step reads is not a Python float or a float64 array"
    step = _step_kernel(loop.program.forward, "forward program")
    if type(step) is str:
        return step
    vjp = _step_kernel(loop.program.vjp, "VJP program")
    if type(vjp) is str:
        return vjp
    numba = require_numba()
    module = _import(driver_source(loop.name, loop.policy, kinds, param_kinds, step, vjp), numba)
    leaves = [_example(k) for k in kinds]
    params = [_example(k) for k in param_kinds]
    packed = leaves[0] if len(kinds) == 1 else np.ones(sum(np.size(v) for v in leaves))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numba.core.errors.NumbaWarning)
            module.forward_sweep.compile(tuple(numba.typeof(v) for v in [1] + leaves + params))
            module.reverse_sweep.compile(tuple(numba.typeof(v) for v in [1, 1, 1, packed, packed]
                                               + leaves + params))
    except Exception as e:  # noqa: BLE001 - Numba's typing and lowering errors, whatever their class
        said = [t.strip() for t in str(e).splitlines() if t.strip()]
        return f"Numba cannot compile its drivers ({said[0] if said else type(e).__name__})"
    return (module.__name__,)


# -- a wg.checkpoint call's kernels ------------------------------------------------------------------

def checkpoint_source(name, out_kinds, in_kinds, fun, vjp):
    """The module text of ``call_forward(*inputs)`` and ``call_reverse(g, out, *inputs)`` of a
    ``wg.checkpoint`` statement of ``fun`` (``vjp``: its VJP program's Numba dispatcher)."""
    n_out = len(out_kinds)
    xs = [f"x{i}" for i in range(len(in_kinds))]
    gs = [f"g{i}" for i in range(n_out)]
    outs = ["got"] if n_out == 1 else [f"got[{i}]" for i in range(n_out)]
    lines = [f"# wengert's Numba module for wg.checkpoint({name}) (docs/compiling.md); written and read by "
             f"wengert",
             "import numpy as np",
             "import numba as _wengert_numba",
             f"from {fun.py_func.__module__} import {fun.py_func.__name__} as fun",
             f"from {vjp.py_func.__module__} import {vjp.py_func.__name__} as fun_vjp",
             "",
             "_wengert_njit = _wengert_numba.njit(cache=True, error_model='numpy')", "", "",
             "@_wengert_njit", f"def call_forward({', '.join(xs)}):", f"    got = fun({', '.join(xs)})",
             *_pack(outs, out_kinds), "", "",
             "@_wengert_njit", f"def call_reverse(g, out, {', '.join(xs)}):", *_unpack("g", out_kinds, gs),
             f"    got = fun_vjp({', '.join(xs + gs)})",
             *_pack([f"got[{n_out + i}]" for i in range(len(xs))], in_kinds)]
    return "\n".join(lines) + "\n"


def checkpoint_kernel(node, which):
    """As :func:`loop_kernel`, for a ``wg.checkpoint`` statement (``loop_node._Checkpointed``)."""
    if node.native is None:
        node.native = _checkpoint_kernels(node)
    if type(node.native) is str:
        return node.native
    return node.native[0], "call_forward" if which == "forward" else "call_reverse", ()


def _checkpoint_kernels(node):
    out_kinds = [_kind(v, scalars=True) for v in node.like]
    in_kinds = [_kind(v) for v in node.inputs_like]
    if None in out_kinds or None in in_kinds or not in_kinds:
        return "an input or a result is not a Python float or a float64 array"
    fun = _step_kernel(node.forward_program, "forward program")
    if type(fun) is str:
        return fun.replace("its step's", "its function's")
    vjp = _step_kernel(node.vjp_program, "VJP program")
    if type(vjp) is str:
        return vjp.replace("its step's", "its function's")
    numba = require_numba()
    module = _import(checkpoint_source(node.name, out_kinds, in_kinds, fun, vjp), numba)
    inputs = [_example(k) for k in in_kinds]
    outs = [_example(k) for k in out_kinds]
    packed = outs[0] if len(outs) == 1 else np.ones(sum(np.size(v) for v in outs))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numba.core.errors.NumbaWarning)
            module.call_forward.compile(tuple(numba.typeof(v) for v in inputs))
            module.call_reverse.compile(tuple(numba.typeof(v) for v in [packed, packed] + inputs))
    except Exception as e:  # noqa: BLE001 - Numba's typing and lowering errors, whatever their class
        said = [t.strip() for t in str(e).splitlines() if t.strip()]
        return f"Numba cannot compile its calls ({said[0] if said else type(e).__name__})"
    return (module.__name__,)
