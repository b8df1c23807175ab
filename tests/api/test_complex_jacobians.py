"""Jacobians of complex functions follow JAX's rule: forward mode refuses a complex input and
reverse mode a complex output unless ``holomorphic=True``, which then gives the complex derivative
in both modes (see docs/complex.md)."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

Z = np.array([0.5 + 0.2j, -1.0 + 0.7j, 0.3 - 0.9j])


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


REFUSAL = r"holomorphic=True.*split the values into real and imaginary parts"


def test_forward_jacobian_of_abs_at_a_complex_input_is_refused():
    """Forward and reverse mode used to disagree here (no complex matrix is the derivative)."""
    msg = rf"wg.jacfwd\(absolute\): an input is complex \(complex128\).*{REFUSAL}"
    with pytest.raises(TypeError, match=msg):
        wg.jacfwd(wnp.abs)(Z)
    with pytest.raises(TypeError, match=rf"wg.hessian\(<lambda>\): an input is complex.*{REFUSAL}"):
        wg.hessian(lambda z: wnp.sum(wnp.abs(z)))(Z)
    with pytest.raises(TypeError, match=r"wg.jacfwd\(absolute\): an input is complex"):
        wg.jacfwd(wnp.abs)(1.0 + 2.0j)


def test_reverse_jacobian_of_a_complex_output_is_refused():
    with pytest.raises(TypeError, match=rf"wg.jacrev\(sin\): an output is complex.*{REFUSAL}"):
        wg.jacrev(wnp.sin)(Z)
    with pytest.raises(TypeError, match=r"wg.jacrev\(<lambda>\): an output is complex"):
        wg.jacrev(lambda x: x * (1 + 1j))(np.ones(2))


def test_reverse_jacobian_of_a_real_function_of_complex_inputs_is_the_gradient_convention(jax):
    """As jax.jacrev: each row is df/dx - i df/dy, the gradient wg.grad gives."""
    J = wg.jacrev(wnp.abs)(Z)
    np.testing.assert_allclose(J, jax.jit(jax.jacrev(jax.numpy.abs))(Z), rtol=1e-13)
    np.testing.assert_allclose(J, np.diag(np.conj(Z) / np.abs(Z)), rtol=1e-13)
    np.testing.assert_allclose(wg.jacrev(lambda z: wnp.sum(wnp.abs(z) ** 2))(Z),
                               wg.grad(lambda z: wnp.sum(wnp.abs(z) ** 2))(Z), rtol=1e-13)


def test_forward_jacobian_of_a_complex_function_of_real_inputs(jax):
    f = lambda m: lambda x: m.exp(1j * x) * x  # noqa: E731
    x = np.array([0.3, -1.2])
    np.testing.assert_allclose(wg.jacfwd(f(wnp))(x), jax.jit(jax.jacfwd(f(jax.numpy)))(x), rtol=1e-13)


def holo(m):
    return lambda z: m.sin(z) * z[::-1] ** 2 + m.exp(z) * m.sum(z)


def test_holomorphic_jacobians_agree_in_both_modes_and_with_jax(jax):
    jf = wg.jacfwd(holo(wnp), holomorphic=True)(Z)
    jr = wg.jacrev(holo(wnp), holomorphic=True)(Z)
    assert jf.dtype == jr.dtype == np.complex128
    np.testing.assert_allclose(jf, jr, rtol=1e-13)
    np.testing.assert_allclose(jf, jax.jit(jax.jacfwd(holo(jax.numpy), holomorphic=True))(Z), rtol=1e-13)
    np.testing.assert_allclose(jr, jax.jit(jax.jacrev(holo(jax.numpy), holomorphic=True))(Z), rtol=1e-13)
    # the complex derivative: f(z + h) - f(z) = J h for a small complex h
    h = 1e-7 * np.array([1 - 2j, 0.5j, 2 + 1j])
    step = holo(np)(Z + h) - holo(np)(Z - h)
    np.testing.assert_allclose(jf @ (2 * h), step, rtol=1e-6)


def test_holomorphic_hessian_and_grad_against_jax(jax):
    s = lambda m: lambda z: m.sum(holo(m)(z) * z)  # noqa: E731
    np.testing.assert_allclose(wg.hessian(s(wnp), holomorphic=True)(Z),
                               jax.jit(jax.hessian(s(jax.numpy), holomorphic=True))(Z), rtol=1e-12)
    np.testing.assert_allclose(wg.grad(s(wnp), holomorphic=True)(Z),
                               jax.jit(jax.grad(s(jax.numpy), holomorphic=True))(Z), rtol=1e-13)


def test_holomorphic_needs_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match=r"wg.jacfwd\(sin, holomorphic=True\): an input is real \(float64\)"):
        wg.jacfwd(wnp.sin, holomorphic=True)(np.ones(2))
    with pytest.raises(TypeError, match=r"wg.jacrev\(absolute, holomorphic=True\): an output is real"):
        wg.jacrev(wnp.abs, holomorphic=True)(Z)
    with pytest.raises(TypeError, match=r"wg.jacfwd\(absolute, holomorphic=True\): an output is real"):
        wg.jacfwd(wnp.abs, holomorphic=True)(Z)
    with pytest.raises(TypeError, match=r"wg.grad\(sin, holomorphic=True\): argument 0 is real"):
        wg.grad(wnp.sin, holomorphic=True)(1.0)
