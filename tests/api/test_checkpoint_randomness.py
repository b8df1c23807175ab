"""Recomputation replays randomness: wg.checkpoint and wg.iterate (every policy and schedule, nested)
give the value and gradient of ONE set of random draws -- those of the same program run without
checkpointing, from the same seed -- and leave every random state where that program leaves it.
Draws wengert cannot replay raise, naming the function. Checked against the plain program, finite
differences, and torch.utils.checkpoint's semantics.
"""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.nn as nn
import wengert.numpy as wnp


def central_difference(f, x, h=1e-6):
    """The gradient of scalar ``f`` at ``x`` by central differences (``f`` reseeds itself)."""
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


X = np.linspace(0.5, 2.0, 8)


# -- the found cases: Dropout and np.random.rand inside wg.checkpoint -------------------------------

def test_dropout_in_checkpoint_uses_the_forward_mask():
    drop = nn.Dropout(0.5)

    def block(x):
        return drop(x) * 2.0

    def loss(x, ck):
        return wnp.sum((wg.checkpoint(block) if ck else block)(x) ** 2)

    for seed in range(5):
        drop.rng = np.random.default_rng(seed)
        value, grad = wg.value_and_grad(loss)(X, True)
        after = drop.rng.random()
        drop.rng = np.random.default_rng(seed)
        mask = drop.rng.random(8) >= 0.5  # the mask the plain program draws
        plain_after = drop.rng.random()
        expected = 2 * 4 * X * mask / 0.25  # d/dx sum((2 x m / (1-p))^2)
        assert np.allclose(grad, expected, rtol=1e-12), seed
        assert np.isclose(value, np.sum((2 * X * mask / 0.5) ** 2))
        assert after == plain_after  # the Generator is where the plain program leaves it
        drop.rng = np.random.default_rng(seed)
        plain_value, plain_grad = wg.value_and_grad(loss)(X, False)
        assert value == plain_value and np.array_equal(grad, plain_grad)


def test_global_random_in_checkpoint_value_and_gradient_are_one_draw():
    def block(x):
        return wnp.sin(x * np.random.rand(8))

    def loss(x, ck=True):
        np.random.seed(3)
        return wnp.sum((wg.checkpoint(block) if ck else block)(x) ** 2)

    value, grad = wg.value_and_grad(loss)(X)
    plain_value, plain_grad = wg.value_and_grad(loss)(X, False)
    assert value == plain_value
    assert np.allclose(grad, plain_grad, rtol=1e-13)
    assert np.allclose(grad, central_difference(loss, X), rtol=1e-6, atol=1e-8)


def test_random_state_after_backward_is_the_plain_programs():
    drop = nn.Dropout(0.3)

    def block(x):
        return drop(x) * np.random.rand(8)

    def run(ck):
        np.random.seed(11)
        drop.rng = np.random.default_rng(11)
        wg.grad(lambda x: wnp.sum((wg.checkpoint(block) if ck else block)(x) * np.random.rand()))(X)
        return np.random.rand(3), drop.rng.random(3)

    checkpointed, plain = run(True), run(False)
    assert np.array_equal(checkpointed[0], plain[0])
    assert np.array_equal(checkpointed[1], plain[1])


def test_gradient_from_two_backward_passes_of_one_recording():
    """A second backward pass over the same recording recomputes again: same draws again."""
    def block(x):
        return x * np.random.rand(8)

    np.random.seed(5)
    t = wg.tensor(X, requires_grad=True)
    y = wnp.sum(wg.checkpoint(block)(t) ** 2)
    y.backward(retain_graph=True)
    first = t.grad.value.copy()
    y.backward()
    np.random.seed(5)
    r = np.random.rand(8)
    assert np.allclose(first, 2 * X * r ** 2, rtol=1e-13)
    assert np.allclose(t.grad.value, 2 * first, rtol=1e-13)


def test_second_order_and_jvp_through_checkpoint_see_the_forward_draws():
    def block(x):
        return wnp.sin(x * np.random.rand(8)) * np.random.randn()

    def loss(x, ck=True):
        np.random.seed(2)
        return wnp.sum((wg.checkpoint(block) if ck else block)(x) ** 3)

    h = wg.hessian(loss)(X)
    assert np.allclose(h, wg.hessian(lambda x: loss(x, False))(X), rtol=1e-12, atol=1e-13)
    t = np.cos(np.arange(8.0))
    out, tangent = wg.jvp(loss, (X,), (t,))
    plain_out, plain_tangent = wg.jvp(lambda x: loss(x, False), (X,), (t,))
    assert out == plain_out and np.isclose(tangent, plain_tangent, rtol=1e-12)


