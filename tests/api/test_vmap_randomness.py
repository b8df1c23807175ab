"""wg.vmap's randomness= (torch.func.vmap's choices and default): 'error' refuses a draw inside the
mapped function, naming what drew; 'same' shares one draw across the batch; 'different' gives each
example its own draws, those of a Python loop over the examples. Under grad, inside grad, nested.
"""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.nn as nn
import wengert.numpy as wnp

XS = np.arange(1.0, 13.0).reshape(4, 3)


def noisy(x):
    return x * np.random.rand(3)


# -- 'error', the default -----------------------------------------------------------------------------

def test_default_refuses_a_global_draw_and_undoes_it():
    np.random.seed(0)
    expected_next = np.random.RandomState(0).rand()
    with pytest.raises(RuntimeError, match=r"wg\.vmap\(noisy\): noisy drew random numbers from NumPy's "
                                           r"global random state \(np\.random\), with randomness='error' "
                                           r"\(the default, as in torch\.func\.vmap\): the 4 examples would "
                                           r"share one draw\. Pass randomness='different'"):
        wg.vmap(noisy)(XS)
    assert np.random.rand() == expected_next  # the refused draw was undone


def test_error_names_a_dropout_layers_generator_and_a_closed_over_one():
    model = nn.Sequential(nn.Linear(3, 5, rng=0), nn.Dropout(0.5, rng=1))
    with pytest.raises(RuntimeError, match=r"drew random numbers from the Generator "
                                           r"Sequential\.layers\[1\]\.rng, with randomness='error'"):
        wg.vmap(model)(XS)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state

    def shaky(x):
        return x + rng.normal(size=3)

    with pytest.raises(RuntimeError, match=r"wg\.vmap\(shaky\): shaky drew random numbers from the "
                                           r"Generator rng, with randomness='error'"):
        wg.vmap(shaky)(XS)
    assert rng.bit_generator.state == state


def test_error_mode_finds_generators_given_explicitly():
    holder = types.ModuleType("holder")  # not searched
    holder.rng = np.random.default_rng(0)
    scope = {"holder": holder}
    exec("def hidden(x):\n    return x * holder.rng.random()\n", scope)
    wg.vmap(scope["hidden"])(XS)  # not reachable: not detected (documented)
    with pytest.raises(RuntimeError, match=r"hidden drew random numbers from the Generator generators\[0\]"):
        wg.vmap(scope["hidden"], generators=[holder.rng])(XS)


def test_deterministic_functions_are_unaffected():
    def f(x):
        return wnp.sin(x) * 2.0

    assert np.array_equal(wg.vmap(f)(XS), np.sin(XS) * 2.0)
    for mode in ("same", "different"):
        assert np.array_equal(wg.vmap(f, randomness=mode)(XS), np.sin(XS) * 2.0)


def test_randomness_is_checked():
    with pytest.raises(ValueError, match=r"wg\.vmap\(noisy\): randomness must be one of 'error', "
                                         r"'different', 'same', got 'shared'"):
        wg.vmap(noisy, randomness="shared")


# -- 'same' and 'different' ------------------------------------------------------------------------------

def test_same_shares_one_draw():
    np.random.seed(1)
    out = wg.vmap(noisy, randomness="same")(XS)
    np.random.seed(1)
    r = np.random.rand(3)
    assert np.array_equal(out, XS * r)
    assert np.random.rand() == np.random.RandomState(1).rand(4)[3]  # the state after one draw of 3


def test_different_draws_per_example_as_a_python_loop():
    np.random.seed(2)
    out = wg.vmap(noisy, randomness="different")(XS)
    after = np.random.rand()
    np.random.seed(2)
    loop = np.stack([noisy(x) for x in XS])
    assert np.array_equal(out, loop)
    assert after == np.random.rand()
    ratios = out / XS
    assert not np.allclose(ratios, ratios[0])  # not all examples share the draws


def test_dropout_masks_same_and_different():
    drop = nn.Dropout(0.5, rng=3)
    ones = np.ones((6, 40))
    same = wg.vmap(drop, randomness="same")(ones)
    assert (same == same[0]).all() and 0 < (same[0] == 0).sum() < 40
    different = wg.vmap(drop, randomness="different")(ones)
    assert not (different == different[0]).all()


def test_different_with_out_axes_matches_the_batched_path():
    def f(x, y):
        return x * y, wnp.sum(y)

    y = np.arange(3.0)
    for out_axes in [(1, None), (-1, None), (0, None)]:
        expected = wg.vmap(f, (0, None), out_axes)(XS, y)
        got = wg.vmap(f, (0, None), out_axes, randomness="different")(XS, y)
        for a, b in zip(got, expected):
            assert np.array_equal(a, b)
    with pytest.raises(ValueError, match=r"wg\.vmap\(f\): out_axes is None for result 0, but it differs "
                                         r"between the 4 examples"):
        wg.vmap(f, (0, None), (None, None), randomness="different")(XS, y)


# -- composition: vmap of grad, grad of vmap, nested -----------------------------------------------------

