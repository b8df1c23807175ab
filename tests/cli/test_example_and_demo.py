"""The command line: ``python -m wengert example`` prints a tape example; ``python -m wengert
demo`` trains the digits MLP (run here for one epoch into a temporary folder)."""

import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.support.dot_parser import fields, parse
from wengert import viz
from wengert.__main__ import main


def wengert(*args, check=True):
    return subprocess.run([sys.executable, "-m", "wengert", *args], capture_output=True, text=True,
                          check=check)


def test_example_prints_the_tape_example():
    text = wengert("example").stdout
    assert "a = x * y\n  b = sin(x)\n  z = a + b" in text
    assert "z = 2.579425538604203" in text
    assert text.count("5.077582561890373") == 2  # reverse and forward mode
    assert "dz/dy = 0.5" in text


def test_unknown_command_exits_2():
    out = wengert("nope", check=False)
    assert out.returncode == 2 and "invalid choice" in out.stderr


@pytest.mark.parametrize("flag,value", [("--epochs", "0"), ("--epochs", "two"), ("--hidden", "-3"),
                                        ("--lr", "0"), ("--lr", "fast"), ("--seed", "-1")])
def test_demo_bad_values_give_usage_and_exit_2(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and flag in err


@pytest.mark.parametrize("graphviz", [True, False], ids=["with-dot", "without-dot"])
def test_demo_one_epoch_writes_every_output(tmp_path, graphviz, monkeypatch, capsys):
    out_dir = tmp_path / "out"
    args = ["demo", "--epochs", "1", "--hidden", "32", "--out", str(out_dir)]
    if graphviz:  # the real command, in a fresh process
        if shutil.which("dot") is None:
            pytest.skip("Graphviz's dot is not installed")
        result = wengert(*args)
        text, err = result.stdout, result.stderr
    else:  # in this process, with Graphviz hidden
        monkeypatch.setattr(viz.shutil, "which", lambda name: None)
        assert main(args) == 0
        text, err = capsys.readouterr()
    assert "epoch   1/1" in err and "loss=" in err and "test=" in err
    accuracy = text.split("test accuracy: ")[1].split("%")[0]
    assert f"test accuracy {accuracy}% (the same)" in text
    assert 10.0 < float(accuracy) <= 100.0

    assert (out_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    graph = parse((out_dir / "step.dot").read_text())
    ops = sorted(fields(label)[0] for label, sub in graph["nodes"].values() if sub == "function")
    assert ops == ["type: add", "type: add", "type: matmul", "type: matmul", "type: relu",
                   "type: softmax_cross_entropy"]
    with np.load(out_dir / "model.npz", allow_pickle=False) as data:
        assert {k: data[k].shape for k in data.files} == {"0.weight": (64, 32), "0.bias": (32,),
                                                          "2.weight": (32, 10), "2.bias": (10,)}
    if graphviz:
        assert "<svg" in (out_dir / "step.svg").read_text()
    else:
        assert not (out_dir / "step.svg").exists() and "dot -Tsvg" in text
