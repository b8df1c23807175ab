"""HIPS autograd's spellings, so that its users' scripts run after changing the imports only:
``argnum=``, the curried ``check_grads``, ``hessian_vector_product``, ``wengert.misc`` (``flatten``,
``flatten_func``, ``optimizers``) and ``wengert.extend``. Each is checked against finite differences
and, where autograd is installed, against autograd's own result."""

import numpy as onp
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import GradientCheckError, check_grads

X = onp.array([0.3, -0.7, 1.1])
Y = onp.array([1.5, 0.2, -0.4])


def f(x, y):
    return wnp.sum(wnp.sin(x) * y ** 2) + wnp.sum(x * y) ** 2


def fd_grad(fun, args, argnum, eps=1e-6):
    x = onp.asarray(args[argnum], dtype=float)
    out = onp.zeros(x.shape)
    for i in onp.ndindex(x.shape):
        e = onp.zeros(x.shape)
        e[i] = eps
        plus, minus = list(args), list(args)
        plus[argnum], minus[argnum] = x + e, x - e
        out[i] = (float(fun(*plus)) - float(fun(*minus))) / (2 * eps)
    return out


def ag_f(x, y):
    anp = pytest.importorskip("autograd.numpy")
    return anp.sum(anp.sin(x) * y ** 2) + anp.sum(x * y) ** 2


# 1. argnum=

def test_grad_and_value_and_grad_take_argnum():
    g = wg.grad(f, argnum=1)(X, Y)
    onp.testing.assert_allclose(g, fd_grad(f, (X, Y), 1), rtol=1e-6, atol=1e-8)
    onp.testing.assert_allclose(g, wg.grad(f, argnums=1)(X, Y))
    v, g2 = wg.value_and_grad(f, argnum=1)(X, Y)
    assert v == f(X, Y)
    onp.testing.assert_allclose(g2, g)
    onp.testing.assert_allclose(wg.grad(f, argnum=(0, 1))(X, Y)[1], g)


def test_the_jacobians_and_elementwise_grad_take_argnum():
    def h(x, y):
        return wnp.sin(x) * y

    onp.testing.assert_allclose(wg.elementwise_grad(h, argnum=1)(X, Y), onp.sin(X))
    for jac in (wg.jacobian, wg.jacrev, wg.jacfwd):
        onp.testing.assert_allclose(jac(h, argnum=1)(X, Y), onp.diag(onp.sin(X)))
    H = wg.hessian(f, argnum=1)(X, Y)
    onp.testing.assert_allclose(H, wg.hessian(f, argnums=1)(X, Y))
    col = fd_grad(lambda x, y: wg.grad(f, argnum=1)(x, y)[0], (X, Y), 1)
    onp.testing.assert_allclose(H[0], col, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transform", [wg.grad, wg.value_and_grad, wg.elementwise_grad, wg.jacobian,
                                       wg.jacrev, wg.jacfwd, wg.hessian])
def test_argnum_and_argnums_together_are_refused(transform):
    with pytest.raises(TypeError, match="argnum=1.*argnums=0"):
        transform(f, argnums=0, argnum=1)
    with pytest.raises(TypeError, match="argnum=1.*argnums=0"):
        transform(f, 0, argnum=1)


def test_argnum_matches_autograd():
    autograd = pytest.importorskip("autograd")
    onp.testing.assert_allclose(wg.grad(f, argnum=1)(X, Y), autograd.grad(ag_f, argnum=1)(X, Y))
    onp.testing.assert_allclose(wg.hessian(f, argnum=0)(X, Y), autograd.hessian(ag_f, argnum=0)(X, Y))
    onp.testing.assert_allclose(wg.jacobian(wg.grad(f, argnum=1), argnum=0)(X, Y),
                                autograd.jacobian(autograd.grad(ag_f, argnum=1), argnum=0)(X, Y))


# 2. check_grads, curried

def test_check_grads_curried_form():
    check = check_grads(f, modes=["fwd", "rev"], order=2)
    assert callable(check)
    assert check(X, Y) is None
    check_grads(f, modes=["rev"], order=1, argnum=1)(X, Y)


