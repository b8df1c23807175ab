"""wengert.optim: SGD (momentum, Nesterov, weight decay), Adam, AdamW, and learning-rate schedules.

The update formulas are PyTorch's (``torch.optim``), applied in place to the ``.value`` of each
parameter from its ``.grad`` after ``loss.backward()``. Parameters without a gradient are skipped.
Each write is stamped as PyTorch's version counters do: a later backward pass through a graph that
saved a parameter's old value raises instead of using the new one (``mutation.note_inplace_write``).
A :class:`~wengert.nn.SparseRows` gradient (from ``nn.Embedding``) updates only its rows:
plain SGD adds ``-lr * rows``; Adam/AdamW update the moments of those rows only and leave the rest
of the table, and its moments, untouched (``torch.optim.SparseAdam``'s "lazy" semantics). With
momentum or weight decay, SGD densifies a sparse gradient first (every row then moves).

Like PyTorch: ``param_groups`` is a list of dicts holding ``"params"`` and the hyper-parameters
(so a schedule can set ``"lr"``); ``state_dict()`` refers to parameters by their position.

Beside them, the functional optimisers of HIPS autograd (``autograd.misc.optimizers``), with its
signatures: ``sgd``, ``momentum``, ``rmsprop`` and ``adam`` take ``grad(params, i)`` and a pytree
of starting parameters, call ``callback(params, i, g)`` every step, and return the parameters.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from wengert.api.tree import describe, tree_flatten, tree_ravel
from wengert.core.trace import unbox_all
from wengert.engines.mutation import note_inplace_writes
from wengert.nn.module import SparseRows

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "StepLR", "CosineAnnealingLR", "sgd", "momentum",
           "rmsprop", "adam"]


class Optimizer:
    """Base class: holds ``param_groups`` and per-parameter ``state``; subclasses define ``_update``."""

    defaults: dict[str, Any] = {}
    _update: Any  # defined by each subclass: _update(p, g, state, group)

    def __init__(self, params: Iterable[Any], **hyper: Any) -> None:
        for key, value in hyper.items():
            if key == "lr" and not value >= 0.0:
                raise ValueError(f"{type(self).__name__}: invalid learning rate lr={value}")
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups: list[dict[str, Any]] = []
        for group in groups:
            group = dict(group)
            group["params"] = list(group["params"])
            for key, value in hyper.items():
                group.setdefault(key, value)
            group.setdefault("initial_lr", group["lr"])
            self.param_groups.append(group)
        for p in self._all_params():
            if not getattr(p, "requires_grad", False):
                raise TypeError(f"{type(self).__name__}: every parameter must be a tensor that requires "
                                f"grad (nn.Parameter or wg.tensor(..., requires_grad=True)), got {p!r:.60}")
        self.state = {}  # id(param) -> dict

    def _all_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (``None``, PyTorch 2's default), or fill them with zeros."""
        for p in self._all_params():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = np.zeros_like(p.value)

    def step(self) -> None:
        """Update every parameter that has a gradient, in place."""
        written = []
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                state = self.state.setdefault(id(p), {})
                if isinstance(g, SparseRows):
                    self._update_sparse(p, g, state, group)
                else:
                    self._update(p, np.asarray(unbox_all(g)), state, group)
                written.append(p.value)
        # as PyTorch's version counters: a backward pass through a graph that saved an old value
        # (another loss's, retained: a GAN's two optimisers) refuses it, naming the step
        note_inplace_writes(written, f"{type(self).__name__}.step()")

    def _update_sparse(self, p, g, state, group):
        self._update(p, g.to_dense(), state, group)

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{hyper-parameters, "params": [indices]}]}``."""
        index = {id(p): i for i, p in enumerate(self._all_params())}
        groups, k = [], 0
        for g in self.param_groups:
            entry = {key: v for key, v in g.items() if key != "params"}
            entry["params"] = list(range(k, k + len(g["params"])))
            k += len(g["params"])
            groups.append(entry)
        state = {index[pid]: {key: (np.array(v) if isinstance(v, np.ndarray) else v) for key, v in s.items()}
                 for pid, s in self.state.items() if pid in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (for the same parameters, in the same order)."""
        params = self._all_params()
        groups = state_dict["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(f"{type(self).__name__}.load_state_dict: the saved groups hold "
                             f"{[len(g['params']) for g in groups]} parameters, this optimizer's "
                             f"{[len(g['params']) for g in self.param_groups]}")
        for mine, saved in zip(self.param_groups, groups):
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            self.state[id(params[int(i)])] = {k: (np.array(v) if isinstance(v, np.ndarray) else v)
                                              for k, v in s.items()}


