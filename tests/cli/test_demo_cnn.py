"""``python -m wengert demo --model cnn``: one epoch of the digits CNN writes every output, and the
training-time shift of the images moves each one by the drawn offset."""

import numpy as np
import pytest

from tests.support.dot_parser import fields, parse
from wengert import viz
from wengert.__main__ import main
from wengert.cli.demo import DigitsCNN, shifted


class _Offsets:
    """A stand-in for a Generator whose ``integers`` returns given offsets."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def integers(self, low, high, size):
        return np.asarray(self.draws.pop(0))


def test_shifted_moves_each_image_by_its_offset_with_zeros_shifted_in():
    X = np.arange(3 * 64, dtype=np.float32).reshape(3, 1, 8, 8) + 1
    got = shifted(X, _Offsets([0, 1, 2], [2, 1, 0]))   # dy, dx per image; 1 is no shift
    want = np.zeros_like(X)
    want[0, 0, 1:, :7] = X[0, 0, :7, 1:]     # dy=0: content moves down; dx=2: content moves left
    want[1] = X[1]
    want[2, 0, :7, 1:] = X[2, 0, 1:, :7]
    np.testing.assert_array_equal(got, want)


def test_the_cnn_takes_digit_images_channels_first():
    model = DigitsCNN(hidden=16, rng=0)
    assert model(np.zeros((5, 1, 8, 8), np.float32)).shape == (5, 10)
    with pytest.raises(ValueError, match=r"expected an input of shape \(N, 1, H, W\)"):
        model(np.zeros((5, 64), np.float32))


def test_demo_cnn_one_epoch_writes_every_output(tmp_path, monkeypatch, capsys):
    out_dir = tmp_path / "out"
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    assert main(["demo", "--model", "cnn", "--epochs", "1", "--hidden", "32", "--out", str(out_dir)]) == 0
    text, err = capsys.readouterr()
    assert "a CNN" in text and "epoch   1/1" in err and "test=" in err
    accuracy = text.split("test accuracy: ")[1].split("%")[0]
    assert f"test accuracy {accuracy}% (the same)" in text and 10.0 < float(accuracy) <= 100.0
    assert (out_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    graph = parse((out_dir / "step.dot").read_text())
    ops = {fields(label)[0] for label, sub in graph["nodes"].values() if sub == "function"}
    assert {"type: conv", "type: max_pool", "type: softmax_cross_entropy"} <= ops
    with np.load(out_dir / "model.npz", allow_pickle=False) as data:
        assert data["conv1.weight"].shape == (16, 1, 3, 3) and data["fc1.weight"].shape == (512, 32)


def test_demo_refuses_an_unknown_model(capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--model", "resnet"])
    assert info.value.code == 2 and "--model" in capsys.readouterr().err
