"""The package's public surface: submodules reachable as attributes after ``import wengert``."""

import subprocess
import sys

import pytest

import wengert as wg


@pytest.mark.parametrize("name", ["numpy", "nn", "optim", "viz", "checkpointing", "testing"])
def test_submodules_are_attributes(name):
    module = getattr(wg, name)
    assert module.__name__ == f"wengert.{name}"


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        wg.nonsense  # noqa: B018


def test_nn_on_first_use_in_a_fresh_interpreter():
    code = "import wengert as wg; m = wg.nn.Linear(3, 2); print(type(m).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Linear"
