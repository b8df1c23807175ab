"""wengert.numpy: NumPy's values and signatures; plain NumPy calls on traced values dispatch to it;
functions without a rule are errors that name them."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.numpy._dispatch import UnsupportedNumpyFunction
from wengert.testing import check_grads

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4))


@pytest.mark.parametrize("name,args,kwargs", [
    ("sum", (X,), {"axis": 1, "keepdims": True}),
    ("mean", (X,), {"axis": (0, 1)}),
    ("var", (X,), {"axis": 0, "ddof": 1}),
    ("std", (X,), {}),
    ("prod", (X,), {"axis": -1}),
    ("max", (X,), {"axis": 0}),
    ("min", (X,), {"keepdims": True}),
    ("reshape", (X, (2, 6)), {}),
    ("transpose", (X,), {}),
    ("swapaxes", (X, 0, 1), {}),
    ("moveaxis", (X[None], 0, 2), {}),
    ("expand_dims", (X, 1), {}),
    ("squeeze", (X[:, None],), {}),
    ("broadcast_to", (X[0], (2, 4)), {}),
    ("concatenate", ([X, X],), {"axis": 1}),
    ("stack", ([X, X],), {"axis": -1}),
    ("tile", (X, (2, 1)), {}),
    ("repeat", (X, 2), {"axis": 0}),
    ("flip", (X,), {"axis": 1}),
    ("dot", (X, X.T), {}),
    ("outer", (X[0], X[1]), {}),
    ("tensordot", (X, X, ([0], [0])), {}),
    ("einsum", ("ij,kj->ik", X, X), {}),
    ("clip", (X, -0.5, 0.5), {}),
    ("where", (X > 0, X, -X), {}),
    ("arctan2", (X, X[0]), {}),
])
def test_values_match_numpy(name, args, kwargs):
    ours = getattr(wnp, name)(*args, **kwargs)
    theirs = getattr(np, name)(*args, **kwargs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-14)
    assert np.shape(ours) == np.shape(theirs)


def test_split_matches_numpy():
    for ours, theirs in zip(wnp.split(X, [1, 3], axis=1), np.split(X, [1, 3], axis=1)):
        np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(ValueError, match="equal division"):
        wnp.split(X, 3, axis=1)


def test_plain_numpy_calls_dispatch_on_traced_values():
    W = rng.standard_normal((4, 2))

    def f(x):
        return np.sum(np.tanh(x @ W) ** 2, axis=0).sum() + np.mean(np.exp(x)) + np.max(x)

    def g(x):
        return wnp.sum(wnp.tanh(x @ W) ** 2, axis=0).sum() + wnp.mean(wnp.exp(x)) + wnp.max(x)

    np.testing.assert_allclose(wg.grad(f)(X), wg.grad(g)(X), rtol=1e-14)
    check_grads(f, X)


def test_ndarray_on_the_left_dispatches():
    W = rng.standard_normal((2, 3))
    f = lambda x: np.sum(W @ x + np.ones(3) * x[0])
    check_grads(f, rng.standard_normal((3, 3)))


def test_numpy_function_without_rule_is_an_error_naming_it():
    with pytest.raises(UnsupportedNumpyFunction, match=r"numpy\.fft\.hfft"):
        wg.grad(lambda x: np.sum(np.fft.hfft(x)))(np.ones(3))
    with pytest.raises(UnsupportedNumpyFunction, match=r"numpy\.unwrap"):
        wg.grad(lambda x: np.sum(np.unwrap(x)))(np.ones(3))
    with pytest.raises(UnsupportedNumpyFunction, match=r"numpy\.nextafter"):
        wg.grad(lambda x: np.sum(np.nextafter(x, 2.0)))(np.ones(3))
    with pytest.raises(UnsupportedNumpyFunction, match=r"numpy\.add\.accumulate"):
        wg.grad(lambda x: np.sum(np.add.accumulate(x)))(np.ones(3))


def test_wengert_numpy_missing_name_says_so():
    with pytest.raises(AttributeError, match=r"numpy\.fft\.hfft has no derivative rule"):
        wnp.fft.hfft  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'not_a_numpy_name'"):
        wnp.not_a_numpy_name  # noqa: B018


def test_out_argument_is_refused():
    with pytest.raises(TypeError, match="out="):
        wg.grad(lambda x: np.sum(np.sin(x, out=np.empty(3))))(np.ones(3))
    with pytest.raises(TypeError, match="out="):
        wnp.sum(np.ones(3), out=np.empty(()))


def test_converting_traced_values_to_numpy_or_float_is_an_error():
    with pytest.raises(TypeError, match="drop its derivative"):
        wg.grad(lambda x: np.asarray(x).sum())(np.ones(3))
    with pytest.raises(TypeError, match="math"):
        import math
        wg.grad(lambda x: math.sin(x))(1.0)


def test_integer_and_bool_values_carry_no_gradient():
    def f(x):
        k = wnp.argmax(x)  # an index: no derivative
        mask = x > 0  # a boolean array: no derivative
        return x[k] + wnp.sum(wnp.where(mask, x, 0.0)) + wnp.floor(x[0])

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(wg.grad(f)(x), [1.0, 0.0, 2.0])


def test_axis_errors_are_numpys():
    with pytest.raises(np.exceptions.AxisError):
        wnp.sum(X, axis=2)
    with pytest.raises(ValueError, match="squeeze"):
        wnp.squeeze(X, 0)


def test_array_of_traced_scalars_is_differentiable():
    f = lambda a, b: wnp.sum(wnp.array([[a, b], [b * b, 1.0]]) @ np.array([1.0, 2.0]))
    assert wg.grad(f, (0, 1))(1.0, 3.0) == (1.0, 2.0 + 6.0)


def test_broadcasting_gradients_summed_back_to_each_shape():
    def f(a, b, c):
        return wnp.sum(a * b + c)

    a, b, c = rng.standard_normal((2, 1, 3)), rng.standard_normal((4, 1)), 2.0
    ga, gb, gc = wg.grad(f, (0, 1, 2))(a, b, c)
    assert ga.shape == a.shape and gb.shape == b.shape and type(gc) is float
    np.testing.assert_allclose(ga, np.broadcast_to(b.sum(), a.shape))
    assert gc == 2 * 4 * 3


def test_where_with_zero_keeps_exact_zeros_for_inf_and_nan():
    """where(c, g, 0) is computed as a product for speed; inf/nan must not leak into the zeros."""
    g = np.array([np.inf, np.nan, 1.0, -np.inf])
    c = np.array([False, False, True, True])
    np.testing.assert_array_equal(wnp.where(c, g, 0.0), [0.0, 0.0, 1.0, -np.inf])
    np.testing.assert_array_equal(wnp.where(c, 0.0, g), [np.inf, np.nan, 0.0, 0.0])
    assert wnp.where(c, g.astype(np.float32), 0.0).dtype == np.float32
    x = np.array([-1.0, 2.0, 0.0])
    with np.errstate(invalid="ignore"):  # the loss itself is 0 * inf = nan; its gradient is not
        grad = wg.grad(lambda x: wnp.sum(wnp.maximum(x, 0.0) * np.array([np.inf, 1.0, 1.0])))(x)
    np.testing.assert_array_equal(grad, [0.0, 1.0, 0.5])


def test_max_and_min_split_the_gradient_between_ties():
    x = np.array([[1.0, 3.0], [3.0, 0.0], [3.0, -1.0]])
    np.testing.assert_allclose(wg.grad(wnp.max)(x), [[0, 1 / 3], [1 / 3, 0], [1 / 3, 0]])
    column_max = wg.grad(lambda x: wnp.sum(wnp.max(x, axis=0)))(x)
    np.testing.assert_allclose(column_max, [[0, 1], [0.5, 0], [0.5, 0]])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.min(x[:2, 0]))(x), [[1, 0], [0, 0], [0, 0]])
    assert wg.grad(wnp.max)(x.astype(np.float32)).dtype == np.float32


# -- modular arithmetic: slope 1 in x, -floor(x / y) (remainder) or -trunc(x / y) (fmod) in y ---------

MOD_X = np.array([2.3, -2.6, 5.45, -0.35, 7.9])
MOD_Y = np.array([0.9, 1.1, -1.3, 0.7, -2.4])


def _mod_programs(m):
    return {
        "%": lambda x, y: m.sum((x % y) ** 2),
        "remainder": lambda x, y: m.sum(np.remainder(x, y) * x),
        "mod": lambda x, y: m.sum(np.mod(x, y) * y),
        "fmod": lambda x, y: m.sum(np.fmod(x, y) ** 2),
        "divmod": lambda x, y: m.sum(divmod(x, y)[1] * 3.0 + divmod(x, y)[0]),
        "rmod": lambda x, y: m.sum((2.5 % y) * x),
    }


@pytest.mark.parametrize("name", sorted(_mod_programs(np)))
def test_modular_arithmetic_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    ours = wg.grad(_mod_programs(wnp)[name], (0, 1))(MOD_X, MOD_Y)
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (MOD_X, MOD_Y))
    tf = {"%": lambda x, y: torch.sum(torch.remainder(x, y) ** 2),
          "remainder": lambda x, y: torch.sum(torch.remainder(x, y) * x),
          "mod": lambda x, y: torch.sum(torch.remainder(x, y) * y),
          "fmod": lambda x, y: torch.sum(torch.fmod(x, y) ** 2),
          "divmod": lambda x, y: torch.sum(torch.remainder(x, y) * 3.0 + torch.floor_divide(x, y).detach()),
          "rmod": lambda x, y: torch.sum(torch.remainder(torch.full_like(y, 2.5), y) * x)}[name]
    tf(tx, ty).backward()
    np.testing.assert_allclose(ours[0], tx.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(ours[1], ty.grad.numpy(), rtol=1e-13)
    check_grads(_mod_programs(wnp)[name], MOD_X, MOD_Y)


def test_modular_arithmetic_gradients_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    for ours, theirs in [(lambda x, y: wnp.sum(np.mod(x, y) ** 2), lambda x, y: jnp.sum(jnp.mod(x, y) ** 2)),
                         (lambda x, y: wnp.sum(np.fmod(x, y) * x), lambda x, y: jnp.sum(jnp.fmod(x, y) * x))]:
        got = wg.grad(ours, (0, 1))(MOD_X, MOD_Y)
        want = jax.grad(theirs, (0, 1))(MOD_X, MOD_Y)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


def test_modular_arithmetic_on_python_floats_forward_mode_and_broadcasting():
    assert wg.grad(lambda x: x % 1.5)(4.0) == 1.0
    assert wg.grad(lambda y: 4.0 % y)(1.5) == -2.0  # -floor(4 / 1.5)
    assert wg.grad(lambda y: 2.5 % y)(-1.0) == 3.0  # __rmod__: -floor(2.5 / -1) = 3
    assert wg.grad(lambda y: np.fmod(-4.0, y))(1.5) == 2.0  # -trunc(-4 / 1.5) = -(-2)
    assert wg.grad(lambda x, y: divmod(x, y)[1], (0, 1))(7.5, 2.0) == (1.0, -3.0)
    assert wg.jvp(lambda x, y: x % y, (7.5, 2.0), (1.0, 1.0)) == (1.5, 1.0 - 3.0)
    x, y = np.array([[2.3], [-1.2]]), np.array([0.7, 1.3, -0.4])
    gx, gy = wg.grad(lambda x, y: wnp.sum(x % y), (0, 1))(x, y)
    np.testing.assert_array_equal(gx, [[3.0], [3.0]])
    np.testing.assert_array_equal(gy, -np.floor_divide(x, y).sum(axis=0))
    q, r = np.divmod(MOD_X, MOD_Y)  # the ufunc, dispatched: its quotient carries no derivative
    g = wg.grad(lambda x: wnp.sum(np.divmod(x, MOD_Y)[1] + np.divmod(x, MOD_Y)[0]))(MOD_X)
    np.testing.assert_array_equal(g, 1.0)
    np.testing.assert_array_equal(wnp.divmod(MOD_X, MOD_Y)[0], q)
    np.testing.assert_array_equal(wnp.divmod(MOD_X, MOD_Y)[1], r)
    h = wg.hessian(lambda v: wnp.sum(v % 0.7 * v))(np.array([0.3, 1.1]))
    np.testing.assert_allclose(h, 2 * np.eye(2))  # d2/dv2 of (v - k*0.7) * v with k constant


def test_floor_divide_and_remainder_by_zero_on_floats_are_numpys():
    with np.errstate(all="ignore"):
        for x in (1.0, -1.0, 0.0):
            for y in (0.0, -0.0):
                for ours, theirs in [(wnp.floor_divide, np.floor_divide), (wnp.remainder, np.remainder),
                                     (wnp.fmod, np.fmod)]:
                    assert repr(ours(x, y)) == repr(float(theirs(x, y))), (ours, x, y)
                traced = wg.grad(lambda x, y=y: x // y + x % y + x)(x)
                assert traced == 1.0 + 1.0
    with pytest.warns(RuntimeWarning):
        wnp.floor_divide(1.0, 0.0)


def test_floor_divide_has_zero_derivative():
    assert wg.grad(lambda x: x // 0.3 + x)(1.0) == 1.0
    np.testing.assert_array_equal(wg.grad(lambda x: wnp.sum(np.floor_divide(x, 0.3)))(MOD_X), 0.0)


# -- NumPy 2 names and the functions composed for them --------------------------------------------

@pytest.mark.parametrize("ours,theirs,args", [
    ("acos", "arccos", (X * 0.5,)), ("atan2", "arctan2", (X, X[0])), ("pow", "power", (abs(X), 2.5)),
    ("concat", "concatenate", ([X, X],)), ("permute_dims", "transpose", (X, (1, 0))),
    ("matrix_transpose", None, (X[None],)), ("unstack", None, (X,)), ("matvec", None, (X, X[0])),
    ("vecmat", None, (X[0][:3], X[:, :3])), ("vecdot", None, (X, X[1])), ("rollaxis", None, (X[None], 2)),
    ("linspace", None, (0.5, X[0], 4)), ("logspace", None, (0.5, 2.0, 3)), ("full", None, ((2, 3), 1.5)),
    ("hsplit", None, (X, 2)), ("vsplit", None, (X[:2], 2)), ("dsplit", None, (X[None], [1])),
    ("broadcast_arrays", None, (X, X[0])), ("copy", None, (X,)), ("astype", None, (X, np.float32)),
])
def test_numpy2_names_match_numpy_on_plain_and_traced_values(ours, theirs, args):
    want = getattr(np, theirs or ours)(*args)
    fun = getattr(wnp, ours)
    traced = []

    def f(v):
        out = fun(*((v if a is X else a) for a in args))
        traced.append(out)
        return wnp.sum(v)

    wg.grad(f)(X)
    for got in (fun(*args), traced[0]):
        got = got if isinstance(got, (list, tuple)) else [got]
        want_ = want if isinstance(want, (list, tuple)) else [want]
        for g, w in zip(got, want_):
            g = g.value if hasattr(g, "_trace") else g
            np.testing.assert_allclose(g, w, rtol=1e-14)
            assert np.shape(g) == np.shape(w)


SPECIAL = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e300, 1e-300, 7.0]


@pytest.mark.parametrize("name", ["remainder", "fmod", "floor_divide"])
def test_modular_float_fast_path_equals_the_array_path_at_special_points(name):
    fun = getattr(wnp, name)
    with np.errstate(all="ignore"):
        for x in SPECIAL:
            for y in SPECIAL:
                on_floats, on_arrays = fun(x, y), fun(np.array(x), np.array(y))
                assert type(on_floats) is float
                assert repr(on_floats) == repr(float(on_arrays)), (x, y)
                if name == "floor_divide":
                    continue
                g_floats = wg.grad(fun, (0, 1))(x, y)
                g_arrays = wg.grad(fun, (0, 1))(np.array(x), np.array(y))
                assert repr(tuple(map(float, g_floats))) == repr(tuple(map(float, g_arrays))), (x, y)
