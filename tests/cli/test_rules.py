"""``python -m wengert rules``: every differentiable primitive once, with its modes and facts."""

import re

from wengert import rules as ops
from wengert.__main__ import main


def _table(capsys):
    assert main(["rules"]) == 0
    return capsys.readouterr().out


def _row(text, name):
    rows = [line for line in text.splitlines() if line.split("  ")[0].strip() == name]
    assert len(rows) == 1, (name, rows)
    return re.split(r"\s{2,}", rows[0].strip())


def test_every_differentiable_primitive_is_listed_once(capsys):
    text = _table(capsys)
    listed = [line.split()[0] for line in text.splitlines()[2:] if line and not line[0].isdigit()]
    assert sorted(listed) == sorted(ops.rule_table())
    assert f"{len(listed)} primitives: " in text


def test_modes_facts_and_spelling_of_known_primitives(capsys):
    text = _table(capsys)
    assert _row(text, "add") == ["add", "elementwise", "rev fwd float vmap", "fresh, broadcasts", "a + b"]
    assert _row(text, "sin")[1:3] == ["elementwise", "rev fwd float vmap"]
    assert _row(text, "sin")[-1] == "np.sin, math.sin on floats"
    assert _row(text, "linalg.det")[1:3] == ["determinant", "rev fwd vmap"]
    assert _row(text, "expm")[2] == "rev fwd vmap"  # scipy.linalg.expm takes stacks of matrices
    assert _row(text, "solve_sylvester")[2] == "rev fwd"  # one at a time in SciPy < 1.15: no batching rule
    assert _row(text, "yn")[2] == "rev(1) fwd(1) vmap"  # yn(n, x): a derivative in x only
    assert _row(text, "matmul")[3] == "linear in 0,1, fresh"


def test_facts_come_from_the_primitives(capsys):
    """The table reads each primitive's facts (``wengert.core.extend.facts``): a fact set on a primitive
    shows, and the spelling follows the operator, the helper, or NumPy's name."""
    text = _table(capsys)
    assert _row(text, "negative")[-1] == "-a"
    assert _row(text, "untake")[3:] == ["linear in 0, fresh", "untake(...) (helper)"]
    assert _row(text, "cumsum")[-1] == "np.cumsum"  # a rules primitive with NumPy's name
    assert _row(text, "relu")[-1] == "its implementation"
    prim = ops.rule_table()["relu"]
    try:
        prim.linear = (0,)  # as facts(prim, linear=(0,)) would set it (not true of relu: only shown here)
        assert "linear in 0" in _row(_table(capsys), "relu")[3]
    finally:
        prim.linear = ()