def _write(p, new_value):
    """Store an update into parameter ``p`` in place (its array keeps its identity)."""
    if isinstance(p.value, np.ndarray):
        np.copyto(p.value, new_value, casting="unsafe")
    else:
        p.value = float(new_value)


class SGD(Optimizer):
    """Stochastic gradient descent (torch.optim.SGD): with weight decay ``wd``, momentum ``mu``,
    dampening ``d``: g += wd p; b = mu b + (1 - d) g (b = g at the first step);
    g = g + mu b (Nesterov) or b; p -= lr g. ``maximize``: g is the negated gradient."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0, maximize: bool = False) -> None:
        if momentum < 0.0 or weight_decay < 0.0:
            raise ValueError(f"SGD: momentum and weight_decay must be >= 0, got {momentum}, {weight_decay}")
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov,
                         weight_decay=weight_decay, maximize=bool(maximize))

    def _update(self, p, g, state, group):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        if group.get("maximize"):
            g = -g
        if wd:
            g = g + wd * p.value
        if mu:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, dtype=p.dtype)
            else:
                buf *= mu
                buf += (1.0 - group["dampening"]) * g
            g = g + mu * buf if group["nesterov"] else buf
        _write(p, p.value - lr * g)

    def _update_sparse(self, p, g, state, group):
        if group["momentum"] or group["weight_decay"]:
            return self._update(p, g.to_dense(), state, group)
        lr = -group["lr"] if group.get("maximize") else group["lr"]
        np.subtract.at(p.value, g.indices, (lr * g.values).astype(p.dtype))


class Adam(Optimizer):
    """Adam (torch.optim.Adam): g += wd p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps). ``amsgrad``: the largest v so far in
    place of v; ``maximize``: g is the negated gradient (both as PyTorch)."""

    decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False,
                 maximize: bool = False) -> None:
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"{type(self).__name__}: betas must lie in [0, 1), got {betas}")
        if eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"{type(self).__name__}: eps and weight_decay must be >= 0")
        super().__init__(params, lr=lr, betas=(float(b1), float(b2)), eps=eps, weight_decay=weight_decay,
                         amsgrad=bool(amsgrad), maximize=bool(maximize))

    def _moments(self, p, state):
        if "exp_avg" not in state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p.value)
            state["exp_avg_sq"] = np.zeros_like(p.value)
        state["step"] += 1
        return state["step"], state["exp_avg"], state["exp_avg_sq"]

    def _update(self, p, g, state, group):
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group.get("maximize"):
            g = -g
        if wd and self.decoupled:
            p.value *= 1.0 - lr * wd
        elif wd:
            g = g + wd * p.value
        t, m, v = self._moments(p, state)
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * (g * g)
        if group.get("amsgrad"):
            v = state["max_exp_avg_sq"] = np.maximum(state.get("max_exp_avg_sq", v), v)
        step = (lr / (1.0 - b1 ** t)) * m / (np.sqrt(v / (1.0 - b2 ** t)) + eps)
        _write(p, p.value - step)

    def _update_sparse(self, p, g, state, group):
        if group["weight_decay"] or group.get("amsgrad"):
            return self._update(p, g.to_dense(), state, group)
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        g = g.coalesce()
        rows, gv = g.indices, -g.values if group.get("maximize") else g.values
        t, m, v = self._moments(p, state)
        m[rows] = b1 * m[rows] + (1.0 - b1) * gv
        v[rows] = b2 * v[rows] + (1.0 - b2) * (gv * gv)
        p.value[rows] -= (lr / (1.0 - b1 ** t)) * m[rows] / (np.sqrt(v[rows] / (1.0 - b2 ** t)) + eps)


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW): p *= 1 - lr wd, then Adam's step.
    Default weight_decay 0.01, as PyTorch."""

    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, amsgrad: bool = False,
                 maximize: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize)


