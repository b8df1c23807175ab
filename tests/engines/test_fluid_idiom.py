"""The grid-fluid idiom of Stam's "Real-Time Fluid Dynamics for Games" (2003), as HIPS autograd's
fluid example writes it: semi-Lagrangian advection by bilinear interpolation with integer-array
indexing, a Gauss-Seidel pressure projection with ``np.roll``, and the velocity correction written
in place (``vx -= ...``) into the reshaped result of the advection. The same source runs on
``autograd.numpy`` and ``wengert.numpy`` (only the module differs); the gradients must agree with
autograd's and with finite differences."""

import numpy as onp
import pytest

import wengert as wg
import wengert.numpy as wnp


def _simulation(np):
    def project(vx, vy, sweeps=6):
        p = np.zeros(vx.shape)
        h = 1.0 / vx.shape[0]
        div = -0.5 * h * (np.roll(vx, -1, axis=0) - np.roll(vx, 1, axis=0)
                          + np.roll(vy, -1, axis=1) - np.roll(vy, 1, axis=1))
        for _ in range(sweeps):
            p = (div + np.roll(p, 1, axis=0) + np.roll(p, -1, axis=0)
                 + np.roll(p, 1, axis=1) + np.roll(p, -1, axis=1)) / 4.0
        vx -= 0.5 * (np.roll(p, -1, axis=0) - np.roll(p, 1, axis=0)) / h  # in place, on a reshape
        vy -= 0.5 * (np.roll(p, -1, axis=1) - np.roll(p, 1, axis=1)) / h
        return vx, vy

    def advect(f, vx, vy):
        rows, cols = f.shape
        ys, xs = np.meshgrid(np.arange(rows), np.arange(cols))
        cx = (xs - vx).ravel()
        cy = (ys - vy).ravel()
        left = np.floor(cx).astype(int)
        top = np.floor(cy).astype(int)
        rw = cx - left
        bw = cy - top
        left = np.mod(left, rows)
        right = np.mod(left + 1, rows)
        top = np.mod(top, cols)
        bottom = np.mod(top + 1, cols)
        flat = ((1 - rw) * ((1 - bw) * f[left, top] + bw * f[left, bottom])
                + rw * ((1 - bw) * f[right, top] + bw * f[right, bottom]))
        return np.reshape(flat, (rows, cols))

    def objective(params, smoke, target, steps):
        n = smoke.size
        vx = np.reshape(params[:n], smoke.shape)
        vy = np.reshape(params[n:], smoke.shape)
        for _ in range(steps):
            vx2 = advect(vx, vx, vy)
            vy2 = advect(vy, vx, vy)
            vx, vy = project(vx2, vy2)
            smoke = advect(smoke, vx, vy)
        return np.mean((target - smoke) ** 2)

    return objective


def _problem(seed=0, n=6):
    r = onp.random.default_rng(seed)
    smoke = r.random((n, n))
    target = r.random((n, n))
    params = 0.3 * r.standard_normal(2 * n * n)
    return params, smoke, target


def test_the_fluid_idiom_runs_unchanged_and_matches_finite_differences():
    objective = _simulation(wnp)
    params, smoke, target = _problem()
    value, g = wg.value_and_grad(objective)(params, smoke, target, 3)
    plain = _simulation(onp)(params.copy(), smoke, target, 3)
    assert onp.isclose(value, plain, rtol=1e-13)
    eps = 1e-6
    for k in range(0, params.size, 7):
        e = onp.zeros_like(params)
        e[k] = eps
        fd = (_simulation(onp)(params + e, smoke, target, 3) - _simulation(onp)(params - e, smoke, target, 3))
        assert onp.isclose(g[k], fd / (2 * eps), rtol=1e-5, atol=1e-9), k
    assert onp.array_equal(params, _problem()[0])  # the argument is not written to


def test_the_fluid_idiom_agrees_with_hips_autograd():
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp
    params, smoke, target = _problem(seed=3)
    expected = autograd.grad(_simulation(anp))(params, smoke, target, 4)
    got = wg.grad(_simulation(wnp))(params, smoke, target, 4)
    assert onp.allclose(got, expected, rtol=1e-11, atol=1e-14)


def test_the_fluid_idiom_under_forward_mode_and_a_later_pullback():
    objective = _simulation(wnp)
    params, smoke, target = _problem(seed=5, n=5)
    g = wg.grad(objective)(params, smoke, target, 2)
    v = onp.random.default_rng(1).standard_normal(params.size)
    _, jv = wg.jvp(lambda p: objective(p, smoke, target, 2), (params,), (v,))
    assert onp.isclose(jv, g @ v, rtol=1e-10)
    _, pb = wg.vjp(lambda p: objective(p, smoke, target, 2), params)
    assert onp.allclose(pb(1.0)[0], g, rtol=1e-12)
