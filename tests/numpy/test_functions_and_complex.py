"""Issue 3's NumPy breadth and complex numbers: values and errors against NumPy's, plain NumPy calls
on traced values, the complex-gradient convention, pytrees, and wengert.numpy.random.
(The derivatives themselves are checked by the systematic test, tests/rules/cases/numpy_composed.py and
tests/rules/cases/complex_inputs.py.)"""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads

rng = np.random.default_rng(3)
X = rng.standard_normal((3, 4))
V = rng.standard_normal(5)
SQ = rng.standard_normal((3, 3))
Z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
NANS = np.array([[1.0, np.nan, 0.5], [np.nan, 2.0, -1.0]])

VALUE_CASES = [
    ("cumsum", (X,), {}), ("cumsum", (X,), {"axis": 1}), ("cumprod", (X,), {"axis": 0}),
    ("cumprod", (np.array([2.0, 0.0, 3.0, 1.5]),), {}), ("cumulative_sum", (V,), {"include_initial": True}),
    ("cumulative_prod", (X,), {"axis": 1}), ("diff", (X,), {"n": 2}),
    ("diff", (X,), {"axis": 0, "prepend": 1.0}),
    ("ediff1d", (X,), {"to_end": [1.0, 2.0]}), ("trapezoid", (X,), {"axis": 0}),
    ("trapezoid", (V, np.cumsum(np.abs(V))), {}),
    ("nansum", (NANS,), {"axis": 0}), ("nanprod", (NANS,), {}), ("nanmax", (NANS,), {"axis": 1}),
    ("nanmin", (NANS,), {"keepdims": True}), ("nanmean", (NANS,), {"axis": 1}),
    ("nanvar", (NANS,), {"ddof": 1}), ("nanstd", (NANS,), {"axis": 0}), ("nancumsum", (NANS,), {"axis": 1}),
    ("nancumprod", (NANS,), {}), ("ptp", (X,), {"axis": 1}),
    ("average", (X,), {"axis": 1, "weights": np.arange(1.0, 5.0)}), ("average", (X,), {}),
    ("sort", (X,), {}), ("sort", (X,), {"axis": 0}), ("sort", (X,), {"axis": None}),
    ("partition", (V, 2), {}), ("take", (X, [0, 5, -1]), {}), ("take", (X, [[0, 2]]), {"axis": 1}),
    ("take", (X, [4, -5]), {"axis": 0, "mode": "wrap"}), ("take", (V, 7), {"mode": "clip"}),
    ("take_along_axis", (X, np.argsort(X, axis=0)), {"axis": 0}),
    ("quantile", (X, [0.25, 0.5]), {"axis": 1}), ("quantile", (X, 0.3), {"axis": (0, 1), "keepdims": True}),
    ("percentile", (V, 70.0), {}), ("median", (X,), {"axis": 0}), ("median", (V,), {}),
    ("roll", (X, 5), {}), ("roll", (X, (1, -2)), {"axis": (0, 1)}), ("rot90", (X,), {}),
    ("rot90", (X, 2), {}), ("rot90", (X[None], -1), {"axes": (2, 1)}),
    ("pad", (X, 2), {}), ("pad", (X, ((1, 0), (2, 3))), {"constant_values": 7.0}),
    ("pad", (X, 2), {"mode": "edge"}), ("pad", (X, (2, 1)), {"mode": "reflect"}),
    ("pad", (V, 3), {"mode": "symmetric"}), ("pad", (V, 7), {"mode": "wrap"}),
    ("diagonal", (X,), {"offset": 1}), ("diagonal", (X[None], -1, 1, 2), {}), ("trace", (X,), {"offset": -1}),
    ("diag", (V,), {"k": 2}), ("diag", (V,), {"k": -1}), ("diag", (X,), {"k": 1}), ("diagflat", (SQ,), {}),
    ("tril", (X,), {"k": 1}), ("triu", (X,), {"k": -1}), ("triu", (V,), {}),
    ("kron", (SQ, X), {}), ("kron", (V, SQ), {}), ("cross", (SQ, SQ[::-1]), {}),
    ("cross", (SQ[:, :2], SQ), {}),
    ("cross", (SQ, SQ), {"axis": 0}), ("vdot", (Z, Z[::-1]), {}), ("inner", (X, X), {}),
    ("logaddexp", (X, X[0]), {}), ("logaddexp2", (X, 1.5), {}), ("sinc", (np.array([0.0, 0.5, -1.3]),), {}),
    ("deg2rad", (X,), {}), ("rad2deg", (X,), {}), ("radians", (X,), {}), ("degrees", (X,), {}),
    ("round", (X * 10,), {}), ("round", (X,), {"decimals": 2}), ("around", (X,), {"decimals": 1}),
    ("fix", (X * 3,), {}), ("rint", (X * 3,), {}), ("real", (Z,), {}), ("imag", (Z,), {}),
    ("conj", (Z,), {}), ("conjugate", (Z,), {}), ("angle", (Z,), {}), ("angle", (Z,), {"deg": True}),
    ("angle", (V,), {}), ("abs", (Z,), {}), ("fmax", (NANS, NANS[::-1]), {}), ("fmin", (NANS, 0.7), {}),
    ("nan_to_num", (np.array([np.nan, np.inf, -np.inf, 1.0]),), {}), ("float_power", (np.abs(X), 1.5), {}),
    ("atleast_3d", (V,), {}), ("atleast_3d", (X,), {}), ("meshgrid", (V, X[0]), {}),
    ("meshgrid", (V, X[0], V), {"indexing": "ij", "sparse": True}),
    ("select", ([X > 0.5, X < 0], [X, X * 2]), {"default": 9.0}), ("where", (X > 0, X, 0.0), {}),
    ("append", (X, V), {}), ("append", (X, X), {"axis": 0}), ("column_stack", ((V, V),), {}),
    ("dstack", ((X, X),), {}), ("var", (Z,), {}), ("std", (Z,), {"axis": 0}), ("nanvar", (Z,), {}),
    ("mean", (Z,), {}), ("full_like", (X, 2.5), {}),
]