def test_checkpointed_model_with_dropout_trains_like_the_plain_one():
    """Tensor.backward() through a checkpointed wengert.nn model: the parameters' gradients."""
    def grads(ck, seed):
        model = nn.Sequential(nn.Linear(4, 16, rng=0), nn.ReLU(), nn.Dropout(0.5, rng=seed),
                              nn.Linear(16, 1, rng=1))
        x = np.random.default_rng(9).standard_normal((5, 4))
        out = (wg.checkpoint(model) if ck else model)(x)
        wnp.sum(out ** 2).backward()
        return [p.grad.value for p in model.parameters()]

    for seed in range(3):
        for a, b in zip(grads(True, seed), grads(False, seed)):
            assert np.allclose(a, b, rtol=1e-6, atol=1e-7)


# -- the user's own Generators -------------------------------------------------------------------------

RNG = np.random.default_rng(0)


def test_closed_over_and_global_generators_are_replayed():
    local = np.random.default_rng(1)
    box = types.SimpleNamespace(inner={"g": np.random.default_rng(2)})

    def helper(x):
        return x * RNG.random(8)  # a global of a function the block calls

    def block(x):
        return helper(x) * local.normal(size=8) + box.inner["g"].random(8)

    def loss(x, ck=True):
        RNG.bit_generator.state = np.random.default_rng(10).bit_generator.state
        local.bit_generator.state = np.random.default_rng(11).bit_generator.state
        box.inner["g"].bit_generator.state = np.random.default_rng(12).bit_generator.state
        return wnp.sum((wg.checkpoint(block) if ck else block)(x) ** 2)

    grad, plain = wg.grad(loss)(X), wg.grad(lambda x: loss(x, False))(X)
    assert np.allclose(grad, plain, rtol=1e-13)
    assert np.allclose(grad, central_difference(loss, X), rtol=1e-6, atol=1e-8)


def test_unreachable_generator_raises_and_generators_argument_replays_it():
    holder = types.ModuleType("holder")  # modules are not searched
    holder.rng = np.random.default_rng(0)
    scope = {"holder": holder, "np": np}
    exec("def noisy(x):\n    return x * holder.rng.random(x.shape)\n", scope)
    noisy = scope["noisy"]

    with pytest.raises(RuntimeError, match=r"wg\.checkpoint\(noisy\): recomputing noisy in the backward "
                                           r"pass gave different values than its first run.*generators="):
        wg.grad(lambda x: wnp.sum(wg.checkpoint(noisy)(x) ** 2))(X)

    holder.rng = np.random.default_rng(4)
    grad = wg.grad(lambda x: wnp.sum(wg.checkpoint(noisy, generators=[holder.rng])(x) ** 2))(X)
    r = np.random.default_rng(4).random(8)
    assert np.allclose(grad, 2 * X * r ** 2, rtol=1e-13)
    assert holder.rng.random() == np.random.default_rng(4).random(9)[8]

    holder.rng = np.random.default_rng(4)  # the decorator form
    ck = wg.checkpoint(generators=holder.rng)(noisy)
    assert np.allclose(wg.grad(lambda x: wnp.sum(ck(x) ** 2))(X), 2 * X * r ** 2, rtol=1e-13)


def test_fresh_entropy_inside_a_block_raises():
    def block(x):
        return x * np.random.default_rng().random(8)

    with pytest.raises(RuntimeError, match=r"wg\.checkpoint\(block\): recomputing block .*different "
                                           r"values than its first run"):
        wg.grad(lambda x: wnp.sum(wg.checkpoint(block)(x)))(X)


def test_generators_argument_is_checked():
    with pytest.raises(TypeError, match=r"wg\.checkpoint\(sin\): generators= takes numpy\.random\."
                                        r"Generator or RandomState objects .* got int"):
        wg.checkpoint(np.sin, generators=[3])(X)


# -- wg.iterate: every policy, schedule and snapshot count ------------------------------------------------

def noisy_step(x):
    return wnp.tanh(x * (1.0 + np.random.rand(*np.shape(x))) + 0.1 * np.random.randn())


