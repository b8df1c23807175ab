"""``python -m wengert demo`` prints the first seed's example."""

import subprocess
import sys


def test_demo_prints_the_seed_example():
    out = subprocess.run([sys.executable, "-m", "wengert", "demo"], capture_output=True, text=True,
                         check=True)
    text = out.stdout
    assert "a = x * y\n  b = sin(x)\n  z = a + b" in text
    assert "z = 2.579425538604203" in text
    assert text.count("5.077582561890373") == 2  # reverse and forward mode
    assert "dz/dy = 0.5" in text


def test_unknown_command_exits_2():
    out = subprocess.run([sys.executable, "-m", "wengert", "nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice" in out.stderr