def _compare(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _compare(o, t)
        return
    assert np.shape(ours) == np.shape(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,args,kwargs", VALUE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VALUE_CASES)])
def test_values_match_numpy(name, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors in cross
        theirs = getattr(np, name)(*args, **kwargs)
        ours = getattr(wnp, name)(*args, **kwargs)
    _compare(ours, theirs)


def test_values_on_traced_inputs_match_numpy():
    """The composed paths (taken only for traced values) give NumPy's values too."""
    for name, args, kwargs in VALUE_CASES:
        if not isinstance(args[0], np.ndarray) or args[0].dtype.kind != "f" or np.isnan(args[0]).any():
            continue
        seen = {}

        def f(x, name=name, args=args, kwargs=kwargs):
            out = getattr(wnp, name)(x, *args[1:], **kwargs)
            seen["value"] = wg.stop_gradient(out) if not isinstance(out, tuple) else out
            first = out[0] if isinstance(out, tuple) else out
            return wnp.sum(wnp.real(first))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            wg.grad(f)(args[0])
            theirs = getattr(np, name)(*args, **kwargs)
        if not isinstance(theirs, tuple):
            _compare(np.asarray(seen["value"]), theirs)


def test_plain_numpy_calls_dispatch_to_the_new_functions():
    def plain(x):
        z = x * (1.0 + 0.5j)
        return (np.sum(np.cumsum(x, axis=1)) + np.sum(np.sort(x, axis=0)[0]) + np.trace(x[:, :3])
                + np.sum(np.diff(x)) + np.sum(np.roll(x, 1)) + np.sum(np.pad(x, 1, mode="edge"))
                + np.sum(np.logaddexp(x, 0.0)) + np.sum(np.sinc(x)) + np.sum(np.real(z) * np.imag(z))
                + np.sum(np.abs(np.conj(z))) + np.nansum(x) + np.median(x) + np.sum(np.kron(x, x[:1]))
                + np.sum(np.cumprod(x[0])) + np.sum(np.take(x, [0, 3])) + np.sum(np.tril(x)))

    def ours(x):
        z = x * (1.0 + 0.5j)
        return (wnp.sum(wnp.cumsum(x, axis=1)) + wnp.sum(wnp.sort(x, axis=0)[0]) + wnp.trace(x[:, :3])
                + wnp.sum(wnp.diff(x)) + wnp.sum(wnp.roll(x, 1)) + wnp.sum(wnp.pad(x, 1, mode="edge"))
                + wnp.sum(wnp.logaddexp(x, 0.0)) + wnp.sum(wnp.sinc(x)) + wnp.sum(wnp.real(z) * wnp.imag(z))
                + wnp.sum(wnp.abs(wnp.conj(z))) + wnp.nansum(x) + wnp.median(x)
                + wnp.sum(wnp.kron(x, x[:1])) + wnp.sum(wnp.cumprod(x[0])) + wnp.sum(wnp.take(x, [0, 3]))
                + wnp.sum(wnp.tril(x)))

    np.testing.assert_allclose(wg.grad(plain)(X), wg.grad(ours)(X), rtol=1e-13)
    np.testing.assert_allclose(plain(X), ours(X), rtol=1e-13)
    check_grads(plain, X, order=1)


def test_methods_on_traced_values():
    f = lambda z: wnp.sum(z.real * z.imag + z.conj().real) + z.cumsum().real[-1] + X.trace() * 0.0
    g = wg.grad(f)(Z)
    # d/dz of x*y + x summed, plus x_last cumsum: (df/dx - i df/dy)
    x, y = Z.real, Z.imag
    expected = (y + 1.0 + 1.0) - 1j * x
    np.testing.assert_allclose(g, expected, rtol=1e-14)


def _numpy_error(fun, *args, **kwargs):
    with pytest.raises(Exception) as info:
        fun(*args, **kwargs)
    return info.value


@pytest.mark.parametrize("name,args,kwargs", [
    ("cumsum", (X,), {"axis": 2}), ("cumprod", (X,), {"axis": -3}), ("diff", (X,), {"n": -1}),
    ("diff", (np.float64(1.0),), {}), ("sort", (X,), {"axis": 2}), ("take", (X, [12]), {}),
    ("take", (X, [0, -5]), {"axis": 0}), ("take", (X, [0]), {"mode": "bogus"}),
    ("take_along_axis", (X, np.zeros(3, int)), {"axis": 0}), ("roll", (X, 1), {"axis": 2}),
    ("rot90", (X,), {"axes": (0, 0)}), ("rot90", (X,), {"axes": (0, 1, 2)}),
    ("rot90", (X,), {"axes": (0, 5)}),
    ("pad", (X, 1), {"mode": "bogus"}), ("pad", (X, -1), {}), ("diagonal", (V,), {}),
    ("diagonal", (X,), {"axis1": 1, "axis2": 1}), ("diag", (X[None],), {}),
    ("cross", (X, X), {}), ("meshgrid", (V, V), {"indexing": "yx"}),
    ("select", ([X > 0], [X, X]), {}), ("select", ([], []), {}), ("select", ([X], [X]), {}),
    ("average", (X,), {"weights": V}), ("average", (X,), {"axis": 1, "weights": V}),
    ("average", (X,), {"axis": 1, "weights": np.zeros(4)}),
    ("quantile", (X, 1.5), {}), ("percentile", (X, -1.0), {}), ("trace", (V,), {}),
])
def test_errors_match_numpys(name, args, kwargs):
    theirs = _numpy_error(getattr(np, name), *args, **kwargs)
    with pytest.raises(type(theirs)) as info:
        getattr(wnp, name)(*args, **kwargs)
    # the same kind of error, and for traced values too
    assert str(info.value)
    if not isinstance(args[0], np.ndarray):
        return
    with pytest.raises(type(theirs)):
        wg.grad(lambda x: wnp.sum(wnp.real(getattr(wnp, name)(x, *args[1:], **kwargs))))(args[0])


def test_unsupported_modes_say_what_to_use():
    with pytest.raises(NotImplementedError, match="'constant', 'edge'"):
        wnp.pad(X, 1, mode="linear_ramp")
    with pytest.raises(NotImplementedError, match="only 'linear'"):
        wnp.quantile(X, 0.5, method="nearest")
    with pytest.raises(TypeError, match="with respect to q"):
        wg.grad(lambda q: wnp.quantile(X, q))(0.5)


def test_max_min_ties_split_the_gradient_equally():
    """As HIPS autograd and JAX: k tied extrema get 1/k of the cotangent each."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wnp.max(x, axis=1)))(x),
                               [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    y = np.array([[1.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.min(x))(y), [[0.5, 0.5, 0], [0, 0, 0]])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wnp.maximum(x, 2.0)))(x[1]), [0.5, 0.5, 0.5])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.nanmax(x))(np.array([1.0, np.nan, 1.0])), [0.5, 0, 0.5])


def test_cumprod_with_zeros_is_exact():
    """d/dx_i of sum(cumprod(x)) by hand: sum over j >= i of prod_{k <= j, k != i} x_k."""
    x = np.array([2.0, 0.0, 3.0, 0.0, 1.5])
    expected = [sum(np.prod(np.delete(x[:j + 1], i)) for j in range(i, len(x))) for i in range(len(x))]
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wnp.cumprod(x)))(x), expected)


def test_sinc_derivatives_at_zero():
    d1 = wg.grad(wnp.sinc)
    d2 = wg.grad(d1)
    assert d1(0.0) == 0.0
    np.testing.assert_allclose(d2(0.0), -np.pi ** 2 / 3, rtol=1e-14)
    np.testing.assert_allclose(d2(1e-4), -np.pi ** 2 / 3 + np.pi ** 4 / 10 * 1e-8, rtol=1e-10)


def test_logaddexp_is_stable_where_the_composed_form_overflows():
    x = np.array([1000.0, -1000.0])
    g = wg.grad(lambda x: wnp.sum(wnp.logaddexp(x, x[::-1] + 1.0)))(x)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(wg.grad(lambda x: wnp.logaddexp(x, 0.0))(2.0), 1 / (1 + np.exp(-2.0)))


# -- complex numbers ------------------------------------------------------------------------------


def test_grad_of_real_function_of_complex_input_follows_jax_and_autograd():
    """grad f = df/dx - i df/dy (HIPS autograd and JAX): for |z|**2 = x**2 + y**2 that is 2 conj(z)."""
    z = 3.0 + 4.0j
    assert wg.grad(lambda z: wnp.abs(z) ** 2)(z) == pytest.approx(6.0 - 8.0j)
    assert wg.grad(lambda z: wnp.real(z * wnp.conj(z)))(z) == pytest.approx(6.0 - 8.0j)
    # f = imag(z**2) = 2xy: df/dx - i df/dy = 2y - 2ix
    assert wg.grad(lambda z: wnp.imag(z * z))(z) == pytest.approx(8.0 - 6.0j)
    # |z| = sqrt(x**2 + y**2): (x - iy) / |z|
    assert wg.grad(wnp.abs)(z) == pytest.approx((3.0 - 4.0j) / 5.0)
    # angle = atan2(y, x): (-y - ix) / |z|**2
    assert wg.grad(wnp.angle)(z) == pytest.approx((-4.0 - 3.0j) / 25.0)
    # for holomorphic f, grad(real(f)) = f'(z)
    assert wg.grad(lambda z: wnp.real(wnp.exp(z) * z))(z) == pytest.approx(np.exp(z) * (z + 1.0))


def test_holomorphic_vjp_and_jvp_multiply_by_the_derivative():
    z = np.array([0.3 + 0.2j, -1.0 + 0.5j])
    g = np.array([1.0 - 2.0j, 0.5 + 0.1j])
    _, back = wg.vjp(wnp.sin, z)
    np.testing.assert_allclose(back(g)[0], g * np.cos(z), rtol=1e-14)
    _, t = wg.jvp(wnp.sin, (z,), (g,))
    np.testing.assert_allclose(t, g * np.cos(z), rtol=1e-14)


def test_gradient_descent_uses_the_conjugate():
    """Stepping along conj(grad) decreases a real loss of complex parameters."""
    target = np.array([1.0 + 2.0j, -0.5j])
    loss = lambda z: wnp.sum(wnp.abs(z - target) ** 2)
    z = np.zeros(2, complex)
    for _ in range(50):
        z = z - 0.1 * np.conj(wg.grad(loss)(z))
    np.testing.assert_allclose(z, target, atol=1e-4)


def test_real_inputs_get_real_gradients_through_complex_intermediates():
    x = rng.standard_normal(3)
    W = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    fs = [lambda x: wnp.sum(wnp.abs(W @ x) ** 2),
          lambda x: wnp.real(wnp.sum(wnp.tensordot(x, W, 1) ** 2)),
          lambda x: wnp.real(wnp.sum(wnp.concatenate([x, W[0]]) ** 2)),
          lambda x: wnp.sum(wnp.imag(wnp.exp(1j * x))),
          lambda x: wnp.real(wnp.sum(x.astype(complex) * W[0])),
          lambda x: wnp.sum(wnp.abs(wnp.cumsum(x * (1 + 1j)))),
          lambda x: wnp.real(wnp.vdot(W[1], x))]
    for f in fs:
        g = wg.grad(f)(x)
        assert g.dtype == np.float64, f
        check_grads(f, x)
    assert type(wg.grad(lambda t: wnp.imag(wnp.exp(1j * t)))(0.3)) is float
    np.testing.assert_allclose(wg.grad(lambda t: wnp.imag(wnp.exp(1j * t)))(0.3), np.cos(0.3))


def test_check_grads_perturbs_complex_inputs_along_complex_directions():
    """A rule that ignored the imaginary part would pass real directions; this one must fail."""
    bad = wg.primitive(lambda z: z * z)
    wg.defvjp(bad, lambda g, out, z: g * 2.0 * wnp.real(z))
    wg.defjvp(bad, lambda t, out, z: t * 2.0 * wnp.real(z))
    with pytest.raises(wg.testing.GradientCheckError):
        check_grads(bad, np.array([0.5 + 0.7j]), modes=("fwd",), order=1)
    with pytest.raises(wg.testing.GradientCheckError):
        check_grads(bad, np.array([0.5 + 0.7j]), modes=("rev",), order=1)
    check_grads(bad, np.array([0.5]), order=1)  # right for real inputs


def test_forward_and_reverse_agree_on_complex_functions():
    f = lambda z: wnp.sum(wnp.abs(wnp.cumprod(z)) * wnp.angle(z) + wnp.real(wnp.log(z) * wnp.conj(z)))
    z = np.array([0.5 + 0.2j, 1.0 - 0.3j, 0.7 + 0.9j])
    J_rev = wg.jacrev(f)(z)
    basis = np.eye(3)
    # forward mode along e_k and i e_k gives df/dx_k and df/dy_k; grad = df/dx - i df/dy
    dx = np.array([wg.jvp(f, (z,), (basis[k] + 0j,))[1] for k in range(3)])
    dy = np.array([wg.jvp(f, (z,), (1j * basis[k],))[1] for k in range(3)])
    np.testing.assert_allclose(J_rev, dx - 1j * dy, rtol=1e-12)
    check_grads(f, z)


# -- pytrees and random ---------------------------------------------------------------------------


def test_dicts_lists_tuples_of_arrays_through_the_new_functions():
    params = {"w": rng.standard_normal((3, 3)), "b": [rng.standard_normal(3), (0.5 + 0.2j, 2.0)]}

    def loss(p):
        w, (b, (c, s)) = p["w"], p["b"]
        h = wnp.cumsum(wnp.tril(w) @ b) + wnp.trace(w) * s
        return wnp.sum(wnp.abs(h * c) ** 2) + wnp.median(wnp.sort(wnp.ravel(w)))

    g = wg.grad(loss)(params)
    assert set(g) == {"w", "b"} and g["w"].shape == (3, 3) and isinstance(g["b"], list)
    assert isinstance(g["b"][1], tuple) and isinstance(g["b"][1][0], complex) and type(g["b"][1][1]) is float
    check_grads(loss, params)
    out, back = wg.vjp(lambda p: {"s": wnp.sort(p["w"], axis=0), "d": (wnp.diag(p["w"]),)}, params)
    ct = back({"s": np.ones((3, 3)), "d": (np.ones(3),)})[0]
    np.testing.assert_allclose(ct["w"], np.ones((3, 3)) + np.eye(3))


def test_random_passes_through_to_numpy():
    assert wnp.random is np.random
    np.testing.assert_array_equal(wnp.random.default_rng(7).standard_normal(3),
                                  np.random.default_rng(7).standard_normal(3))
    x = wnp.random.default_rng(1).normal(size=(2, 3))
    check_grads(lambda x: wnp.sum(wnp.cumsum(x, axis=1) ** 2), x)


def test_coverage_lists_are_consistent():
    """Every public name exists, NumPy has it, and plain NumPy calls reach it (ufunc or function)."""
    from wengert.numpy import _dispatch

    wengert_only = {"index_update", "index_add"}  # functional forms of x[idx] = v and np.add.at
    for name in wnp.DIFFERENTIABLE:
        if name in wengert_only:
            continue
        assert hasattr(np, name), name
        theirs = getattr(np, name)
        reached = theirs in _dispatch.UFUNCS or theirs in _dispatch.FUNCTIONS
        assert reached or theirs is getattr(wnp, name), name


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "diff", "sort", "nansum", "nanmean", "nanvar",
                                  "nanmax", "median", "rot90", "diagonal", "trace", "diag", "tril",
                                  "sinc", "deg2rad", "angle", "ptp", "average", "nan_to_num"])
def test_float32_stays_float32(name):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    x[0, 1] = np.nan if name.startswith("nan") else x[0, 1]
    f = lambda x: wnp.sum(getattr(wnp, name)(x))
    assert np.result_type(getattr(wnp, name)(x)) == np.result_type(getattr(np, name)(x))
    assert wg.grad(f)(x).dtype == np.float32
