"""wengert.nn: parameter discovery, state, both ways of training, losses against NumPy, Embedding's
sparse rows. Expected values come from NumPy formulas written here, or from the other engine."""

import math

import numpy as np
import pytest

import wengert as wg
from wengert import nn, optim
from wengert.testing import check_grads

rng = np.random.default_rng(7)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 3, rng=1)
        self.scale = nn.Parameter(np.ones(3))
        self.note = "not a parameter"

    def forward(self, x):
        return self.lin(x) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [Block(), Block()]
        self.head = nn.Linear(3, 1, rng=2)
        self.same_head = self.head  # shared: its parameters are listed once
        self.drop = nn.Dropout(0.5, rng=0)

    def forward(self, x):
        for b in self.blocks:
            x = nn.relu(b(x))
        return self.head(self.drop(x))


def test_parameters_of_nested_modules_and_lists():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["blocks.0.scale", "blocks.0.lin.weight", "blocks.0.lin.bias",
                     "blocks.1.scale", "blocks.1.lin.weight", "blocks.1.lin.bias",
                     "head.weight", "head.bias"]
    assert [p.shape for p in net.parameters()] == [(3,), (2, 3), (3,), (3,), (2, 3), (3,), (3, 1), (1,)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert net.num_parameters() == 2 * (3 + 6 + 3) + 3 + 1
    assert [n for n, _ in net.named_modules()] == ["", "blocks.0", "blocks.0.lin", "blocks.1", "blocks.1.lin",
                                                   "head", "drop"]
    assert set(net.parameters_tree()) == {"blocks", "head"}
    assert set(net.parameters_tree()["blocks"]["1"]["lin"]) == {"weight", "bias"}


def test_train_and_eval_reach_every_submodule():
    net = Net()
    x = np.ones((1000, 3))
    assert all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    np.testing.assert_array_equal(net.drop(x), x)
    net.train()
    y = np.asarray(net.drop(x))
    assert set(np.unique(y)) == {0.0, 2.0}  # kept elements scaled by 1 / (1 - p)
    assert 0.45 < (y == 0).mean() < 0.55


def test_state_dict_round_trip_and_npz(tmp_path):
    a, b = nn.MLP([4, 5, 3], rng=0), nn.MLP([4, 5, 3], rng=1)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    assert not np.allclose(a(x).value, b(x).value)
    weight = b.parameters()[0]
    same_array = weight.value
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(x).value, b(x).value)
    assert weight.value is same_array  # loaded in place: optimizers keep their references

    c = nn.MLP([4, 5, 3], rng=2)
    a.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    c.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(a(x).value, c(x).value)
    state = a.state_dict()
    state["0.weight"][...] = 0  # a copy: the model is not changed
    assert np.abs(a.parameters()[0].value).sum() > 0


def test_load_state_dict_errors_name_the_entry():
    m = nn.MLP([4, 5, 3])
    state = m.state_dict()
    with pytest.raises(ValueError, match=r"Linear '0', key '0.weight': expected shape \(4, 5\), given "
                                         r"\(5, 4\) \(PyTorch's \(out, in\) layout\?"):
        m.load_state_dict(dict(state, **{"0.weight": np.zeros((5, 4))}), layout="wengert")
    with pytest.raises(ValueError, match="Linear weights are in both layouts"):
        m.load_state_dict(dict(state, **{"0.weight": np.zeros((5, 4))}))
    del state["2.bias"]
    with pytest.raises(KeyError, match=r"missing keys \['2.bias'\]"):
        m.load_state_dict(state)
    m.load_state_dict(state, strict=False)


def _np_log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_cross_entropy_matches_numpy_in_every_reduction():
    logits = rng.standard_normal((5, 4))
    labels = np.array([3, 0, 1, 1, 2])
    per = -np.log(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))[np.arange(5), labels]
    np.testing.assert_allclose(nn.cross_entropy(logits, labels), per.mean(), rtol=1e-13)
    np.testing.assert_allclose(nn.cross_entropy(logits, labels, reduction="sum"), per.sum(), rtol=1e-13)
    np.testing.assert_allclose(nn.cross_entropy(logits, labels, reduction="none"), per, rtol=1e-13)
    # the gradient by hand: (softmax - onehot) / N
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    expected = (softmax - np.eye(4)[labels]) / 5
    np.testing.assert_allclose(wg.grad(nn.cross_entropy)(logits, labels), expected, rtol=1e-12)