def test_check_grads_curried_holds_the_other_arguments_fixed():
    def g(x, n):  # n an int, as autograd allows for arguments other than argnum
        return wnp.sum(x ** n)

    check_grads(g, modes=["fwd", "rev"], order=2)(X, 3)


def test_check_grads_curried_finds_a_wrong_rule():
    bad = wg.primitive(lambda x: onp.sin(x))
    wg.defvjp(bad, lambda g, out, x: g * wnp.sin(x))  # wrong: should be cos
    wg.defjvp(bad, lambda t, out, x: t * wnp.cos(x))
    check_grads(bad, modes=["fwd"], order=1)(X)
    with pytest.raises(GradientCheckError, match="reverse mode"):
        check_grads(bad, modes=["rev"], order=1)(X)


def test_check_grads_at_autograds_path():
    from wengert.test_util import check_grads as at_autograds_path

    assert at_autograds_path is check_grads


def test_check_grads_direct_form_still_works():
    check_grads(f, X, Y)
    check_grads(f, X, Y, modes=("rev",), order=1)


def test_check_grads_curried_as_autograd_writes_it():
    test_util = pytest.importorskip("autograd.test_util")
    test_util.check_grads(ag_f, modes=["fwd", "rev"], order=2)(X, Y)  # the same call, in autograd
    check_grads(f, modes=["fwd", "rev"], order=2)(X, Y)


# 3. hessian_vector_product, flatten_func

def test_hessian_vector_product():
    v = onp.array([0.5, -1.0, 2.0])
    hv = wg.hessian_vector_product(f)(X, Y, v)
    onp.testing.assert_allclose(hv, wg.hessian(f)(X, Y) @ v, rtol=1e-10)
    fd = fd_grad(lambda x, y: wnp.dot(wg.grad(f)(x, y), v), (X, Y), 0)
    onp.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6)
    hv1 = wg.hessian_vector_product(f, argnum=1)(X, Y, v)
    onp.testing.assert_allclose(hv1, wg.hessian(f, argnums=1)(X, Y) @ v, rtol=1e-10)


def test_hessian_vector_product_matches_autograd():
    autograd = pytest.importorskip("autograd")
    v = onp.array([0.5, -1.0, 2.0])
    for argnum in (0, 1):
        onp.testing.assert_allclose(wg.hessian_vector_product(f, argnum)(X, Y, v),
                                    autograd.hessian_vector_product(ag_f, argnum)(X, Y, v), rtol=1e-10)


def test_hessian_vector_product_of_a_matrix_argument():
    A = onp.arange(6.0).reshape(2, 3) / 7
    V = onp.ones((2, 3))

    def g(a):
        return wnp.sum(wnp.tanh(a) ** 3)

    hv = wg.hessian_vector_product(g)(A, V)
    onp.testing.assert_allclose(hv, onp.tensordot(wg.hessian(g)(A), V, 2), rtol=1e-10)


PARAMS = {"w": onp.array([[0.1, -0.2], [0.3, 0.4]]), "b": [onp.array([0.5, -0.5]), 0.25]}


def loss(params, x):
    w, (b, c) = params["w"], params["b"]
    return wnp.sum(wnp.tanh(x @ w + b)) * c


def test_flatten_func():
    from wengert.misc import flatten, flatten_func

    x = onp.array([[1.0, 2.0], [-1.0, 0.5]])
    flat_loss, unflatten, flat0 = flatten_func(loss, PARAMS)
    assert flat0.shape == (7,)
    onp.testing.assert_allclose(flat_loss(flat0, x), [loss(PARAMS, x)])
    back = unflatten(flat0)
    onp.testing.assert_allclose(back["w"], PARAMS["w"])
    assert back["b"][1] == PARAMS["b"][1]
    g = wg.grad(lambda v: flat_loss(v, x)[0])(flat0)
    onp.testing.assert_allclose(g, fd_grad(lambda v: flat_loss(v, x)[0], (flat0,), 0), rtol=1e-6, atol=1e-8)
    onp.testing.assert_allclose(g, flatten(wg.grad(loss)(PARAMS, x))[0])


