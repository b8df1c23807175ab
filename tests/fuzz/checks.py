"""Every engine on one generated program, against the others and against finite differences.

``check(program)`` runs, for ``f`` (a real scalar) and ``f_vec`` (its live results):

- value: ``wg.compile(f)(*ARGS) == f(*ARGS)``;
- the tape: ``wg.grad(f, ARGNUMS)`` (the reference of the other engines), with the arguments'
  structure, shapes and dtypes (float32 stays float32); ``wg.value_and_grad(f)`` (an untraced value);
  ``wg.vjp(f_vec)`` with ``f``'s weights as cotangent;
- dual numbers: ``wg.jvp(f)`` equals the gradient's directional derivative; ``wg.jacfwd(f)`` and
  ``wg.jacrev(f)`` equal the gradient (complex arguments: left out, the conventions differ);
- complex programs (complex128, complex64): ``f`` is ``Re(sum(w * f_vec))``, and the gradient
  with respect to z = x + iy is df/dx - i df/dy, as JAX's;
- programs: ``wg.compile(f).grad(ARGNUMS)`` and ``wg.source_grad(f, ARGNUMS)`` (no pytree argument:
  ``source_grad`` takes arrays and numbers) equal the tape;
- finite differences: central differences of ``f`` in float64 along a random direction (Richardson
  extrapolated; a direction along which they do not settle is a kink nearby, and the example is
  rejected); float32 (complex64) programs: the gradient equals the one of the same program run in
  float64 (complex128), and that one the central differences;
- second order (float64 only, differentiated arguments arrays or floats of at most ``MAX_HESSIAN``
  elements in all): ``wg.hessian(f, ARGNUMS) == wg.jacfwd(wg.grad(f))`` (nested blocks for several
  arguments, as ``jax.hessian``), ``wg.hvp`` equals ``wg.jvp(wg.grad(f))``, and both the central
  differences of ``wg.grad(f)``.

Engines agree to rounding (``ENGINE_RTOL``), finite differences to their accuracy (``FD_RTOL``), both
relative to the largest entry of the reference. ``skip`` names checks to leave out (``known``).
"""

import numpy as np
from hypothesis import assume

import wengert as wg
from wengert.api.tree import tree_flatten, tree_map, tree_unflatten

ENGINE_RTOL = {np.float64: 1e-9, np.float32: 2e-4, np.complex128: 1e-9, np.complex64: 2e-4}
WIDER = {np.float32: np.float64, np.complex64: np.complex128}
FD_RTOL = 1e-6
F32_RTOL = 2e-3
MAX_HESSIAN = 12
CHECKS = ("value", "tape", "dtype", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "compile", "source",
          "fd", "float32", "hessian", "hvp")


class Mismatch(AssertionError):
    """Two engines (or an engine and finite differences) disagree on a generated program."""


def close(got, want, what, rtol, scale=None, atol=0.0):
    """``got`` equals ``want`` (pytrees) to ``rtol`` times ``scale`` (by default the largest entry of
    ``want``) plus ``atol``."""
    got_leaves, got_def = tree_flatten(got)
    want_leaves, want_def = tree_flatten(want)
    if got_def != want_def:
        raise Mismatch(f"{what}: structure {got_def}, expected {want_def}")
    if scale is None:
        scale = max([float(np.max(np.abs(np.asarray(w, dtype=np.complex128)), initial=0.0))
                     for w in want_leaves] + [1e-30])
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if np.shape(g) != np.shape(w):
            raise Mismatch(f"{what}[{k}]: shape {np.shape(g)}, expected {np.shape(w)}")
        err = float(np.max(np.abs(np.asarray(g, dtype=np.complex128) - np.asarray(w, dtype=np.complex128)),
                           initial=0.0))
        if not err <= rtol * scale + atol:
            raise Mismatch(f"{what}[{k}]: off by {err:.3g} (scale {scale:.3g}, rtol {rtol:g}, "
                           f"atol {atol:.3g})\n"
                           f"got  {np.asarray(g)!r}\nwant {np.asarray(w)!r}")


def _selected(args, argnums):
    return args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)


def _direction(args, argnums, seed=0):
    """A random tangent for every argument: nonzero on the differentiated ones, zero elsewhere."""
    rng = np.random.default_rng(seed)
    nums = (argnums,) if isinstance(argnums, int) else argnums

    def one(x, on):
        t = rng.standard_normal(np.shape(x)) if on else np.zeros(np.shape(x))
        if np.iscomplexobj(x):
            t = t + 1j * (rng.standard_normal(np.shape(x)) if on else 0)
        if isinstance(x, (float, complex)):
            return type(x)(t)
        return t.astype(np.asarray(x).dtype)

    return tuple(tree_map(lambda x, i=i: one(x, i in nums), a) for i, a in enumerate(args))


