"""An LSTM over a sequence, forward and backward: ``nn.LSTM`` against hand-written NumPy (the
reference: backpropagation through time written out) and PyTorch's ``nn.LSTM``, float32, one thread.

- ``lstm-h128-seq100``: input and hidden size 128, sequence 100, batch 32 (issue 31's workload); the
  loss is ``sum_t sum(h_t * R_t)`` for a fixed random R, gradients with respect to the four weights.
  ``binomial`` is the same LSTM with the time loop as ``wg.iterate(..., checkpoint="binomial")``.

``lstm_memory`` measures the peak memory (tracemalloc, NumPy's allocations) of one gradient: of
``nn.LSTM``, and of the step-by-step loop (each step projecting its own input) under ``wg.iterate``
with every step kept and with binomial checkpointing; ``python -m benchmarks --only memory``
reports it.
"""

import tracemalloc

import numpy as np

from benchmarks import peers
from benchmarks.harness import Impl, Target, Workload

__all__ = ["lstm_workload", "lstm_memory", "NAME"]

NAME = "lstm-h128-seq100"
PARAMS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def _data(L, B, H, seed=0):
    rng = np.random.default_rng(seed)
    k = 1.0 / np.sqrt(H)
    params = [rng.uniform(-k, k, s).astype(np.float32) for s in ((4 * H, H), (4 * H, H), (4 * H,), (4 * H,))]
    x = rng.standard_normal((L, B, H)).astype(np.float32)
    R = rng.standard_normal((L, B, H)).astype(np.float32)
    return params, x, R


def _sigmoid(a):
    return 0.5 * np.tanh(0.5 * a) + 0.5


def hand_lstm(params, x, R):
    """Loss and gradients by backpropagation through time, written out in NumPy."""
    w_ih, w_hh, b_ih, b_hh = params
    L, B, _ = x.shape
    H = w_hh.shape[1]
    proj = (x.reshape(L * B, -1) @ w_ih.T + (b_ih + b_hh)).reshape(L, B, 4 * H)
    h = c = np.zeros((B, H), np.float32)
    hs, cs, acts = [h], [c], []
    loss = 0.0
    for t in range(L):
        a = proj[t] + h @ w_hh.T
        i, f = _sigmoid(a[:, :H]), _sigmoid(a[:, H:2 * H])
        g, o = np.tanh(a[:, 2 * H:3 * H]), _sigmoid(a[:, 3 * H:])
        c = f * c + i * g
        tc = np.tanh(c)
        h = o * tc
        acts.append((i, f, g, o, tc))
        hs.append(h)
        cs.append(c)
        loss += float(np.sum(h * R[t]))
    d_gates = np.empty((L, B, 4 * H), np.float32)
    dh, dc = np.zeros((B, H), np.float32), np.zeros((B, H), np.float32)
    for t in reversed(range(L)):
        i, f, g, o, tc = acts[t]
        dh = dh + R[t]
        dct = dc + dh * o * (1 - tc * tc)
        d = d_gates[t]
        d[:, :H] = dct * g * i * (1 - i)
        d[:, H:2 * H] = dct * cs[t] * f * (1 - f)
        d[:, 2 * H:3 * H] = dct * i * (1 - g * g)
        d[:, 3 * H:] = dh * tc * o * (1 - o)
        dc = dct * f
        dh = d @ w_hh
    flat = d_gates.reshape(L * B, 4 * H)
    g_ih = flat.T @ x.reshape(L * B, -1)
    g_hh = flat.T @ np.concatenate(hs[:-1]).reshape(L * B, H)
    g_b = flat.sum(axis=0)
    return loss, [g_ih, g_hh, g_b, g_b.copy()]