def test_flatten_func_matches_autograd():
    ag_flatten = pytest.importorskip("autograd.misc.flatten")
    anp = pytest.importorskip("autograd.numpy")
    from wengert.misc.flatten import flatten_func

    def ag_loss(params, x):
        w, (b, c) = params["w"], params["b"]
        return anp.sum(anp.tanh(x @ w + b)) * c

    x = onp.array([[1.0, 2.0], [-1.0, 0.5]])
    mine, unflatten, flat0 = flatten_func(loss, PARAMS)
    theirs, ag_unflatten, their0 = ag_flatten.flatten_func(ag_loss, PARAMS)
    onp.testing.assert_allclose(onp.sort(flat0), onp.sort(their0))  # autograd sorts a dict's keys
    onp.testing.assert_allclose(mine(flat0, x), theirs(their0, x))
    autograd = pytest.importorskip("autograd")
    g = unflatten(wg.grad(lambda v: mine(v, x)[0])(flat0))
    ag = ag_unflatten(autograd.grad(lambda v: theirs(v, x)[0])(their0))
    onp.testing.assert_allclose(g["w"], ag["w"])
    onp.testing.assert_allclose(g["b"][0], ag["b"][0])
    assert g["b"][1] == pytest.approx(ag["b"][1])


def test_misc_optimizers_are_the_functional_optimizers():
    from wengert.misc import optimizers

    assert optimizers.adam is wg.optim.adam
    out = optimizers.adam(lambda p, i: wg.grad(lambda q: wnp.sum((q - 3.0) ** 2))(p), onp.zeros(2),
                          num_iters=500, step_size=0.1)
    onp.testing.assert_allclose(out, [3.0, 3.0], atol=1e-3)


# 4. wengert.extend: autograd's logsumexp example

def make_logsumexp(np, extend):
    """The example of autograd's tutorial, written once for either library."""

    @extend.primitive
    def logsumexp(x):
        max_x = np.max(x)
        return max_x + np.log(np.sum(np.exp(x - max_x)))

    def logsumexp_vjp(ans, x):
        x_shape = x.shape
        return lambda g: np.full(x_shape, g) * np.exp(x - np.full(x_shape, ans))

    extend.defvjp(logsumexp, logsumexp_vjp)
    return logsumexp


def test_logsumexp_by_wengert_extend():
    import wengert.extend as extend

    lse = make_logsumexp(wnp, extend)
    x = onp.array([1.5, 2.0, -0.3])
    ref = lambda x: onp.log(onp.sum(onp.exp(x)))  # noqa: E731
    assert lse(x) == pytest.approx(ref(x))
    g = wg.grad(lse)(x)
    onp.testing.assert_allclose(g, fd_grad(ref, (x,), 0), rtol=1e-6)
    H = wg.jacobian(wg.grad(lse))(x)
    onp.testing.assert_allclose(H, onp.diag(g) - onp.outer(g, g), rtol=1e-10, atol=1e-12)
    onp.testing.assert_allclose(H[1], fd_grad(lambda v: wg.grad(lse)(v)[1], (x,), 0), rtol=1e-5, atol=1e-7)
    check_grads(lse, modes=["rev"], order=2)(x)


def test_logsumexp_matches_autograd():
    autograd = pytest.importorskip("autograd")
    import autograd.extend as ag_extend
    import autograd.numpy as anp

    import wengert.extend as extend

    mine, theirs = make_logsumexp(wnp, extend), make_logsumexp(anp, ag_extend)
    x = onp.array([1.5, 2.0, -0.3])
    onp.testing.assert_allclose(wg.grad(mine)(x), autograd.grad(theirs)(x), rtol=1e-12)
    # a VJP rule alone: wg.hessian goes reverse over reverse, as autograd's does
    onp.testing.assert_allclose(wg.hessian(mine)(x), autograd.hessian(theirs)(x), rtol=1e-10)
    onp.testing.assert_allclose(wg.jacobian(wg.grad(mine))(x), autograd.hessian(theirs)(x), rtol=1e-10)
    v = onp.array([1.0, -2.0, 0.5])
    onp.testing.assert_allclose(wg.hessian_vector_product(mine)(x, v),
                                autograd.hessian_vector_product(theirs)(x, v), rtol=1e-10)


