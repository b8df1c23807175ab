"""The documentation site: it builds with MkDocs (warnings are errors), every page is in its navigation,
and the API reference has an entry for every public name (its pages are what
``tools/reference_pages.py`` writes, from the public modules' ``__all__``)."""

import importlib
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import reference_pages  # noqa: E402


def _nav_pages():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"([\w/.-]+\.md)\s*$", nav, re.M)


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    nav = _nav_pages()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(set(nav)) == pages


def test_reference_pages_are_up_to_date():
    for name, text in reference_pages.pages().items():
        committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert committed == text, f"docs/reference/{name} is stale: run python tools/reference_pages.py"


@pytest.mark.parametrize("module_name", [*reference_pages.PAGES, "wengert.numpy", "wengert.numpy.linalg",
                                         "wengert.numpy.fft", "wengert.scipy"])
def test_every_public_name_has_a_reference_entry(module_name):
    module = importlib.import_module(module_name)
    text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "reference").glob("*.md"))
    missing = [n for n in module.__all__
               if f"::: {module_name}.{n}" not in text and f"`{n}`" not in text
               and not isinstance(getattr(module, n), types.ModuleType)]
    assert missing == [], f"{module_name}: no reference entry for {missing}"


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "site" / "reference" / "wengert.html").read_text(encoding="utf-8")
    assert "Gradient of scalar-valued" in page  # wg.grad's docstring, rendered
    # pages link to files, not to directories, so the site works when opened from disk
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="getting-started.html"' in index, "mkdocs.yml: keep use_directory_urls: false"