def _dot(gs, ts):
    """The directional derivative along ``ts`` of a function with gradient ``gs``: for a complex
    argument z = x + iy the gradient is df/dx - i df/dy (as JAX's), so it is Re(sum(g t))."""
    g_leaves, t_leaves = tree_flatten(gs)[0], tree_flatten(ts)[0]
    return sum(float(np.sum(np.real(np.asarray(g, dtype=np.complex128) * np.asarray(t, dtype=np.complex128))))
               for g, t in zip(g_leaves, t_leaves))


def _abs_dot(gs, ts):
    g_leaves, t_leaves = tree_flatten(gs)[0], tree_flatten(ts)[0]
    return sum(float(np.sum(np.abs(np.asarray(g, dtype=np.complex128) * np.asarray(t, dtype=np.complex128))))
               for g, t in zip(g_leaves, t_leaves))


def _as64(tree):
    """Every leaf in double precision (float64 or complex128)."""
    def wide(x):
        if isinstance(x, (float, complex)):
            return x
        x = np.asarray(x)
        return x.astype(WIDER.get(x.dtype.type, x.dtype.type))

    return tree_map(wide, tree)


def _shift(args, ts, h):
    return tuple(tree_map(lambda x, t: x + h * t, a, d) for a, d in zip(args, ts))


def central(fun, args, ts, h=1e-5):
    """Richardson-extrapolated central difference of ``fun`` at ``args`` along ``ts``, and its error
    estimate (large near a kink)."""
    with np.errstate(all="ignore"):
        def d(step):
            hi, lo = fun(*_shift(args, ts, step)), fun(*_shift(args, ts, -step))
            return tree_map(lambda p, m: (np.asarray(p, dtype=np.float64) - np.asarray(m, dtype=np.float64))
                            / (2 * step), hi, lo)
        d1, d2 = d(h), d(h / 2)
    est = tree_map(lambda a, b: (4 * b - a) / 3, d1, d2)
    err = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(tree_flatten(d1)[0],
                                                                         tree_flatten(d2)[0]))
    return est, err


def _rounding(dtype, value):
    """What rounding leaves of an exact zero: engines that sum the same terms in another order."""
    return 100 * float(np.finfo(dtype).eps) * (abs(complex(value)) + 1.0)


def _leaf_dtype_ok(g, x):
    if isinstance(x, float):
        return np.ndim(g) == 0 and np.isrealobj(g)
    if isinstance(x, complex):
        return np.ndim(g) == 0
    return np.shape(g) == np.shape(x) and np.asarray(g).dtype == np.asarray(x).dtype