def test_extend_defjvp_autograd_convention():
    import wengert.extend as extend

    @extend.primitive
    def scaled(x, a):
        return a * onp.sinh(x)

    extend.defvjp(scaled, lambda ans, x, a: lambda g: g * a * wnp.cosh(x), None)
    extend.defjvp(scaled, lambda g, ans, x, a: g * a * wnp.cosh(x))
    check_grads(scaled, modes=["fwd", "rev"], order=2)(X, 2.0)
    _, t = wg.jvp(lambda x: scaled(x, 2.0), (X,), (onp.ones(3),))
    onp.testing.assert_allclose(t, fd_grad(lambda x: onp.sum(2.0 * onp.sinh(x)), (X,), 0), rtol=1e-6)


def test_extend_defvjp_argnums_and_none():
    import wengert.extend as extend

    @extend.primitive
    def mul(a, b):
        return a * b

    extend.defvjp(mul, lambda ans, a, b: lambda g: g * a, argnums=(1,))
    onp.testing.assert_allclose(wg.grad(lambda b: wnp.sum(mul(X, b)))(Y), X)
    with pytest.raises(Exception):  # argument 0 has no rule
        wg.grad(lambda a: wnp.sum(mul(a, Y)))(X)


def test_extend_argnum_forms_and_notrace():
    import wengert.extend as extend

    @extend.primitive
    def mul(a, b):
        return a * b

    extend.defvjp_argnum(mul, lambda argnum, ans, args, kwargs: lambda g: g * args[1 - argnum])
    extend.def_linear(mul)
    check_grads(mul, modes=["fwd", "rev"], order=1)(X, Y)
    check_grads(mul, modes=["fwd", "rev"], order=1, argnum=1)(X, Y)

    count = extend.notrace_primitive(lambda x: onp.sum(x > 0))
    assert wg.grad(lambda x: wnp.sum(x) * count(x))(X) .tolist() == [2.0, 2.0, 2.0]


def test_a_primitive_without_any_rule_is_still_an_error_for_hessian():
    import wengert.extend as extend

    bare = extend.primitive(lambda x: onp.sum(x ** 2))
    with pytest.raises(wg.NoRuleError, match="VJP"):
        wg.hessian(bare)(X)
    with pytest.raises(wg.NoRuleError, match="VJP"):
        wg.hessian_vector_product(bare)(X, X)


def test_fixed_point_differentiates_by_the_implicit_function_theorem():
    from wengert.misc.fixed_points import fixed_point

    def newton(a):
        return lambda x: 0.5 * (x + a / x)

    def sqrt(a):
        return fixed_point(newton, a, 10.0, lambda x, y: wnp.abs(x - y), 1e-12)

    a = 2.0
    assert sqrt(a) == pytest.approx(onp.sqrt(a), rel=1e-12)
    assert wg.grad(sqrt)(a) == pytest.approx(0.5 / onp.sqrt(a), rel=1e-9)
    assert wg.grad(wg.grad(sqrt))(a) == pytest.approx(-0.25 * a ** -1.5, rel=1e-6)
    h = 1e-6
    assert wg.grad(sqrt)(a) == pytest.approx((sqrt(a + h) - sqrt(a - h)) / (2 * h), rel=1e-6)
    ag = pytest.importorskip("autograd")
    import autograd.numpy as anp
    from autograd.misc.fixed_points import fixed_point as ag_fixed_point

    ag_sqrt = lambda a: ag_fixed_point(newton, a, 10.0, lambda x, y: anp.abs(x - y), 1e-12)  # noqa: E731
    assert wg.grad(sqrt)(a) == pytest.approx(ag.grad(ag_sqrt)(a), rel=1e-9)
