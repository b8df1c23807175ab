"""The package's public surface: submodules reachable as attributes after ``import wengert``; and the
package as built: ``python -m build`` makes an sdist and a wheel holding every module and ``py.typed``,
and the wheel, installed into a fresh virtual environment (NumPy from the package index), runs the
quickstart from outside the checkout. The ``package`` marker selects (or, offline, deselects) those."""

import ast
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
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


# -- the built package: a wheel and an sdist, the wheel installed into a fresh virtual environment ------

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = """
import numpy as np
import wengert as wg, wengert.numpy as wnp
x = np.arange(3.0)
print(repr(wg.grad(lambda x: wnp.sum(wnp.sin(x) ** 2))(x).tolist()))
print(wg.__file__)
"""


def _plain_env():
    """The environment without this checkout on the path: only what is installed is importable."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """``python -m build`` on a copy of the project's packaging files: (sdist path, wheel path). Without
    build isolation: the build backend (setuptools, in the test extra) is this environment's."""
    src = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "MANIFEST.in", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("wengert-*.tar.gz")
    (wheel,) = out.glob("wengert-*.whl")
    return sdist, wheel


@pytest.mark.package
def test_sdist_and_wheel_hold_every_module_and_the_type_marker(dist):
    sdist, wheel = dist
    version = wg.__version__
    assert sdist.name == f"wengert-{version}.tar.gz"
    assert wheel.name.startswith(f"wengert-{version}-py3-none-any")
    package = ROOT / "src" / "wengert"
    files = sorted(p.relative_to(package.parent).as_posix() for p in package.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    assert "wengert/py.typed" in files
    with tarfile.open(sdist) as tar:
        in_sdist = set(tar.getnames())
    prefix = f"wengert-{version}/"
    assert {prefix + "src/" + f for f in files} <= in_sdist
    assert {prefix + n for n in ("README.md", "CHANGELOG.md", "pyproject.toml", "LICENSE")} <= in_sdist
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = set(zf.namelist())
        metadata = zf.read(f"wengert-{version}.dist-info/METADATA").decode()
        entry_points = zf.read(f"wengert-{version}.dist-info/entry_points.txt").decode()
    assert set(files) <= in_wheel
    assert not [n for n in in_wheel if n.startswith(("tests/", "benchmarks/"))]
    assert f"Version: {version}" in metadata and "Requires-Dist: numpy" in metadata
    assert any(n.endswith((".dist-info/licenses/LICENSE", ".dist-info/LICENSE")) for n in in_wheel)
    assert "wengert = wengert.__main__:main" in entry_points


@pytest.mark.package
def test_the_wheel_installed_in_a_fresh_venv_runs_the_quickstart(dist, tmp_path):
    _, wheel = dist
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              str(wheel)], capture_output=True, text=True, env=_plain_env())
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    work = tmp_path / "elsewhere"  # outside the checkout: no src/ to import by accident
    work.mkdir()
    run = subprocess.run([str(python), "-c", QUICKSTART], capture_output=True, text=True, cwd=work,
                         env=_plain_env())
    assert run.returncode == 0, run.stderr
    values, location = run.stdout.splitlines()
    x = np.arange(3.0)
    np.testing.assert_allclose(ast.literal_eval(values), 2.0 * np.sin(x) * np.cos(x), rtol=1e-14, atol=0)
    installed = Path(location).resolve()
    assert installed.is_relative_to(venv.resolve()) and not installed.is_relative_to(ROOT)
    assert (installed.parent / "py.typed").is_file()
    version = subprocess.run([str(venv / "bin" / "wengert"), "--version"], capture_output=True, text=True,
                             cwd=work, env=_plain_env())
    assert version.returncode == 0 and version.stdout.strip() == f"wengert {wg.__version__}"
