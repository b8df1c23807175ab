"""examples/char_lstm.py, run briefly: the loss falls, windows of several lengths give graphs of
several sizes, and checkpointing over time steps gives the same gradients as keeping every step."""

import numpy as np

from tests.support.examples import load_example
from wengert import viz


def test_char_lstm_trains_at_a_small_size(capsys):
    example = load_example("char_lstm.py")
    result = example.main(["--steps", "40", "--batch", "4", "--hidden", "16", "--min-len", "5",
                           "--max-len", "12", "--lr", "2e-2"])
    out = capsys.readouterr().out
    assert result["last"] < result["first"] - 0.3
    assert len(set(result["lengths"])) > 3  # the graph's length changed between minibatches
    assert result["sample"].startswith("Beautiful ") and "loss fell from" in out


def _gradients(example, model, inputs, targets, checkpoint):
    model.zero_grad()
    loss = model.loss(inputs, targets, checkpoint=checkpoint)
    loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        g = p.grad
        grads[name] = g.to_dense() if hasattr(g, "to_dense") else np.array(g.value)
    return float(loss.item()), grads


def test_graph_follows_the_length_and_checkpointing_keeps_gradients():
    example = load_example("char_lstm.py")
    data, chars = example.encode(example.zen_text())
    model = example.CharLSTM(len(chars), dim=4, hidden=6, rng=0)
    rng = np.random.default_rng(0)
    sizes = []
    for length in (3, 7):
        inputs, targets = example.windows(data, 2, length, rng)
        sizes.append(len(viz.to_dot(model.loss(inputs, targets)).splitlines()))
    assert sizes[0] < sizes[1]
    inputs, targets = example.windows(data, 3, 17, rng)
    loss, plain = _gradients(example, model, inputs, targets, None)
    for policy in ("binomial", "ctz"):
        loss_c, grads = _gradients(example, model, inputs, targets, policy)
        assert np.isclose(loss_c, loss, rtol=1e-6)
        for name, g in plain.items():
            np.testing.assert_allclose(grads[name], g, rtol=2e-4, atol=1e-6, err_msg=f"{policy} {name}")
