"""examples/dynamic_charlm.py, run briefly: the loss falls, text is sampled, and the Zen is not
printed by importing ``this``."""


import numpy as np

import wengert as wg
from tests.support.examples import load_example
from wengert import nn, viz


def test_charlm_loss_falls_and_it_samples(capsys):
    charlm = load_example("dynamic_charlm.py")
    result = charlm.main(["--steps", "120", "--batch", "8"])
    out = capsys.readouterr().out
    assert "Beautiful is better than ugly" not in out.split("sample:")[0]  # the Zen was swallowed
    assert result["last"] < result["first"] - 0.4
    assert result["sample"].startswith("Beautiful ") and len(result["sample"]) == len("Beautiful ") + 200
    assert "loss fell from" in out


def test_charlm_graphs_differ_per_example_and_gradients_are_right():
    charlm = load_example("dynamic_charlm.py")
    model = charlm.CharLM(vocab=7, dim=3, hidden=5, max_context=3, rng=0)
    for p in model.parameters():
        p.value = p.value.astype(np.float64)
    sizes = []
    for context in ([1], [2, 5, 0]):
        loss = nn.cross_entropy(model(np.array(context)), 4)
        sizes.append(len(viz.to_dot(loss).splitlines()))
        loss.backward()
    assert sizes[0] < sizes[1]
    # eager gradients (sparse rows for the table) against wg.grad of the same function
    params = model.parameters_tree()

    def total(p):
        return sum(nn.cross_entropy(model.apply(p, np.array(c)), 4) for c in ([1], [2, 5, 0]))

    grads = wg.grad(total)(params)
    np.testing.assert_allclose(model.embed.weight.grad.to_dense(), grads["embed"]["weight"], rtol=1e-10)
    np.testing.assert_allclose(model.hidden[2].weight.grad.value, grads["hidden"]["2"]["weight"], rtol=1e-10)
    assert model.hidden[1].weight.grad is None  # context length 2 was not used