def _wengert_grad(L, B, H, checkpoint):
    """``params -> (loss, grads)`` with ``nn.LSTM`` (``checkpoint`` None) or the same cell under
    ``wg.iterate(..., checkpoint=checkpoint)``."""
    import wengert as wg
    import wengert.numpy as wnp
    from wengert import nn
    from wengert.nn.recurrent import lstm_step

    model = nn.LSTM(H, H)

    def plain(p, x, R):
        out, _ = nn.functional_call(model, p, (x,))
        return wnp.sum(out * R)

    def stepwise(p, x, R):
        """The time loop as wg.iterate; each step projects its own input and state with one
        product, [x_t, h] @ [W_ih; W_hh]^T. (A product of closed-over values alone, x_t @ W_ih^T,
        would be recorded outside the checkpointed step, once per step: O(L) memory.)"""
        w_cat = wnp.concatenate([wnp.transpose(p["weight_ih_l0"]), wnp.transpose(p["weight_hh_l0"])], axis=0)
        bias = p["bias_ih_l0"] + p["bias_hh_l0"]

        def step(state):
            h, c, total, t = state
            h, c = lstm_step(wnp.concatenate([x[t], h], axis=-1) @ w_cat + bias, c)
            return h, c, total + wnp.sum(h * R[t]), t + 1

        zeros = np.zeros((B, H), np.float32)
        return wg.iterate(step, (zeros, zeros, np.float32(0.0), 0), L, checkpoint=checkpoint)[2]

    vg = wg.value_and_grad(plain if checkpoint is None else stepwise)

    def run(params, x, R):
        value, g = vg(dict(zip(PARAMS, params)), x, R)
        return float(value), [g[k] for k in PARAMS]

    return run


def lstm_workload(quick=False):
    """The LSTM workload (``quick``: sequence 10, batch 4, hidden 16)."""
    L, B, H = (10, 4, 16) if quick else (100, 32, 128)
    params, x, R = _data(L, B, H)

    def hand_impl():
        return Impl(lambda: hand_lstm(params, x, R), lambda out: out)

    def wengert_impl(checkpoint=None):
        run = _wengert_grad(L, B, H, checkpoint)
        return Impl(lambda: run(params, x, R), lambda out: out)

    def torch_impl():
        torch = peers.load_torch()
        lstm = torch.nn.LSTM(H, H)
        with torch.no_grad():
            for name, value in zip(PARAMS, params):
                getattr(lstm, name).copy_(torch.from_numpy(value))
        xt, Rt = torch.from_numpy(x), torch.from_numpy(R)

        def run():
            lstm.zero_grad()
            out, _ = lstm(xt)
            loss = (out * Rt).sum()
            loss.backward()
            return loss.item(), [getattr(lstm, k).grad.numpy().copy() for k in PARAMS]

        return Impl(run, lambda out: out)

    return Workload(
        name=NAME,
        title=f"LSTM forward + backward: sequence {L}, batch {B}, input and hidden {H}, float32",
        description="nn.LSTM through wg.value_and_grad (binomial: the time loop as wg.iterate with "
                    "checkpoint='binomial'); PyTorch's nn.LSTM, one thread; hand-written BPTT in NumPy.",
        params=PARAMS, rtol=2e-3,
        reference=lambda: hand_lstm(params, x, R),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl,
                   "binomial": lambda: wengert_impl("binomial")},
        rounds=3 if quick else 9, sample_s=0.1, max_calls=5,
        targets=[Target("nn.LSTM within 2x of PyTorch's nn.LSTM", "torch", 2.0, kind="within")],
    )


def lstm_memory(quick=False):
    """Rows ``(what, implementation, peak)``: tracemalloc's peak during one gradient of the LSTM
    workload, with every step kept and with binomial checkpointing over time steps."""
    L, B, H = (10, 4, 16) if quick else (100, 32, 128)
    params, x, R = _data(L, B, H)
    rows, peaks = [], {}
    want = hand_lstm(params, x, R)
    labels = {None: "wengert nn.LSTM", "all": "wengert iterate(checkpoint='all')",
              "binomial": "wengert iterate(checkpoint='binomial')"}
    for checkpoint, label in labels.items():
        run = _wengert_grad(L, B, H, checkpoint)
        run(params, x, R)  # warm: imports, first-call caches
        tracemalloc.start()
        try:
            got = run(params, x, R)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        ok = all(np.allclose(g, w, rtol=2e-3, atol=1e-3) for g, w in zip(got[1], want[1]))
        peaks[checkpoint] = peak
        rows.append((f"LSTM h{H} seq{L} batch{B}, gradient peak", label,
                     f"{peak / 2**20:.1f} MiB" + ("" if ok else " FAILED")))
    for base in (None, "all"):
        rows.append((f"LSTM h{H} seq{L} batch{B}, binomial / {labels[base]} (goal <= 0.25)", "ratio",
                     f"{peaks['binomial'] / peaks[base]:.2f}"))
    return rows