class _Schedule:
    """Sets each group's ``lr`` from its ``initial_lr`` and the epoch; call ``step()`` once per epoch."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.last_epoch = 0
        self._set()

    def step(self) -> None:
        self.last_epoch += 1
        self._set()

    def _set(self):
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(group["initial_lr"], self.last_epoch)

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_epoch = int(state["last_epoch"])
        self._set()


class StepLR(_Schedule):
    """lr = initial_lr * gamma ** (epoch // step_size) (torch.optim.lr_scheduler.StepLR)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def lr_at(self, base: float, epoch: int) -> float:
        return base * self.gamma ** (epoch // self.step_size)


class CosineAnnealingLR(_Schedule):
    """lr = eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, the closed form of
    torch.optim.lr_scheduler.CosineAnnealingLR (as there, it climbs back after T_max epochs)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 - PyTorch's name
        if T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer)

    def lr_at(self, base: float, epoch: int) -> float:
        return self.eta_min + (base - self.eta_min) * (1.0 + math.cos(math.pi * epoch / self.T_max)) / 2.0


# -- functional optimisers over pytrees (HIPS autograd's autograd.misc.optimizers) --------------------


def _optimise(name, grad, x0, callback, num_iters, step):
    """Run ``step(g, x, i)`` (flat vectors) ``num_iters`` times from the pytree ``x0``; ``grad`` and
    ``callback`` see trees like ``x0``. The gradient tree is read by the parameters' structure: a
    dict's entries by key (whatever their order), each leaf checked against its parameter's shape.
    Returns the final tree."""
    x, unravel = tree_ravel(x0)
    x = np.array(x, dtype=x.dtype if x.dtype.kind in "fc" else np.float64)
    x_leaves, x_def = tree_flatten(x0)
    shapes = [np.shape(unbox_all(leaf)) for leaf in x_leaves]
    for i in range(num_iters):
        g_tree = grad(unravel(x), i)
        if callback is not None:
            callback(unravel(x), i, g_tree)
        g_leaves, g_def = tree_flatten(g_tree)
        if g_def != x_def:
            raise ValueError(f"wengert.optim.{name}: grad(params, {i}) returned a tree of structure "
                             f"{describe(g_def)}, the parameters are {describe(x_def)}: it must return "
                             f"a tree shaped like the parameters")
        for k, (leaf, shape) in enumerate(zip(g_leaves, shapes)):
            if np.shape(unbox_all(leaf)) != shape:
                raise ValueError(f"wengert.optim.{name}: grad(params, {i}) leaf {k} has shape "
                                 f"{np.shape(unbox_all(leaf))}, its parameter {shape}: it must return "
                                 f"a tree shaped like the parameters")
        g = np.asarray(unbox_all(tree_ravel(g_tree)[0]))
        x = step(g, x, i)
    return unravel(x)


def sgd(grad, x0, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """autograd.misc.optimizers.sgd: ``v = mass v - (1 - mass) g``, ``x += step_size v`` (the
    velocity an exponential average of the gradients; ``mass=0`` is plain gradient descent)."""
    state = {"v": 0.0}

    def step(g, x, i):
        state["v"] = mass * state["v"] - (1.0 - mass) * g
        return x + step_size * state["v"]

    return _optimise("sgd", grad, x0, callback, num_iters, step)


def momentum(grad, x0, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Heavy-ball momentum in PyTorch's form (``torch.optim.SGD(momentum=mass)``): ``v = mass v + g``,
    ``x -= step_size v``."""
    state = {"v": 0.0}

    def step(g, x, i):
        state["v"] = mass * state["v"] + g
        return x - step_size * state["v"]

    return _optimise("momentum", grad, x0, callback, num_iters, step)


def rmsprop(grad, x0, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=1e-8):
    """autograd.misc.optimizers.rmsprop: ``s``, a running average of the squared gradient starting
    at 1; ``x -= step_size g / (sqrt(s) + eps)``."""
    state = {"s": 1.0}

    def step(g, x, i):
        state["s"] = gamma * state["s"] + (1.0 - gamma) * g * g
        return x - step_size * g / (np.sqrt(state["s"]) + eps)

    return _optimise("rmsprop", grad, x0, callback, num_iters, step)


def adam(grad, x0, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=1e-8):
    """autograd.misc.optimizers.adam (Kingma and Ba's Adam): bias-corrected running averages
    ``m_hat`` of the gradient and ``v_hat`` of its square; ``x -= step_size m_hat / (sqrt(v_hat) + eps)``."""
    state = {"m": 0.0, "v": 0.0}

    def step(g, x, i):
        state["m"] = b1 * state["m"] + (1.0 - b1) * g
        state["v"] = b2 * state["v"] + (1.0 - b2) * g * g
        m_hat = state["m"] / (1.0 - b1 ** (i + 1))
        v_hat = state["v"] / (1.0 - b2 ** (i + 1))
        return x - step_size * m_hat / (np.sqrt(v_hat) + eps)

    return _optimise("adam", grad, x0, callback, num_iters, step)