def test_softmax_family_is_stable_for_huge_scores():
    logits = np.array([[1000.0, 0.0, -1000.0], [5e4, 5e4, 0.0]])
    log2 = math.log(2)
    np.testing.assert_allclose(nn.log_softmax(logits), [[0.0, -1000.0, -2000.0], [-log2, -log2, -5e4 - log2]])
    np.testing.assert_allclose(nn.softmax(logits), [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    np.testing.assert_allclose(nn.cross_entropy(logits, np.array([0, 1])), math.log(2) / 2)
    g = wg.grad(nn.cross_entropy)(logits, np.array([2, 0]))
    np.testing.assert_allclose(g, [[0.5, 0.0, -0.5], [-0.25, 0.25, 0.0]], atol=1e-15)
    x = rng.standard_normal((3, 6))
    np.testing.assert_allclose(nn.log_softmax(x), _np_log_softmax(x), rtol=1e-13)


def test_activations_match_numpy():
    x = np.linspace(-40, 40, 81)
    np.testing.assert_allclose(nn.relu(x), np.where(x > 0, x, 0))
    np.testing.assert_allclose(nn.sigmoid(x), 1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(nn.tanh(x), np.tanh(x))
    exact_gelu = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(nn.gelu(x), exact_gelu, atol=1e-3)
    np.testing.assert_allclose(wg.grad(lambda v: nn.relu(v).sum())(np.array([-1.0, 0.0, 2.0])), [0, 0, 1])


def test_regression_losses_match_numpy():
    p, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(nn.mse_loss(p, t), ((p - t) ** 2).mean())
    np.testing.assert_allclose(nn.mse_loss(p, t, reduction="sum"), ((p - t) ** 2).sum())
    x = np.array([-800.0, -3.0, 0.0, 0.5, 800.0])
    y = np.array([0.0, 1.0, 0.5, 0.0, 1.0])
    s = 1 / (1 + np.exp(-x[1:4]))
    naive = -(y[1:4] * np.log(s) + (1 - y[1:4]) * np.log(1 - s))  # fine away from huge |x|
    losses = nn.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(losses[1:4], naive, rtol=1e-12)
    np.testing.assert_allclose(losses[[0, 4]], [0.0, 0.0], atol=1e-300)
    sig = 1 / (1 + np.exp(-x[1:4]))
    g = wg.grad(lambda v: nn.binary_cross_entropy_with_logits(v, y[1:4], reduction="sum"))(x[1:4])
    np.testing.assert_allclose(g, sig - y[1:4], rtol=1e-12)


def test_loss_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"logits of shape \(2, 3\) need labels of shape \(2,\)"):
        nn.cross_entropy(np.zeros((2, 3)), np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="integer class indices"):
        nn.cross_entropy(np.zeros((2, 3)), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        nn.cross_entropy(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="reduction must be"):
        nn.mse_loss(np.zeros(2), np.zeros(2), reduction="avg")


def test_eager_backward_equals_functional_grad():
    model = nn.MLP([4, 6, 3], activation="tanh", rng=0, dtype=np.float64)
    x, labels = rng.standard_normal((5, 4)), np.array([0, 2, 1, 1, 0])

    def loss_fn(params, x, labels):
        return nn.cross_entropy(model.apply(params, x), labels)

    grads = wg.grad(loss_fn)(model.parameters_tree(), x, labels)
    loss = nn.cross_entropy(model(x), labels)
    loss.backward()
    np.testing.assert_allclose(loss.item(), loss_fn(model.parameters_tree(), x, labels))
    for name, p in model.named_parameters():
        layer, leaf = name.split(".")
        np.testing.assert_allclose(p.grad.value, grads[layer][leaf], rtol=1e-12, atol=1e-15)
    rest = model.parameters_tree()["2"]
    check_grads(lambda w: loss_fn({"0": {"weight": w, "bias": model[0].bias.value}, "2": rest}, x, labels),
                model[0].weight.value, modes=("rev", "fwd"), order=1)


def test_apply_checks_the_tree_and_restores_the_parameters():
    model = nn.MLP([2, 3, 1])
    params = model.parameters_tree()
    del params["2"]["bias"]
    with pytest.raises(KeyError, match=r"missing \['2.bias'\]"):
        model.apply(params, np.ones((1, 2)))
    assert all(isinstance(p, nn.Parameter) for p in [model[0].weight, model[2].weight, model[2].bias])


def test_a_training_loop_both_ways_gives_the_same_model():
    x, y = rng.standard_normal((16, 3)), rng.integers(0, 2, 16)
    eager = nn.MLP([3, 4, 2], rng=3, dtype=np.float64)
    functional = nn.MLP([3, 4, 2], rng=3, dtype=np.float64)
    opt = optim.SGD(eager.parameters(), lr=0.5)
    grad_fn = wg.grad(lambda p: nn.cross_entropy(functional.apply(p, x), y))
    for _ in range(3):
        opt.zero_grad()
        nn.cross_entropy(eager(x), y).backward()
        opt.step()
        params = functional.parameters_tree()
        grads = grad_fn(params)
        functional.load_state_dict({f"{k}.{leaf}": params[k][leaf] - 0.5 * grads[k][leaf]
                                    for k in params for leaf in params[k]})
    for a, b in zip(eager.parameters(), functional.parameters()):
        np.testing.assert_allclose(a.value, b.value, rtol=1e-12)


def test_embedding_gradient_is_sparse_rows():
    emb = nn.Embedding(10, 3, rng=0, dtype=np.float64)
    head = nn.Linear(3, 1, rng=1, dtype=np.float64)
    idx = np.array([[4, 1], [4, 7]])  # row 4 twice: its contributions add

    def loss_fn(table):
        return (head(table[idx]) ** 2).sum()

    with wg.no_grad():  # head's parameters are constants here: only the table is differentiated
        dense = wg.grad(loss_fn)(emb.weight.value)
    loss = (head(emb(idx)) ** 2).sum()
    loss.backward()
    g = emb.weight.grad
    assert isinstance(g, nn.SparseRows)
    assert sorted(g.indices.tolist()) == [1, 4, 4, 7] and g.values.shape == (4, 3)
    np.testing.assert_allclose(g.to_dense(), dense, rtol=1e-13)
    assert set(g.coalesce().indices.tolist()) == {1, 4, 7}

    before = emb.weight.value.copy()
    optim.SGD([emb.weight], lr=0.1).step()
    untouched = [0, 2, 3, 5, 6, 8, 9]
    np.testing.assert_array_equal(emb.weight.value[untouched], before[untouched])
    np.testing.assert_allclose(emb.weight.value, before - 0.1 * dense, rtol=1e-13)


def test_embedding_dense_and_sparse_uses_add_up_and_zero_grad_forgets_both():
    emb = nn.Embedding(5, 2, rng=0, dtype=np.float64)
    idx = np.array([0, 3])
    dense = wg.grad(lambda t: (t[idx] * 2.0).sum() + (t * t).sum())(emb.weight.value)
    ((emb(idx) * 2.0).sum() + (emb.weight * emb.weight).sum()).backward()
    assert isinstance(emb.weight.grad, wg.Tensor)
    np.testing.assert_allclose(emb.weight.grad.value, dense)
    emb.zero_grad()
    assert emb.weight.grad is None
    with wg.no_grad():
        emb(idx)
    assert emb.weight.grad is None and not emb.weight._lookups


def test_embedding_rejects_bad_indices():
    emb = nn.Embedding(5, 2)
    with pytest.raises(IndexError, match="table of 5 rows"):
        emb(np.array([5]))
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([1.0]))


def test_mlp_layout_and_validation():
    m = nn.MLP([4, 8, 8, 3], activation="gelu", dropout=0.1)
    kinds = [type(layer).__name__ for layer in m.layers]
    assert kinds == ["Linear", "GELU", "Dropout", "Linear", "GELU", "Dropout", "Linear"]
    assert m[0].weight.dtype == np.float32 and m(np.ones((2, 4), np.float32)).shape == (2, 3)
    bound = 1 / math.sqrt(4)
    assert np.abs(m[0].weight.value).max() <= bound and np.abs(m[0].bias.value).max() <= bound
    with pytest.raises(ValueError, match="at least two"):
        nn.MLP([4])
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.MLP([4, 2], activation="swish")


def test_initialisers_have_the_documented_spread():
    w = nn.init.xavier_uniform((300, 200), rng=0, dtype=np.float64)
    a = math.sqrt(6 / 500)
    assert np.abs(w).max() <= a and abs(w.std() - a / math.sqrt(3)) < 0.01 * a
    k = nn.init.kaiming_normal((400, 100), rng=0, dtype=np.float64)
    assert abs(k.std() - math.sqrt(2 / 400)) < 0.02 * math.sqrt(2 / 400)
    assert nn.init.zeros((2, 2)).dtype == np.float32