def plain_loop(x, n):
    for _ in range(n):
        x = noisy_step(x)
    return x


def iterate_loss(x, n, seed, **kw):
    np.random.seed(seed)
    return wnp.sum(wg.iterate(noisy_step, x, n, **kw) ** 2)


def plain_loss(x, n, seed):
    np.random.seed(seed)
    return wnp.sum(plain_loop(x, n) ** 2)


POLICIES = [dict(checkpoint="all"), dict(checkpoint="ctz"), dict(checkpoint="binomial"),
            dict(checkpoint="binomial", snapshots=1), dict(checkpoint="binomial", snapshots=2),
            dict(checkpoint="binomial", snapshots=5)]


@pytest.mark.parametrize("kw", POLICIES, ids=lambda kw: "-".join(str(v) for v in kw.values()))
@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_iterate_policies_replay_every_step(kw, n):
    grad = wg.grad(iterate_loss)(X, n, 4, **kw)
    after = np.random.rand(2)
    plain = wg.grad(plain_loss)(X, n, 4)
    assert np.allclose(grad, plain, rtol=1e-12, atol=1e-14)
    assert np.array_equal(after, np.random.rand(2))  # the global state: where the plain loop leaves it
    assert iterate_loss(X, n, 4, **kw) == plain_loss(X, n, 4)


def test_iterate_gradient_matches_finite_differences():
    def f(x):
        return iterate_loss(x, 9, 1, checkpoint="binomial", snapshots=2)

    assert np.allclose(wg.grad(f)(X), central_difference(f, X), rtol=1e-6, atol=1e-8)


def test_online_schedule_with_until_replays():
    def until(x):
        stop = np.min(x) < 0.6 and np.max(x) < 1.5  # after 7 steps, for this seed
        return np.random.rand() > 2 or stop  # draws too: outside the recorded steps

    def loss(x, ck=True):
        np.random.seed(8)
        if ck:
            return wnp.sum(wg.iterate(noisy_step, x, 30, until=until, checkpoint="ctz") ** 2)
        for _ in range(30):
            if until(x):
                break
            x = noisy_step(x)
        return wnp.sum(x ** 2)

    with wg.checkpointing.Stats() as stats:
        grad = wg.grad(loss)(X)
    assert stats.evaluations > 7  # steps were recomputed
    assert np.allclose(grad, wg.grad(lambda x: loss(x, False))(X), rtol=1e-12)
    np.random.rand()
    after = np.random.rand()
    wg.grad(lambda x: loss(x, False))(X)
    np.random.rand()
    assert after == np.random.rand()


def test_iterate_with_dropout_generator_and_second_order():
    drop = nn.Dropout(0.25)

    def step(x):
        return wnp.sin(drop(x)) + x * 0.5

    def loss(x, kw):
        drop.rng = np.random.default_rng(6)
        y = wg.iterate(step, x, 6, **kw) if kw else plain(x)
        return wnp.sum(y ** 3)

    def plain(x):
        for _ in range(6):
            x = step(x)
        return x

    expected = wg.hessian(lambda x: loss(x, None))(X)
    for kw in POLICIES[1:]:
        assert np.allclose(wg.hessian(lambda x: loss(x, kw))(X), expected, rtol=1e-11, atol=1e-12), kw


# -- nested checkpoints -----------------------------------------------------------------------------

def test_nested_checkpoints_replay_at_every_level():
    drop = nn.Dropout(0.5)

    @wg.checkpoint
    def inner(x):
        return wnp.cos(drop(x)) * np.random.rand(8)

    def outer_block(x):
        return inner(x * np.random.rand(8)) + inner(x)

    def step(x):
        return wg.checkpoint(outer_block)(x) * 0.5 + x * np.random.rand()

    def loss(x, ck=True):
        np.random.seed(1)
        drop.rng = np.random.default_rng(1)
        if ck:
            return wnp.sum(wg.iterate(step, x, 5, checkpoint="binomial", snapshots=2) ** 2)
        for _ in range(5):
            x = (inner.__wrapped__(x * np.random.rand(8)) + inner.__wrapped__(x)) * 0.5 + x * np.random.rand()
        return wnp.sum(x ** 2)

    grad = wg.grad(loss)(X)
    after = (np.random.rand(), drop.rng.random())
    plain = wg.grad(lambda x: loss(x, False))(X)
    assert np.allclose(grad, plain, rtol=1e-12)
    assert after == (np.random.rand(), drop.rng.random())
    assert np.allclose(grad, central_difference(loss, X), rtol=1e-6, atol=1e-8)


