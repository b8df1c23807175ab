"""Hand-written value-and-derivative code for the machine-speed workloads (``benchmarks/native.py``):
the floors that a compiled derivative program is measured against. Each kernel is one plain Python
function (loops over floats and small arrays, its adjoint or tangent written out by hand) that
:func:`numba_kernels` also compiles with ``numba.njit`` (nopython mode, one thread), so the
hand-written Python and the hand-written Numba column run the same text. The Lorenz RK4 and the
Rosenbrock Hessian have their reference here too.
"""

import math

import numpy as np

from benchmarks import peers, workloads

__all__ = ["LORENZ_START", "KERNEL_NAMES", "kernels", "numba_kernels", "lorenz_step", "rosenbrock",
           "rosenbrock_hessian"]

LORENZ_START = (1.0, 1.0, 1.0)
KERNEL_NAMES = ("chain_adjoint", "loop_adjoint", "lorenz_tangents", "tiny_adjoint",
                "rosenbrock_hessian_loops")


def lorenz_step(x, y, z, sigma, rho, beta, dt):
    """One RK4 step of the Lorenz system, written with operators only (any scalar type: floats, 0-d
    tensors, traced values)."""
    k1x = sigma * (y - x)
    k1y = x * (rho - z) - y
    k1z = x * y - beta * z
    x2, y2, z2 = x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, z + 0.5 * dt * k1z
    k2x = sigma * (y2 - x2)
    k2y = x2 * (rho - z2) - y2
    k2z = x2 * y2 - beta * z2
    x3, y3, z3 = x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, z + 0.5 * dt * k2z
    k3x = sigma * (y3 - x3)
    k3y = x3 * (rho - z3) - y3
    k3z = x3 * y3 - beta * z3
    x4, y4, z4 = x + dt * k3x, y + dt * k3y, z + dt * k3z
    k4x = sigma * (y4 - x4)
    k4y = x4 * (rho - z4) - y4
    k4z = x4 * y4 - beta * z4
    return (x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y),
            z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z))


def rosenbrock(xp, x):
    """sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2) with the array module ``xp``."""
    return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    """The analytic Hessian of :func:`rosenbrock` in NumPy (tridiagonal, built whole)."""
    n = x.shape[0]
    diag = np.zeros(n)
    diag[:-1] = 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    diag[1:] += 200.0
    h = np.zeros((n, n))
    h[np.arange(n), np.arange(n)] = diag
    off = -400.0 * x[:-1]
    h[np.arange(n - 1), np.arange(1, n)] = off
    h[np.arange(1, n), np.arange(n - 1)] = off
    return h


