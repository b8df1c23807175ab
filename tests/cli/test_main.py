"""The command line's entry point: ``--help`` lists every subcommand on one line each, ``--version``
prints the package's version, both as ``python -m wengert`` and in-process."""

import argparse
import subprocess
import sys

import pytest

import wengert as wg
from wengert.__main__ import build_parser, main


def _subcommands():
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices, {c.dest: c.help for c in action._choices_actions}


def test_help_lists_every_subcommand_on_one_line(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    choices, helps = _subcommands()
    assert set(choices) == {"demo", "example", "rules", "adjoint"}
    for name in choices:
        (k,) = [k for k, line in enumerate(lines) if line.split()[:1] == [name]]
        assert helps[name] and helps[name] in lines[k], f"{name}'s help is not on its own line"
        following = lines[k + 1].split()[:1]
        assert following == [] or following[0] in choices or lines[k + 1].startswith("options"), \
            f"{name}'s help runs over two lines: {lines[k + 1]!r}"


@pytest.mark.parametrize("name", ["demo", "example", "rules", "adjoint"])
def test_each_subcommand_has_its_own_help(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert f"python -m wengert {name}" in capsys.readouterr().out


def test_version_in_process(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"wengert {wg.__version__}"


def test_version_as_a_module():
    out = subprocess.run([sys.executable, "-m", "wengert", "--version"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == f"wengert {wg.__version__}"
    assert wg.__version__.count(".") == 2 and all(p.isdigit() for p in wg.__version__.split("."))


def test_no_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert "COMMAND" in capsys.readouterr().err