def check(prog, skip=frozenset()):
    f, f_vec, args, argnums = prog.f, prog.f_vec, prog.args, prog.argnums
    rtol = ENGINE_RTOL[prog.dtype]
    cplx = np.dtype(prog.dtype).kind == "c"
    if cplx:  # Jacobians and Hessians of a real function of complex arguments: conventions differ
        skip = skip | {"jacfwd", "jacrev", "hessian", "hvp"}
    with np.errstate(all="ignore"):
        value = f(*args)
    atol = _rounding(prog.dtype, value)
    if "value" not in skip:
        close(wg.compile(f)(*args), value, "wg.compile(f) value", rtol, atol=atol)

    grad = wg.grad(f, argnums)(*args)  # the reference of the other engines
    g_leaves, g_def = tree_flatten(grad)
    x_leaves, x_def = tree_flatten(_selected(args, argnums))
    if g_def != x_def:
        raise Mismatch(f"wg.grad: structure {g_def}, the arguments' {x_def}")
    for k, (g, x) in enumerate(zip(g_leaves, x_leaves)):
        if "dtype" not in skip and not _leaf_dtype_ok(g, x):
            raise Mismatch(f"wg.grad leaf {k}: {type(g).__name__} {np.shape(g)} {np.asarray(g).dtype} for "
                           f"an argument {type(x).__name__} {np.shape(x)} {np.asarray(x).dtype}")

    if "value_and_grad" not in skip:
        v, g = wg.value_and_grad(f, argnums)(*args)
        close(v, value, "wg.value_and_grad(f) value", rtol, atol=atol)
        close(g, grad, "wg.value_and_grad(f) gradient", rtol, atol=atol)
        if np.ndim(v) or type(v) not in (float, type(value)):
            raise Mismatch(f"wg.value_and_grad(f) value: {type(v).__name__} {np.shape(v)}, f gives "
                           f"{type(value).__name__}")

    if "vjp" not in skip:
        out, vjp_fun = wg.vjp(f_vec, *args)
        weights = tuple(getattr(prog.module, w) for w in prog.weights)
        ct = tree_unflatten(tree_flatten(out)[1], [
            np.broadcast_to(w if np.iscomplexobj(o) else np.real(w), np.shape(o)).astype(np.asarray(o).dtype)
            for w, o in zip(weights, tree_flatten(out)[0])])
        close(_selected(vjp_fun(ct), argnums), grad, "wg.vjp(f_vec) with f's weights", rtol, atol=atol)

    ts = _direction(args, argnums)
    directional = _dot(grad, _selected(ts, argnums))
    dir_scale = _abs_dot(grad, _selected(ts, argnums)) + 1e-30
    fd_floor = 1e-4 * (abs(float(np.real(value))) + 1.0)  # rounding in f (1e-16), amplified by 1 / step
    if "jvp" not in skip:
        _, out_t = wg.jvp(f, args, ts)
        close(out_t, directional, "wg.jvp(f) against grad . t", rtol, dir_scale, atol=atol)
        outs, outs_t = wg.jvp(f_vec, args, ts)  # each tangent has its result's dtype (float32 stays)
        for k, (o, t) in enumerate(zip(tree_flatten(outs)[0], tree_flatten(outs_t)[0])):
            if np.shape(t) != np.shape(o) or ("dtype" not in skip and np.result_type(t) != np.result_type(o)):
                raise Mismatch(f"wg.jvp(f_vec) tangent {k}: {np.shape(t)} {np.result_type(t)}, its result "
                               f"{np.shape(o)} {np.result_type(o)}")
    for name, jac in (("jacfwd", wg.jacfwd), ("jacrev", wg.jacrev)):
        if name not in skip:
            close(jac(f, argnums)(*args), grad, f"wg.{name}(f)", rtol, atol=atol)
    if "compile" not in skip:
        close(wg.compile(f).grad(argnums)(*args), grad, "wg.compile(f).grad", rtol, atol=atol)
    if "source" not in skip and not prog.pytree:
        close(wg.source_grad(f, argnums)(*args), grad, "wg.source_grad(f)", rtol, atol=atol)

    if "fd" not in skip:
        args64, ts64 = _as64(args), _as64(ts)
        fd, err = central(f, args64, ts64)
        assume(err <= 1e-4 * (dir_scale + abs(float(fd))))  # a kink within reach of the steps
        if prog.dtype in (np.float64, np.complex128):
            close(directional, fd, "grad . t against central differences", FD_RTOL, dir_scale + fd_floor,
                  atol=10 * err)
        elif "float32" not in skip:
            grad64 = wg.grad(f, argnums)(*args64)
            close(_as64(grad), grad64, "single precision gradient against the double precision one", F32_RTOL,
                  atol=atol)
            close(_dot(grad64, _selected(ts64, argnums)), fd,
                  "grad . t (float64) against central differences", FD_RTOL,
                  _abs_dot(grad64, _selected(ts64, argnums)) + fd_floor, atol=10 * err)

    if prog.dtype is np.float64:
        _second_order(prog, skip, rtol)


def _second_order(prog, skip, rtol):
    """Hessian blocks, HVPs and the Jacobian of the gradient, on the differentiated arguments."""
    f, args, argnums = prog.f, prog.args, prog.argnums
    single = isinstance(argnums, int)
    nums = (argnums,) if single else argnums
    xs = tuple(args[i] for i in nums)
    if any(isinstance(x, (dict, tuple)) for x in xs) or sum(np.size(x) for x in xs) > MAX_HESSIAN:
        return

    def fs(*xs):
        full = list(args)
        for i, x in zip(nums, xs):
            full[i] = x
        return f(*full)

    which = 0 if single else tuple(range(len(xs)))
    atol = _rounding(prog.dtype, fs(*xs))
    ts = _direction(xs, tuple(range(len(xs))), seed=1)
    g = wg.grad(fs, which)
    fd, err = central(g, xs, ts)
    assume(err <= 1e-4 * (max(float(np.max(np.abs(d), initial=0)) for d in tree_flatten(fd)[0]) + 1))
    # finite differences of the gradient are accurate relative to it and to the result
    scale = max([float(np.max(np.abs(d), initial=0)) for d in tree_flatten((fd, g(*xs)))[0]] + [1e-6])
    if "hessian" not in skip:
        h = wg.hessian(fs, which)(*xs)
        close(h, wg.jacfwd(g, which)(*xs), "wg.hessian(f) against wg.jacfwd(wg.grad(f))", rtol, atol=atol)
        blocks = ((h,),) if single else h
        ht = tuple(sum(np.tensordot(blocks[r][c], ts[c], axes=np.ndim(ts[c])) for c in range(len(xs)))
                   for r in range(len(xs)))
        close(ht[0] if single else ht, fd, "wg.hessian(f) . t against central differences of wg.grad(f)",
              FD_RTOL * 10, scale, atol=10 * err)
    if "hvp" not in skip:
        hv = wg.hvp(fs, xs, ts)  # an array for one primal, a tuple for several
        hv = (hv,) if len(xs) == 1 and not single else hv
        close(hv, wg.jvp(g, xs, ts)[1], "wg.hvp(f) against wg.jvp(wg.grad(f))", rtol, atol=atol)
        close(hv, fd, "wg.hvp(f) against central differences of wg.grad(f)", FD_RTOL * 10, scale,
              atol=10 * err)