def kernels(jit=None):
    """The kernels as a dict by name (:data:`KERNEL_NAMES`), each passed through ``jit`` (None: plain
    Python). A kernel calls its helpers through this closure, so one text serves both."""
    jit = jit or (lambda f: f)

    @jit
    def chain_adjoint(x, y, steps):
        """``steps`` times z = z*y + 0.5 sin(z), keeping every z; then the adjoint loop backwards.
        Returns (z, dz/dx, dz/dy)."""
        zs = np.empty(steps)
        z = x
        for i in range(steps):
            zs[i] = z
            z = z * y + 0.5 * math.sin(z)
        gz, gy = 1.0, 0.0
        for i in range(steps - 1, -1, -1):
            gy += gz * zs[i]
            gz *= y + 0.5 * math.cos(zs[i])
        return z, gz, gy

    @jit
    def loop_adjoint(v):
        """s = sum of v[i] * v[i] by a loop; then v_bar[i] += 2 v[i] s_bar by the reverse loop."""
        n = v.shape[0]
        s = 0.0
        for i in range(n):
            s += v[i] * v[i]
        g = np.zeros(n)
        for i in range(n - 1, -1, -1):
            g[i] += 2.0 * v[i]
        return s, g

    @jit
    def rhs_tangent(x, y, z, tx, ty, tz, sigma, rho, beta, ds, dr, db):
        """The Lorenz right-hand side's tangent along the state (tx, ty, tz) and the parameters
        (ds, dr, db)."""
        return (sigma * (ty - tx) + ds * (y - x),
                tx * (rho - z) + x * (dr - tz) - ty,
                tx * y + x * ty - beta * tz - db * z)

    @jit
    def step_tangent(xs, ys, zs, tx, ty, tz, sigma, rho, beta, dt, ds, dr, db):
        """One RK4 step of a tangent, given the step's four stage points (xs, ys, zs: tuples)."""
        h = 0.5 * dt
        ax, ay, az = rhs_tangent(xs[0], ys[0], zs[0], tx, ty, tz, sigma, rho, beta, ds, dr, db)
        bx, by, bz = rhs_tangent(xs[1], ys[1], zs[1], tx + h * ax, ty + h * ay, tz + h * az,
                                 sigma, rho, beta, ds, dr, db)
        cx, cy, cz = rhs_tangent(xs[2], ys[2], zs[2], tx + h * bx, ty + h * by, tz + h * bz,
                                 sigma, rho, beta, ds, dr, db)
        ex, ey, ez = rhs_tangent(xs[3], ys[3], zs[3], tx + dt * cx, ty + dt * cy, tz + dt * cz,
                                 sigma, rho, beta, ds, dr, db)
        return (tx + dt / 6.0 * (ax + 2.0 * bx + 2.0 * cx + ex),
                ty + dt / 6.0 * (ay + 2.0 * by + 2.0 * cy + ey),
                tz + dt / 6.0 * (az + 2.0 * bz + 2.0 * cz + ez))

    @jit
    def lorenz_tangents(sigma, rho, beta, steps, dt):
        """RK4 of the Lorenz system from (1, 1, 1) and, beside it, three tangents (d/dsigma, d/drho,
        d/dbeta of the state). Returns (x + y + z, its three derivatives)."""
        x, y, z = 1.0, 1.0, 1.0
        sx, sy, sz = 0.0, 0.0, 0.0
        rx, ry, rz = 0.0, 0.0, 0.0
        bx, by, bz = 0.0, 0.0, 0.0
        h = 0.5 * dt
        for _ in range(steps):
            k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
            x2, y2, z2 = x + h * k1x, y + h * k1y, z + h * k1z
            k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
            x3, y3, z3 = x + h * k2x, y + h * k2y, z + h * k2z
            k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
            x4, y4, z4 = x + dt * k3x, y + dt * k3y, z + dt * k3z
            k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
            xs, ys, zs = (x, x2, x3, x4), (y, y2, y3, y4), (z, z2, z3, z4)
            sx, sy, sz = step_tangent(xs, ys, zs, sx, sy, sz, sigma, rho, beta, dt, 1.0, 0.0, 0.0)
            rx, ry, rz = step_tangent(xs, ys, zs, rx, ry, rz, sigma, rho, beta, dt, 0.0, 1.0, 0.0)
            bx, by, bz = step_tangent(xs, ys, zs, bx, by, bz, sigma, rho, beta, dt, 0.0, 0.0, 1.0)
            x = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
            y = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
            z = z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
        return x + y + z, sx + sy + sz, rx + ry + rz, bx + by + bz

    tiny_adjoint = jit(workloads.tiny_adjoint)  # the one hand-written gradient, compiled

    @jit
    def rosenbrock_hessian_loops(x):
        """The analytic Hessian of the Rosenbrock function, by a loop over its terms."""
        n = x.shape[0]
        hess = np.zeros((n, n))
        for i in range(n - 1):
            hess[i, i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0
            hess[i + 1, i + 1] += 200.0
            hess[i, i + 1] = -400.0 * x[i]
            hess[i + 1, i] = -400.0 * x[i]
        return hess

    return {"chain_adjoint": chain_adjoint, "loop_adjoint": loop_adjoint, "lorenz_tangents": lorenz_tangents,
            "tiny_adjoint": tiny_adjoint, "rosenbrock_hessian_loops": rosenbrock_hessian_loops}


_compiled = {}


def numba_kernels():
    """:func:`kernels` compiled by ``numba.njit`` (lazily, on each kernel's first call); raises
    ``PeerUnavailable`` without Numba."""
    if "kernels" not in _compiled:
        numba = peers.load_numba()
        _compiled["kernels"] = kernels(numba.njit)
    return _compiled["kernels"]
