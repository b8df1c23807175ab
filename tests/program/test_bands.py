"""``bands.diagonalize``: batched derivative programs (``wg.compile(wg.hessian(f))``, ``jacfwd``) computed on
the diagonals of their basis arrays give the dense program's values, nan included, and the pass
leaves alone what it cannot follow."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program
from wengert.program.band_values import Band, Terms, assemble, banded_constant
from wengert.program.bands import diagonalize
from wengert.program.pipeline import lower, simplify


def rosenbrock(x):
    return wnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def sine_chain(x):
    return wnp.sum(wnp.sin(x[:-1] * x[1:]))


def dense_values(fun, x):
    """What the program without this pass (what ``wg.compile`` ran before it) gives at ``x``."""
    return lower(simplify(Program.from_trace(fun, x))).function(x)


def names(program):
    return {s.prim.__name__ for s in program.statements}


def largest_intermediate(program):
    """The most elements any statement but the assembling one makes."""
    return max(int(np.prod(s.out.shape)) for s in program.statements if s.prim.__name__ != "banded_dense")


def hessian_by_differences(f, x, eps=1e-6):
    grad = wg.grad(f)
    columns = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        columns.append((grad(x + e) - grad(x - e)) / (2 * eps))
    return np.array(columns).T


# -- the Hessians of the issue --------------------------------------------------------------------

@pytest.mark.parametrize("fun", [rosenbrock, sine_chain], ids=["rosenbrock", "sine-chain"])
def test_a_banded_hessian_is_computed_on_its_diagonals_with_the_dense_programs_values(fun):
    x = np.random.default_rng(0).uniform(-1.5, 1.5, 16)
    h = wg.compile(wg.hessian(fun))
    got = h(x)
    program = h.program(x)
    assert "banded_dense" in names(program)
    assert largest_intermediate(program) <= x.size  # diagonals only, no 16 x 15 basis product
    np.testing.assert_array_equal(got, dense_values(wg.hessian(fun), x))
    np.testing.assert_allclose(got, wg.hessian(fun)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, hessian_by_differences(fun, x), rtol=1e-5, atol=1e-5)


def test_the_rosenbrock_hessian_equals_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    x = np.random.default_rng(1).uniform(-1.5, 1.5, 12)
    expected = np.asarray(jax.hessian(lambda v: jnp.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2
                                                        + (1.0 - v[:-1]) ** 2))(jnp.asarray(x)))
    np.testing.assert_allclose(wg.compile(wg.hessian(rosenbrock))(x), expected, rtol=1e-12, atol=1e-9)


def test_a_jacobian_of_shifted_products_is_computed_on_its_diagonals():
    def f(x):
        return wnp.sin(x[1:]) * x[:-1] - 2.0 * x[1:] / (1.5 + x[:-1] ** 2)

    x = np.random.default_rng(2).normal(size=30)
    for transform in (wg.jacfwd, wg.jacrev):
        jac = wg.compile(transform(f))
        got = jac(x)
        np.testing.assert_array_equal(got, dense_values(transform(f), x))
        np.testing.assert_allclose(got, wg.jacfwd(f)(x), rtol=1e-13, atol=1e-13)


# -- nan and inf: the dense program's values -------------------------------------------------------

@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan, 1e200], ids=["inf", "-inf", "nan", "overflow"])
def test_a_factor_that_is_not_finite_gives_the_dense_programs_nans(bad):
    x = np.random.default_rng(3).uniform(-1.5, 1.5, 40)
    x[7] = bad
    h = wg.compile(wg.hessian(rosenbrock))
    assert "banded_dense" in names(h.program(x))
    with np.errstate(all="ignore"):
        got, expected = h(x), dense_values(wg.hessian(rosenbrock), x)
    assert not np.isfinite(expected).all()  # the case this test is about: nans off the diagonals too
    np.testing.assert_array_equal(got, expected)


def test_a_divisor_that_is_zero_gives_the_dense_programs_nans():
    def f(x):
        return wnp.sum(x[1:] / x[:-1])

    x = np.random.default_rng(4).uniform(0.5, 1.5, 40)
    h = wg.compile(wg.hessian(f))
    assert "banded_dense" in names(h.program(x))
    np.testing.assert_array_equal(h(x), dense_values(wg.hessian(f), x))
    x[5] = 0.0
    with np.errstate(all="ignore"):
        got, expected = h(x), dense_values(wg.hessian(f), x)
    assert np.isnan(expected[5, 20])  # 0 * inf off the diagonals, in the dense program
    np.testing.assert_array_equal(got, expected)


# -- what the pass leaves alone --------------------------------------------------------------------

def test_a_dense_hessian_is_left_as_it_is():
    A = np.random.default_rng(5).normal(size=(30, 30))

    def quadratic(x):
        return x @ (A @ x)

    x = np.random.default_rng(6).normal(size=30)
    program = simplify(Program.from_trace(wg.hessian(quadratic), x))
    assert diagonalize(program) is program
    np.testing.assert_allclose(wg.compile(wg.hessian(quadratic))(x), A + A.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1])
def test_a_banded_value_reduced_is_assembled_before_the_reduction(axis):
    def f(x):  # a Jacobian's rows or columns summed: the basis meets a reduction
        return wnp.sum(wg.jacfwd(lambda v: wnp.sin(v[1:]) * v[:-1])(x), axis=axis)

    x = np.random.default_rng(7).normal(size=30)
    compiled = wg.compile(f)
    got = compiled(x)
    assert "banded_dense" in names(compiled.program(x))
    np.testing.assert_array_equal(got, dense_values(f, x))
    np.testing.assert_allclose(got, f(x), rtol=1e-13)
    x[3] = np.inf
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(compiled(x), dense_values(f, x))


def test_a_small_program_is_left_dense():
    x = np.random.default_rng(8).normal(size=5)
    assert "banded_dense" not in names(wg.compile(wg.hessian(rosenbrock)).program(x))


# -- the pieces -----------------------------------------------------------------------------------

def test_the_identity_and_a_shifted_identity_are_banded():
    eye = banded_constant(np.eye(10))
    assert (eye.r, eye.c, eye.diags) == (0, 1, {0: 1.0})
    shifted = banded_constant(np.eye(12, 11, -1))
    assert (shifted.r, shifted.c, shifted.diags) == (0, 1, {1: 1.0})
    assert banded_constant(np.random.default_rng(9).normal(size=(10, 10))) is None
    assert banded_constant(np.eye(4)) is None  # below MIN_SIZE


@st.composite
def banded_arrays(draw):
    ndim = draw(st.integers(2, 3))
    shape = draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim))
    r, c = draw(st.permutations(range(ndim)))[:2]
    shape[r], shape[c] = draw(st.integers(2, 12)), draw(st.integers(2, 12))
    offsets = draw(st.lists(st.integers(-shape[c] + 1, shape[r] - 1), min_size=1, max_size=3, unique=True))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    a = np.zeros(shape)
    index = np.indices(shape)
    for k in offsets:
        on = index[r] - index[c] == k
        a[on] = rng.choice([1.0, -2.0, 0.5]) if draw(st.booleans()) else rng.normal(size=int(on.sum()))
    return a


@settings(max_examples=60, deadline=None)
@given(banded_arrays())
def test_a_banded_constant_assembles_back_to_itself(a):
    band = banded_constant(a) if a.size >= 64 else None
    if band is None:
        return
    np.testing.assert_array_equal(assemble(band.shape, band.r, band.c, band.diags), a)


def test_terms_are_added_in_order_on_their_columns():
    diags = {0: Terms(((0, 4, np.array([1.0, 2.0, 3.0, 4.0])), (1, 3, np.array([10.0, 20.0])))),
             -1: Terms(((1, 4, 5.0),))}
    expected = np.diag([1.0, 12.0, 23.0, 4.0]) + np.diag([5.0, 5.0, 5.0], 1)
    np.testing.assert_array_equal(assemble((4, 4), 0, 1, diags), expected)
    assert Band((4, 4), 0, 1, diags).valid(-1) == (1, 4)


# -- random programs of shifts and elementwise functions -----------------------------------------

N = 12  # the basis 12 x 11: above MIN_SIZE
_PIECES = {"x[:-2]": lambda x: x[:-2], "x[1:-1]": lambda x: x[1:-1], "x[2:]": lambda x: x[2:]}
_OUTER = {"sin": wnp.sin, "square": lambda v: v * v, "id": lambda v: v, "cos": wnp.cos, "exp": wnp.exp,
          "reciprocal": lambda v: 1.0 / (2.0 + v * v)}


@st.composite
def shift_programs(draw):
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        factors = draw(st.lists(st.sampled_from(sorted(_PIECES)), min_size=1, max_size=3))
        outer = draw(st.sampled_from(sorted(_OUTER)))
        scale = draw(st.sampled_from([1.0, -0.5, 3.0]))
        terms.append((factors, outer, scale))
    return terms


def _function(terms):
    def f(x):
        total = 0.0
        for factors, outer, scale in terms:
            product = _PIECES[factors[0]](x)
            for name in factors[1:]:
                product = product * _PIECES[name](x)
            total = total + scale * wnp.sum(_OUTER[outer](product))
        return total
    return f


@settings(max_examples=30, deadline=None)
@given(shift_programs(), st.integers(0, 2 ** 32 - 1), st.lists(st.sampled_from([0.0, -0.0]), max_size=4))
def test_random_shift_programs_give_the_dense_programs_hessian(terms, seed, zeros):
    """The dense program's values to rounding (zeros among the inputs make -0.0 terms). Not bit for bit:
    a reciprocal's diagonal can differ in its last bit (found by this test); nor the signs of zeros off
    the band, where the assembly writes +0.0 and the dense program may compute -0.0."""
    f = _function(terms)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, N)
    x[rng.choice(N, len(zeros), replace=False)] = zeros
    got = wg.compile(wg.hessian(f))(x)
    np.testing.assert_allclose(got, dense_values(wg.hessian(f), x), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(got, wg.hessian(f)(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("transform", [wg.hessian, wg.jacfwd, wg.jacrev], ids=["hessian", "jacfwd", "jacrev"])
def test_a_matrix_input_is_computed_on_its_diagonals_with_the_dense_programs_values(transform):
    def f(X):  # shifts along the second axis of a 3 x 8 input: a one-hot basis of 24 rows
        out = wnp.sin(X[:, 1:]) * X[:, :-1] + 0.5 * X[:, 1:] ** 2
        return wnp.sum(out) if transform is wg.hessian else out

    X = np.random.default_rng(10).normal(size=(3, 8))
    compiled = wg.compile(transform(f))
    got = compiled(X)
    assert "banded_dense" in names(compiled.program(X))  # assembled before the reshape of 24 to 3 x 8
    np.testing.assert_array_equal(got, dense_values(transform(f), X))
    np.testing.assert_allclose(got, transform(f)(X), rtol=1e-12, atol=1e-12)
