"""The documentation site: it builds with MkDocs (warnings are errors), every page is in its navigation,
and the API reference has an entry for every public name (its pages are what
``tools/reference_pages.py`` writes, from the public modules' ``__all__``)."""

import html
import importlib
import inspect
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
               if f"::: {module_name}.{n}" not in text and f"{{ #{module_name}.{n} }}" not in text
               and f"`{n}`" not in text
               and not isinstance(getattr(module, n), types.ModuleType)]
    assert missing == [], f"{module_name}: no reference entry for {missing}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for the tests that read it."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    page = (site / "reference" / "wengert.html").read_text(encoding="utf-8")
    assert "Gradient of scalar-valued" in page  # wg.grad's docstring, rendered
    # pages link to files, not to directories, so the site works when opened from disk
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="getting-started.html"' in index, "mkdocs.yml: keep use_directory_urls: false"


def _text(html_page):
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", html_page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_reference_shows_constructors_methods_and_cross_references_as_links(site):
    def page(name):
        return (site / "reference" / f"{name}.html").read_text(encoding="utf-8")

    wengert_page, nn_page, numpy_page = page("wengert"), page("nn"), page("numpy")
    for anchor in ["wengert.Tensor.backward", "wengert.Tensor.detach", "wengert.Tensor.item",
                   "wengert.Tensor.grad", "wengert.Tensor.zero_", "wengert.Tensor.requires_grad_",
                   "wengert.Tensor.at", "wengert.Tensor.numpy", "wengert.compile.result.source",
                   "wengert.compile.result.grad", "wengert.compile.result.cache_info", "wengert.jacobian"]:
        assert f'id="{anchor}"' in wengert_page, anchor
    for anchor in ["wengert.numpy.index_update", "wengert.numpy.sum", "wengert.numpy.linalg.solve"]:
        assert f'id="{anchor}"' in numpy_page, anchor
    assert "in_features" in _text(nn_page.split('id="wengert.nn.Linear"', 1)[1][:3000])  # its constructor
    assert 'id="wengert.nn.relu"' in nn_page and "torch.relu" in _text(nn_page)
    assert 'href="wengert.html#wengert.hvp"' in wengert_page or 'href="#wengert.hvp"' in wengert_page


_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):\s*`?[~\w]")


# A cross-reference that autorefs could not resolve is left as text, without a warning:
_UNRESOLVED = re.compile(r"\]\[[A-Za-z_]\w*(?:\.\w+)+\]")


def test_no_sphinx_role_nor_unresolved_cross_reference_is_shown_as_literal_text(site):
    shown = {}
    for page in site.rglob("*.html"):
        text = _text(page.read_text(encoding="utf-8"))
        shown[str(page.relative_to(site))] = _ROLE.findall(text) + _UNRESOLVED.findall(text)
    assert {page: found for page, found in shown.items() if found} == {}


# The pages and sections written for contributors, which name the modules and files they describe.
CONTRIBUTOR_PAGES = {"internals.md", "tour.md"}
CONTRIBUTOR_SECTIONS = ("How it works inside", "Adding one to wengert itself")
# Named internal helpers that user-facing text may mention, each with the reason.
ALLOWED_INTERNAL: dict[str, str] = {}
_PATH = re.compile(r"\bwengert(?:\.\w+)+")
_FILE = re.compile(r"(?<![\w/.])(?:tests|src|tools|benchmarks|rules|wengert)/[\w/.*-]+")


def _public_modules():
    import wengert.scipy

    names = {*reference_pages.PAGES, *reference_pages.NUMPY_MODULES, "wengert.scipy", "wengert.numpy.random"}
    names |= {f"wengert.scipy.{s}" for s in wengert.scipy.__all__}
    return names


def _is_public(path):
    """Whether ``wengert.a.b`` is a public module or reached from one through ``__all__``."""
    parts = path.split(".")
    cut = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in _public_modules() or i == 1)
    obj = importlib.import_module(".".join(parts[:cut]))
    for part in parts[cut:]:
        if isinstance(obj, types.ModuleType) and part not in obj.__all__:
            return False
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return True


def _user_facing_markdown():
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name in CONTRIBUTOR_PAGES:
            continue
        text, kept, skipping = page.read_text(encoding="utf-8"), [], None
        for line in text.splitlines():
            heading = re.match(r"(#+) (.*)", line)
            if heading and skipping is not None and len(heading.group(1)) <= skipping:
                skipping = None
            if heading and heading.group(2).strip() in CONTRIBUTOR_SECTIONS:
                skipping = len(heading.group(1))
            if skipping is None:
                kept.append(line)
        yield page.name, "\n".join(kept)


def _internal(text):
    paths = {p.rstrip(".") for p in _PATH.findall(text)}
    return sorted(p for p in paths if not _is_public(p) and not any(
        p == a or p.startswith(a + ".") for a in ALLOWED_INTERNAL)) + sorted(set(_FILE.findall(text)))


def test_user_pages_name_no_internal_module_and_no_repository_file(site):
    found = {name: _internal(text) for name, text in _user_facing_markdown()}
    for page in (site / "reference").rglob("*.html"):  # the docstrings, as rendered
        found[str(page.relative_to(site))] = _internal(_text(page.read_text(encoding="utf-8")))
    assert {name: paths for name, paths in found.items() if paths} == {}


def test_the_checker_finds_internal_paths_roles_and_files():
    assert _internal("see wengert.core.trace and `wengert.numpy._classification`") == [
        "wengert.core.trace", "wengert.numpy._classification"]
    assert _internal("wg.grad is wengert.grad; wengert.nn.Linear; wengert.numpy.linalg.solve.") == []
    assert _internal("in rules/nn.py and tests/fuzz/") == ["rules/nn.py", "tests/fuzz/"]
    assert _ROLE.findall(":func: hvp and :class:`Tape`") and not _ROLE.findall("x: int")
    assert _UNRESOLVED.findall("[`is_leaf`][wengert.Tensor.is_leaf]")
    assert not _UNRESOLVED.findall("a[0][1], h[i][j]")


PUBLIC_MODULES = [*reference_pages.PAGES, *reference_pages.NUMPY_MODULES]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name):
    module = importlib.import_module(module_name)
    names = [n for n in module.__all__ if not isinstance(getattr(module, n), types.ModuleType)]
    assert [n for n in names if not (inspect.getdoc(getattr(module, n)) or "").strip()] == []
    if module_name in reference_pages.NUMPY_MODULES:  # each names what it stands for in NumPy
        says = re.compile(r"\b(?:numpy|np)\.\w|NumPy")
        assert [n for n in names if not says.search(inspect.getdoc(getattr(module, n)))] == []