# -- property: any seed, size, step count, schedule -------------------------------------------------

@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 31 - 1), size=st.integers(1, 6), n=st.integers(1, 12),
       policy=st.sampled_from(POLICIES[1:]))
def test_property_checkpointed_randomness_is_the_plain_programs(seed, size, n, policy):
    x = np.linspace(-1.0, 1.0, size)
    grad = wg.grad(iterate_loss)(x, n, seed, **policy)
    after = np.random.rand()
    assert np.allclose(grad, wg.grad(plain_loss)(x, n, seed), rtol=1e-11, atol=1e-13)
    assert after == np.random.rand()


# -- the peer: torch.utils.checkpoint restores the RNG state for its recomputation --------------------

def test_same_semantics_as_torch_utils_checkpoint():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    def torch_grads(ck):
        torch.manual_seed(0)
        x = torch.tensor(X, requires_grad=True)
        block = torch.nn.functional.dropout
        y = torch_checkpoint(block, x, 0.5, use_reentrant=False) if ck else block(x, 0.5)
        (y ** 2).sum().backward()
        return x.grad.numpy(), torch.rand(3).numpy()

    def wengert_grads(ck):
        drop = nn.Dropout(0.5, rng=0)
        return (wg.grad(lambda x: wnp.sum(((wg.checkpoint(drop) if ck else drop)(x)) ** 2))(X),
                drop.rng.random(3))

    for grads in (torch_grads, wengert_grads):
        (g_ck, next_ck), (g_plain, next_plain) = grads(True), grads(False)
        assert np.allclose(g_ck, g_plain)  # the recomputation used the forward's mask
        assert np.array_equal(next_ck, next_plain)  # and the state after backward is the plain one's
        kept = g_ck != 0
        assert 0 < kept.sum() < len(X)  # a real mask: some dropped, some kept
        assert np.allclose(g_ck[kept], 2 * X[kept] / 0.25)


# -- the global state's corners: randn's cached Gaussian, another bit generator ------------------------

def test_odd_gaussian_draws_and_another_global_bit_generator_are_replayed():
    def block(x):
        return x * np.random.randn(1)  # legacy randn draws a pair and keeps one for the next call

    def run(ck, state):
        np.random.set_state(state)
        np.random.randn(1)  # leaves a cached Gaussian: the block's first draw uses it, moving no word
        g = wg.grad(lambda x: wnp.sum((wg.checkpoint(block) if ck else block)(x) ** 2))(X)
        return g, np.random.randn(3)

    def check(state):
        (g, after), (g_plain, after_plain) = run(True, state), run(False, state)
        assert np.allclose(g, g_plain, rtol=1e-13) and np.array_equal(after, after_plain)

    for seed in range(3):
        check(np.random.RandomState(seed).get_state(legacy=False))
    saved = np.random.mtrand._rand._bit_generator
    try:
        np.random.set_bit_generator(np.random.PCG64(5))
        check(np.random.get_state(legacy=False))  # (np.random.seed keeps PCG64's cached Gaussian)
    finally:
        np.random.set_bit_generator(saved)


def test_recomputation_check_tolerates_rounding_only():
    from wengert.api.randomness import check_same

    def what():
        return "wg.checkpoint(f): recomputing f"

    a = np.array([1.0, -2.0, np.inf, np.nan, 0.0])
    check_same([a * (1 + 1e-15), 3, "label"], [a, 3, "other"], what)  # rounding; non-numbers skipped
    check_same([np.float32([1, 2]) * np.float32(1 + 1e-6)], [np.float32([1, 2])], what)
    for changed in (a + [0, 0, 0, 0, 1e-3], np.where(np.isinf(a), 1.0, a), a[:4], np.array([1.0])):
        with pytest.raises(RuntimeError, match=r"wg\.checkpoint\(f\): recomputing f gave different values "
                                               r"than its first run \(leaf 0\)"):
            check_same([changed], [a], what)
    with pytest.raises(RuntimeError, match=r"\(leaf 1\)"):
        check_same([a, np.array([1, 2])], [a, np.array([1, 3])], what)