def per_example_loss(x):
    return wnp.sum(wnp.sin(x * np.random.rand(3)) ** 2)


def test_vmap_of_grad():
    with pytest.raises(RuntimeError, match=r"drew random numbers from NumPy's global random state"):
        wg.vmap(wg.grad(per_example_loss))(XS)
    np.random.seed(4)
    different = wg.vmap(wg.grad(per_example_loss), randomness="different")(XS)
    np.random.seed(4)
    assert np.array_equal(different, np.stack([wg.grad(per_example_loss)(x) for x in XS]))
    np.random.seed(4)
    same = wg.vmap(wg.grad(per_example_loss), randomness="same")(XS)
    np.random.seed(4)
    r = np.random.rand(3)
    assert np.allclose(same, 2 * np.sin(XS * r) * np.cos(XS * r) * r, rtol=1e-13)


def test_grad_of_vmap():
    def total(xs, mode):
        np.random.seed(5)
        return wnp.sum(wg.vmap(per_example_loss, randomness=mode)(xs))

    with pytest.raises(RuntimeError, match=r"wg\.vmap\(per_example_loss\): per_example_loss drew"):
        wg.grad(total)(XS, "error")
    np.random.seed(5)
    rows = np.random.rand(4, 3)
    expected = 2 * np.sin(XS * rows) * np.cos(XS * rows) * rows
    assert np.allclose(wg.grad(total)(XS, "different"), expected, rtol=1e-13)
    r = rows[0]
    assert np.allclose(wg.grad(total)(XS, "same"), 2 * np.sin(XS * r) * np.cos(XS * r) * r, rtol=1e-13)


def test_nested_vmap():
    cube = np.arange(24.0).reshape(2, 4, 3) + 1

    def inner(x):
        return x * np.random.rand()

    outer_same = wg.vmap(wg.vmap(inner, randomness="same"), randomness="same")
    out = outer_same(cube)
    assert np.allclose(out / cube, (out / cube).flat[0])
    with pytest.raises(RuntimeError, match=r"drew random numbers"):  # the inner batch draws: refused
        wg.vmap(wg.vmap(inner), randomness="different")(cube)
    with pytest.raises(RuntimeError, match=r"drew random numbers"):  # the outer batch draws: refused
        wg.vmap(wg.vmap(inner, randomness="different"))(cube)
    np.random.seed(6)
    both = wg.vmap(wg.vmap(inner, randomness="different"), randomness="different")(cube)
    np.random.seed(6)
    loop = np.stack([np.stack([inner(v) for v in row]) for row in cube])
    assert np.array_equal(both, loop)
    assert len(np.unique(np.round(both / cube, 12))) == 8


# -- property ----------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 31 - 1), batch=st.integers(1, 6), size=st.integers(1, 5))
def test_property_modes_against_loops(seed, batch, size):
    xs = np.linspace(-1.0, 2.0, batch * size).reshape(batch, size)

    def f(x):
        return wnp.tanh(x + np.random.randn(size))

    np.random.seed(seed)
    different = wg.vmap(f, randomness="different")(xs)
    np.random.seed(seed)
    assert np.array_equal(different, np.stack([f(x) for x in xs]))
    np.random.seed(seed)
    same = wg.vmap(f, randomness="same")(xs)
    np.random.seed(seed)
    assert np.array_equal(same, np.tanh(xs + np.random.randn(size)))
    before = np.random.get_state()
    with pytest.raises(RuntimeError, match="randomness='error'"):
        wg.vmap(f)(xs)
    after = np.random.get_state()
    assert np.array_equal(before[1], after[1]) and before[2] == after[2]


# -- the peer --------------------------------------------------------------------------------------------

def test_same_semantics_as_torch_func_vmap():
    torch = pytest.importorskip("torch")
    xs = torch.ones(4, 3, dtype=torch.float64)

    def f(x):
        return x * torch.rand(3, dtype=torch.float64)

    with pytest.raises(RuntimeError):
        torch.func.vmap(f)(xs)  # torch's default is 'error' too
    with pytest.raises(RuntimeError):
        wg.vmap(noisy)(np.ones((4, 3)))
    t_same = torch.func.vmap(f, randomness="same")(xs).numpy()
    w_same = wg.vmap(noisy, randomness="same")(np.ones((4, 3)))
    t_diff = torch.func.vmap(f, randomness="different")(xs).numpy()
    w_diff = wg.vmap(noisy, randomness="different")(np.ones((4, 3)))
    for same in (t_same, w_same):
        assert (same == same[0]).all()
    for diff in (t_diff, w_diff):
        assert not (diff == diff[0]).all()


def test_generators_are_found_past_data_and_named_by_their_path():
    data = [np.ones(2)] * 100_000  # a large closed-over list does not use up the search
    box = types.SimpleNamespace(d={"k": [np.random.default_rng(1)]})

    def f(x):
        return x * len(data) + box.d["k"][0].random()

    with pytest.raises(RuntimeError, match=r"f drew random numbers from the Generator box\.d\['k'\]\[0\], "):
        wg.vmap(f)(XS)
