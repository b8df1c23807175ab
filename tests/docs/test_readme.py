"""The README and docs/*.md tell the truth: every ```python block runs, and the values its comments
claim (``# (6-8j)``), the output shown after it (a plain ``` block: printed programs, tapes, schedules)
and a few counts stated in the prose are checked against what the code computes.

Blocks run in a fresh namespace each (README) or one namespace per page (docs, read as a session),
from a file in a temporary directory (so that ``inspect`` finds the source that ``wg.source_grad``
reads, and files such as model.npz / step.svg land there). The generated ``f_grad`` shown in the
source section is compared by
``tests/program/test_source.py::test_readme_shows_the_program_that_is_generated`` and is not compared
again here. Nothing is run at reduced size: every block is fast as written.
Not run here (too slow for a unit test; run in full by hand when this test was written, and briefly by
tests/cli/test_example_and_demo.py and tests/docs/test_examples.py): the ``python -m wengert demo``
transcript (30 epochs, about 5 s) and examples/dynamic_charlm.py's 2,000 steps (about 8 s)."""

import contextlib
import io
import math
import os
import re
import runpy
import warnings
from pathlib import Path

import numpy as np
import pytest

import wengert as wg
from wengert.engines.batching import NoBatchingRuleWarning

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)
DOCS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")
"""Every guide page (the API reference pages hold no code; the benchmarks page is written by make bench)."""


def blocks(name):
    """The fenced blocks of a page: (line, language, code, output), where output is the text of a block
    that follows this one directly (nothing but a line break between them), else None."""
    text = (ROOT / name).read_text(encoding="utf-8")
    found = [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2), m.start(), m.end())
             for m in FENCE.finditer(text)]
    out = []
    for k, (line, lang, code, start, _end) in enumerate(found):
        if k and text[found[k - 1][4]:start].strip() == "":
            continue  # the output of the block before
        follows = found[k + 1] if k + 1 < len(found) else None
        output = follows[2] if follows and text[found[k][4]:follows[3]].strip() == "" else None
        out.append((line, lang, code, output))
    return out


def python_blocks(name):
    return [b for b in blocks(name) if b[1] == "python" and not b[2].startswith(">>> ")]


def block(name, marker):
    """The one python block of ``name`` that contains ``marker``."""
    hits = [b for b in blocks(name) if b[1] == "python" and marker in b[2]]
    assert len(hits) == 1, f"{name}: {len(hits)} python blocks contain {marker!r}"
    return hits[0]


def run(code, tmp_path, namespace=None, tag="block"):
    """Run ``code`` from a file in ``tmp_path`` (the working directory); return (namespace, stdout)."""
    path = tmp_path / f"readme_{tag}.py"
    path.write_text(code, encoding="utf-8")
    buf = io.StringIO()
    with _chdir(tmp_path), contextlib.redirect_stdout(buf):
        ns = runpy.run_path(str(path), init_globals=namespace, run_name="__readme__")
    return ns, buf.getvalue()


@contextlib.contextmanager
def _chdir(path):  # contextlib.chdir is Python 3.11+
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


CLAIM_NAMES = {"array": np.array, "tensor": float, "sin": math.sin, "cos": math.cos, "__builtins__": {}}


def claimed(comment):
    """The value a comment claims, or None: the longest start of it that is a Python literal or
    ``array(...)``/``tensor(...)``/``sin(...)`` (after a ``label: ``), or a printed NumPy array."""
    comment = re.sub(r"^[a-z ]+: ", "", comment.strip())
    if comment.startswith("[") and "]" in comment:
        try:
            return np.array(comment[1:comment.index("]")].split(), dtype=float)
        except ValueError:
            return None
    cuts = [m.start() for m in re.finditer(r"[,:;]", comment)] + [len(comment)]
    for cut in sorted(cuts, reverse=True):
        try:
            return eval(comment[:cut], dict(CLAIM_NAMES))  # noqa: S307 - a README comment, restricted
        except Exception:
            continue
    return None


def plain(value):
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return np.asarray(getattr(value, "value", value))


def run_with_claims(code, tmp_path, namespace=None, tag="block"):
    """Run ``code`` statement by statement; where the last statement on a line is an expression with a
    comment that claims a value, check it. Returns (namespace, stdout, number of claims checked)."""
    import ast
    import tokenize

    path = tmp_path / f"readme_{tag}.py"
    path.write_text(code, encoding="utf-8")
    comments = {tok.start[0]: tok.string[1:] for tok in tokenize.generate_tokens(io.StringIO(code).readline)
                if tok.type == tokenize.COMMENT}
    tree = ast.parse(code)
    last_on_line = {}
    for stmt in tree.body:
        last_on_line[stmt.end_lineno] = stmt
    ns = dict(namespace or {})
    ns.setdefault("__name__", "__readme__")
    buf = io.StringIO()
    checked = 0
    with _chdir(tmp_path), contextlib.redirect_stdout(buf):
        for stmt in tree.body:
            claim = None
            if isinstance(stmt, ast.Expr) and last_on_line.get(stmt.end_lineno) is stmt:
                comment = comments.get(stmt.end_lineno)
                claim = claimed(comment) if comment else None
            if claim is None:
                exec(compile(ast.Module([stmt], []), str(path), "exec"), ns)
                continue
            value = eval(compile(ast.Expression(stmt.value), str(path), "eval"), ns)
            got = plain(value)
            want = claim if isinstance(claim, tuple) else (claim,)
            got = got if isinstance(got, tuple) else (got,)
            where = f"{tag}, line {stmt.lineno}: # {comments[stmt.end_lineno].strip()}"
            assert len(got) == len(want), f"{where}: {len(got)} values"
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12, err_msg=where)
            checked += 1
    return ns, buf.getvalue(), checked


def run_block(name, marker, tmp_path, namespace=None):
    line, _lang, code, output = block(name, marker)
    ns, stdout = run(code, tmp_path, namespace, tag=f"{Path(name).stem}_{line}")
    return ns, stdout, output


# -- every block runs -------------------------------------------------------------------------------

@pytest.mark.parametrize("line,code", [(b[0], b[2]) for b in python_blocks("README.md")],
                         ids=[f"README-{b[0]}" for b in python_blocks("README.md")])
def test_every_readme_block_runs_on_its_own(line, code, tmp_path):
    run_with_claims(code, tmp_path, tag=f"README_{line}")  # and the values its comments claim


def test_the_comments_claims_are_found():
    # the claims checked above and in the pages, block by block; guards the parser against finding none
    counts = {}
    for name in ["README.md", *DOCS]:
        for line, _lang, code, _output in python_blocks(name):
            counts[f"{name}:{line}"] = sum(claimed(c.split("#", 1)[1]) is not None for c in code.splitlines()
                                           if "  # " in c and not c.lstrip().startswith("#"))
    assert sum(counts.values()) >= 20, counts


@pytest.mark.parametrize("name", DOCS)
def test_every_docs_page_runs_as_a_session(name, tmp_path):
    ns = {}
    for line, _lang, code, _output in python_blocks(name):
        if name == "docs/tour.md" and line == python_blocks(name)[0][0]:
            continue  # an excerpt of src/wengert/rules/elementwise.py: checked in the tour's test
        ns, _, _ = run_with_claims(code, tmp_path, ns, tag=f"{Path(name).stem}_{line}")


def test_the_extractor_sees_the_blocks():
    # guards the checks above against a fence change that would make them test nothing
    assert len(python_blocks("README.md")) >= 3 and len(python_blocks("docs/tour.md")) == 6
    assert block("docs/checkpointing.md", "print(checkpointing.ctz(16))")[3] is not None


# -- README, section by section ---------------------------------------------------------------------

def test_every_readme_output_block_is_what_its_code_prints(tmp_path):
    shown = 0
    for line, _lang, code, output in python_blocks("README.md"):
        if output is not None:
            _, stdout = run(code, tmp_path, tag=f"README_out_{line}")
            assert stdout.strip() == output.strip(), f"README.md line {line}"
            shown += 1
    assert shown >= 5  # the opening example, the transforms, Hessian and vmap, tensors, the tape


def test_the_opening_example_is_the_analytic_gradient(tmp_path):
    ns, _, _ = run_block("README.md", "return np.sum(np.tanh(w) ** 2)", tmp_path)
    w = np.array([0.5, -1.0, 2.0])
    t = np.tanh(w)
    np.testing.assert_allclose(wg.grad(ns["loss"])(w), 2 * t * (1 - t ** 2), rtol=1e-14)  # as the prose says


def test_the_transforms_block(tmp_path):
    ns, _, _ = run_block("README.md", "print(wg.grad(f)(0.5, 4.2))", tmp_path)
    exact = (0.5 * 4.2 + math.sin(0.5), 4.2 + math.cos(0.5), 0.5)  # f, df/dx, df/dy by hand
    f = ns["f"]
    assert wg.grad(f, argnums=(0, 1))(0.5, 4.2) == pytest.approx(exact[1:], rel=1e-15)
    assert wg.jvp(f, (0.5, 4.2), (1.0, 0.0)) == pytest.approx(exact[:2], rel=1e-15)
    assert wg.vjp(f, 0.5, 4.2)[1](1.0) == pytest.approx(exact[1:], rel=1e-15)  # "vᵀJ for a weight v"


def test_hessian_and_vmap_block(tmp_path):
    ns, _, _ = run_block("README.md", "print(wg.hessian(rosenbrock)", tmp_path)
    x = np.array([1.0, 1.0, 1.0])
    # the Rosenbrock Hessian by hand at x = 1: 1200 x_i^2 - 400 x_{i+1} + 2 and 200 on the diagonal
    np.testing.assert_allclose(wg.hessian(ns["rosenbrock"])(x),
                               [[802, -400, 0], [-400, 1002, -400], [0, -400, 200]], rtol=1e-14)
    W, X = ns["W"], ns["X"]
    t = np.tanh(X @ W.T)  # d/dx sum(tanh(W x)) = W^T (1 - tanh^2), per row
    np.testing.assert_allclose(wg.vmap(wg.grad(ns["predict"]))(X), (1 - t ** 2) @ W, rtol=1e-14)


def test_tensors_and_tape_blocks(tmp_path):
    ns, _, _ = run_block("README.md", "z.backward()", tmp_path)
    exact = (0.5 * 4.2 + math.sin(0.5), 4.2 + math.cos(0.5), 0.5)
    np.testing.assert_allclose(ns["x"].grad.numpy(), exact[1:], rtol=1e-15)
    ns, stdout, _ = run_block("README.md", "tape = wg.Tape()", tmp_path)
    assert stdout.split()[:19] == "x = 0.5 y = 4.2 a = x * y b = sin(x) z = a + b".split()
    assert [float(v) for v in stdout.split()[19:]] == pytest.approx(exact, rel=1e-15)


def test_numpy_coverage_and_complex(tmp_path):
    ns, _, _ = run_block("docs/numpy.md", "wnp.abs(z) ** 2)(3 + 4j)", tmp_path)
    assert ns["wg"].grad(lambda z: ns["wnp"].abs(z) ** 2)(3 + 4j) == pytest.approx(6 - 8j, rel=1e-15)
    g = wg.grad(lambda x: np.sum(np.sort(np.cumsum(x))))(np.array([3.0, -1.0, 2.0]))
    np.testing.assert_allclose(g, [3.0, 2.0, 1.0])  # the sum of the cumulative sums, by hand
    # "173 differentiable functions, 24 with a zero derivative ... and 98 whose results are integers
    # ... (101 of them) raises an error": the classification table's counts
    text = (ROOT / "docs/numpy.md").read_text(encoding="utf-8")
    m = re.search(r"`wengert.numpy` has (\d+) differentiable functions, (\d+) with a zero derivative "
                  r"almost everywhere .* and (\d+) whose results are integers.*?\((\d+) of them\) raises",
                  " ".join(text.split()))
    assert m, "the coverage sentence changed: update this test"
    import wengert.numpy as wnp
    from wengert.numpy import _classification as table

    def count(kind, namespaces=(("numpy", np), ("numpy.linalg", np.linalg), ("numpy.fft", np.fft))):
        return sum(hasattr(module, n) for ns, module in namespaces for n in table.names(ns, kind))

    assert int(m.group(1)) == len(set(wnp.DIFFERENTIABLE))
    top_level = (("numpy", np),)
    assert int(m.group(2)) == count(table.ZERO, top_level)
    assert int(m.group(3)) == count(table.INTEGER, top_level)
    assert len(set(wnp.NOT_DIFFERENTIABLE)) == int(m.group(2)) + int(m.group(3))
    assert int(m.group(4)) == count(table.UNSUPPORTED)


def test_scipy_counts_and_names():
    pytest.importorskip("scipy")
    from wengert.scipy import linalg, special, stats

    text = " ".join((ROOT / "docs/numpy.md").read_text(encoding="utf-8").split())
    row = re.search(r"\| `special` \((\d+) names, (\d+) functions\) \| ([^|]+)\|", text)
    listed = [n.split(" (")[0].strip() for n in re.split(r",(?![^(]*\))", row.group(3))]
    names = [a for n in listed for a in n.split("/")]
    assert sorted(names) == sorted(special.__all__) and int(row.group(1)) == len(names)
    assert int(row.group(2)) == len(listed)  # aliases (digamma/psi, jv/jn) count once
    row = re.search(r"\| `stats` \((\d+) distributions, (\d+) functions\) \| ([^|]+)\|", text)
    assert int(row.group(1)) == len(stats.__all__)
    count = 0
    for part in row.group(3).split("; "):
        dists, funcs = part.split(": ")
        funcs = funcs.replace(" (norm also ppf, isf)", "").strip().split(", ")
        for d in dists.split(", "):
            assert all(callable(getattr(getattr(stats, d), f)) for f in funcs)
            count += len(funcs)
    assert int(row.group(2)) == count + 2  # norm's ppf and isf
    assert callable(stats.norm.ppf) and callable(stats.norm.isf)
    row = re.search(r"\| `linalg` \((\d+)\) \| ([^|]+)\|", text)
    listed = [n.split(" (")[0].strip() for n in re.split(r",(?![^(]*\))", row.group(2))]
    assert sorted(listed) == sorted(linalg.__all__) and int(row.group(1)) == len(listed)


def test_linalg_and_fft_lists():
    import wengert.numpy as wnp

    text = " ".join((ROOT / "docs/numpy.md").read_text(encoding="utf-8").split())
    m = re.search(r"linalg `([^`]+)` \((\d+)\); fft `([^`]+)` \((\d+)\)", text)
    lin, fft = m.group(1).split(), m.group(3).split()
    assert len(lin) == int(m.group(2)) and len(fft) == int(m.group(4))
    assert all(callable(getattr(wnp.linalg, n)) for n in lin)
    assert all(callable(getattr(wnp.fft, n)) for n in fft)


def test_scipy(tmp_path):
    pytest.importorskip("scipy")
    import scipy.special

    ns, _, _ = run_block("docs/numpy.md", "scipy ufuncs dispatch", tmp_path)
    g = wg.grad(lambda x: np.sum(scipy.special.gammaln(x)))(np.array([1.5, 2.5]))
    np.testing.assert_allclose(g, scipy.special.digamma([1.5, 2.5]), rtol=1e-12)
    d_loc, d_scale = wg.grad(ns["stats"].norm.logpdf, argnums=(1, 2))(0.3, 0.0, 2.0)
    assert d_loc == pytest.approx(0.3 / 4.0) and d_scale == pytest.approx(-1 / 2.0 + 0.09 / 8.0)
    integrate = ns["integrate"]
    dk = wg.grad(lambda k: integrate.odeint(ns["decay"], np.ones(1), np.array([0.0, 1.0]), args=(k,))[-1, 0])
    assert dk(0.5) == pytest.approx(-math.exp(-0.5), rel=1e-5)  # y(1) = exp(-k)


def test_linear_algebra_and_fft(tmp_path):
    ns, _, _ = run_block("docs/numpy.md", "np.linalg.eigh(a + a.T)", tmp_path)
    loss, g = ns["loss"], ns["g"]
    a = np.eye(3) * 3 + np.random.default_rng(0).standard_normal((3, 3)) * 0.3
    d = np.random.default_rng(1).standard_normal((3, 3))
    eps = 1e-6
    fd = (loss(a + eps * d) - loss(a - eps * d)) / (2 * eps)
    assert np.sum(g * d) == pytest.approx(fd, rel=1e-6)


def test_neural_networks(tmp_path):
    ns, _, _ = run_block("docs/nn.md", "nn.MLP([4, 16, 3], rng=0)", tmp_path)
    nn, model, x, labels = ns["nn"], ns["model"], ns["x"], ns["labels"]
    params = ns["params"]
    assert sorted(params) == ["0", "2"] and sorted(params["0"]) == ["bias", "weight"]
    assert ns["grads"]["0"]["weight"].shape == params["0"]["weight"].shape
    assert float(nn.cross_entropy(model(x), labels).value) < math.log(3)  # it learned something
    assert (tmp_path / "model.npz").exists() and (tmp_path / "step.dot").exists()
    other = nn.MLP([4, 16, 3], rng=1)
    other.load(str(tmp_path / "model.npz"))  # "load() reads it back"
    np.testing.assert_array_equal(other(x).value, model(x).value)


def test_indexing_and_assignment(tmp_path):
    ns, _, _ = run_block("docs/indexing.md", "x[x > 1.5] *= 10.0", tmp_path)
    np.testing.assert_array_equal(wg.grad(ns["f"])(np.arange(4.0)), [0.0, 2.0, 4.0, 6.0])
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(wg.grad(ns["g"])(x), [0.0, 420.0, 620.0])
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])  # "the argument unchanged"


def test_program_from_trace_and_compile(tmp_path):
    ns, stdout, shown = run_block("docs/program.md", "p = wg.Program.from_trace(f, 2.0, 5.0)", tmp_path)
    assert stdout.strip() == shown.strip()
    value, (d1, d2) = ns["p"].vjp()(2.0, 5.0, 1.0)
    text = " ".join((ROOT / "docs/program.md").read_text(encoding="utf-8").split())
    assert "`p.vjp()(2.0, 5.0, 1.0)` is `(11.652071455223084, (5.5, 1.7163378145367738))`" in text
    assert (value, d1, d2) == pytest.approx((11.652071455223084, 5.5, 1.7163378145367738), abs=1e-14)
    assert (value, d2) == pytest.approx((math.log(2.0) + 10.0 - math.sin(5.0), 2.0 - math.cos(5.0)))
    session = [b for b in blocks("docs/program.md") if b[2].startswith(">>> ")]
    assert len(session) == 1
    lines = session[0][2].splitlines()
    code = "\n".join(ln[4:] for ln in lines if ln.startswith(">>> "))
    expected = "\n".join(ln for ln in lines if not ln.startswith(">>> "))
    _, printed = run(code, tmp_path, ns, tag="compile_session")
    assert printed.strip() == expected.strip()


def test_checkpointing(tmp_path):
    from wengert import checkpointing
    ns, stdout, shown = run_block("docs/checkpointing.md", "print(checkpointing.ctz(16))", tmp_path)
    assert stdout.strip() == shown.strip()  # the diagram
    x0 = ns["x0"]
    x = x0.copy()
    for _ in range(1024):
        x = 0.9 * np.sin(x) + 0.1 * x
    ref = wg.grad(lambda x0, a: ns["wnp"].sum(wg.iterate(lambda x: a * ns["wnp"].sin(x) + 0.1 * x, x0, 1024,
                                                         checkpoint="all")), argnums=(0, 1))(x0, 0.9)
    np.testing.assert_allclose(ns["gx"], ref[0], rtol=1e-10)
    assert ns["ga"] == pytest.approx(ref[1], rel=1e-10)
    # "10 states kept"; step evaluations as in the benchmark table: 3,755 + 1,024 = 4,779
    assert ns["stats"].peak_snapshots <= 10 and ns["stats"].evaluations == 4779
    # Griewank's minimal count r n - C(s + r, s + 1), with r the least repetition number covering n
    n, s = 1024, 10
    r = next(r for r in range(1, 64) if math.comb(s + r, s) >= n)
    assert r * n - math.comb(s + r, s + 1) == 3755 == checkpointing.binomial(n, s).advances
    ctz = checkpointing.ctz(n)
    assert ctz.peak_snapshots <= int(math.log2(n)) + 2 and ctz.peak_snapshots <= 11  # "≤ 11 states"
    assert ctz.advances + n == 6144  # the table's step evaluations for "ctz"
    # the until= loop stops once the state is below 1e-8: x / 2 each step
    out = wg.iterate(ns["step"], x0, until=lambda x: np.max(abs(x)) < 1e-8, checkpoint="ctz")
    assert np.max(abs(out)) < 1e-8 <= np.max(abs(out * 2))
    h = np.linspace(0.0, 1.0, 8)
    np.testing.assert_allclose(ns["block"](h), np.tanh(ns["W"] @ h))


def test_source_grad(tmp_path):
    ns, _, _ = run_block("docs/source.md", "df = wg.source_grad(f)", tmp_path)
    v = np.array([1.0, -2.0, 3.0])
    got = ns["df"](v)
    np.testing.assert_allclose(got, [2.0, 0.41614684, 6.0], rtol=1e-8)  # the comment
    np.testing.assert_allclose(got, wg.grad(ns["f"])(v), rtol=1e-14)  # "as wg.grad(f)"
    np.testing.assert_allclose(got, [2.0, -math.cos(-2.0), 6.0], rtol=1e-14)


def test_source_grad_checkpointed(tmp_path):
    ns, _, shown = run_block("docs/source.md", 'checkpoint="binomial", snapshots=2)(x, 7)', tmp_path)
    f, x = ns["f"], ns["x"]
    d = wg.source_grad(f, checkpoint="binomial", snapshots=2)
    np.testing.assert_allclose(d(x, 7), wg.source_grad(f)(x, 7), rtol=1e-14)
    np.testing.assert_allclose(d(x, 7), wg.grad(f)(x, 7), rtol=1e-12)
    # "snapshots= states, default ⌈log2 n⌉": the schedule the program names
    default = wg.source_grad(f, checkpoint="binomial")
    default(x, 20)
    assert "(binomial(20, 5))" in default.source
    # the excerpt of the generated program: its lines appear in this order (``...`` elides)
    source = d.source if isinstance(d.source, str) else d.source(x, 7)
    have = [ln.rstrip() for ln in source.splitlines()]
    pos = 0
    for want in shown.splitlines():
        if want.strip() in ("...", ""):
            continue
        while pos < len(have) and have[pos] != want.rstrip():
            pos += 1
        assert pos < len(have), f"README's excerpt line not found in order: {want!r}"
        pos += 1


# -- docs ---------------------------------------------------------------------------------------------

def test_tour(tmp_path):
    excerpt = python_blocks("docs/tour.md")[0][2]
    source = (ROOT / "src/wengert/rules/elementwise.py").read_text(encoding="utf-8")
    for line in excerpt.splitlines():
        assert line in source, f"docs/tour.md quotes a line that rules/elementwise.py no longer has: {line!r}"
    ns = {}
    outs = []
    for line, _lang, code, _output in python_blocks("docs/tour.md")[1:]:
        ns, printed = run(code, tmp_path, ns, tag=f"tour_{line}")
        outs.append(printed)
    shown = [ln[2:] for ln in block("docs/tour.md", "print(tape)")[2].splitlines() if ln.startswith("# ")]
    assert outs[0].splitlines() == shown
    f = ns["f"]
    assert wg.grad(f, argnums=(0, 1))(0.5, 4.2) == pytest.approx((4.2 + math.cos(0.5), 0.5), abs=1e-15)
    assert repr(ns["x"].grad) == "tensor(5.07758256)"
    assert wg.jvp(f, (0.5, 4.2), (1.0, 0.0)) == pytest.approx((2.579425538604203, 5.077582561890373))
    wnp = ns["wnp"]
    assert wg.grad(wg.grad(wnp.sin))(0.5) == pytest.approx(-math.sin(0.5))
    np.testing.assert_allclose(wg.hessian(lambda v: wnp.sum(wnp.sin(v)))(np.ones(2)),
                               -math.sin(1.0) * np.eye(2))


def test_adding_a_primitive(tmp_path):
    ns = {}
    for line, _lang, code, _output in python_blocks("docs/adding-a-primitive.md"):
        ns, _ = run(code, tmp_path, ns, tag=f"prim_{line}")
    x = np.array([0.5, -1.0, 2.0])
    e = np.exp(x)
    np.testing.assert_allclose(wg.grad(ns["logsumexp"])(x), e / e.sum(), rtol=1e-14)
    s = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(wg.elementwise_grad(ns["swish"])(x), s + x * s * (1 - s), rtol=1e-14)
    assert wg.grad(ns["softsign"])(0.5) == 1.0 / 1.5 ** 2 and type(wg.grad(ns["softsign"])(0.5)) is float
    assert ns["softsign"].primitive.float_vjp is not None  # the fused rule for floats, from the derivative
    text = " ".join((ROOT / "docs/adding-a-primitive.md").read_text(encoding="utf-8").split())
    concepts = re.findall(r"^## \d\. `(wg\.\w+)`", (ROOT / "docs/adding-a-primitive.md").read_text(), re.M)
    want = ["wg.primitive", "wg.defvjp", "wg.defjvp", "wg.elementwise", "wg.facts", "wg.defbatch"]
    assert concepts == want, concepts
    batch = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)  # the documented rule: one call, no loop
        got = wg.vmap(ns["logsumexp"])(batch)
        grads = wg.vmap(wg.grad(ns["logsumexp"]))(batch)
    np.testing.assert_allclose(got, [np.log(np.exp(r).sum()) for r in batch], rtol=1e-14)
    np.testing.assert_allclose(grads, [np.exp(r) / np.exp(r).sum() for r in batch], rtol=1e-14)
    assert "0.4444444444444444" in text


def test_complex_doc_claims():
    import wengert.numpy as wnp

    text = " ".join((ROOT / "docs/complex.md").read_text(encoding="utf-8").split())
    assert "`wg.grad(lambda z: wnp.abs(z) ** 2)(3 + 4j)` is `6 - 8j` (to rounding)" in text
    assert wg.grad(lambda z: wnp.abs(z) ** 2)(3 + 4j) == pytest.approx(6 - 8j, rel=1e-15)
    z = 0.3 + 0.7j
    assert wg.grad(lambda z: wnp.real(wnp.exp(z)))(z) == pytest.approx(np.exp(z))  # f'(z), holomorphic f
    assert wg.grad(lambda z: wnp.exp(z))(z) == pytest.approx(np.exp(z))  # complex output: seed 1
    assert isinstance(wg.grad(lambda x: wnp.real(wnp.exp(1j * x)))(0.4), float)  # real in, real out


def test_paths_named_in_the_docs_exist():
    for name in ["README.md", *DOCS]:
        text = (ROOT / name).read_text(encoding="utf-8")
        for path in re.findall(r"[`(]((?:src|tests|docs|examples|benchmarks)/[\w/.-]+\.(?:py|md|png|svg))",
                               text):
            assert (ROOT / path).exists(), f"{name} names {path}, which does not exist"
        for path in re.findall(r"`((?:ops|program)/\w+\.py)`", text):  # relative to src/wengert
            assert (ROOT / "src/wengert" / path).exists(), f"{name} names {path}, which does not exist"
        for test in re.findall(r"`(tests/\w+\.py)::(\w+)`", text):
            assert f"def {test[1]}(" in (ROOT / test[0]).read_text(encoding="utf-8"), f"{name}: {test}"


def test_adding_a_primitive_accumulate_rule():
    # the doc's accumulate option of wg.defvjp, and its old name (HIPS autograd's users know it)
    text = " ".join((ROOT / "docs/adding-a-primitive.md").read_text(encoding="utf-8").split())
    assert "`accumulate=(rule(buffer, g, out, *args), ...)`" in text
    from wengert.core.extend import defvjp_accumulate

    @wg.primitive
    def pick(v, i):
        return v[i]

    def untake(g, out, v, i):
        return wg.numpy.index_add(wg.numpy.zeros_like(v), i, g)

    def add_into(buffer, g, out, v, i):
        buffer[i] += g

    wg.defvjp(pick, untake, None)
    defvjp_accumulate(pick, add_into, None)
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.grad(lambda v: sum(pick(v, i) ** 2 for i in range(3)))(v), 2 * v)


def test_rule_case_files_are_what_the_doc_says():
    from tests.rules.test_rule_table import _merge_case_modules  # noqa: F401 - the merge the doc describes exists

    assert list((ROOT / "tests" / "rules" / "cases").glob("[!_]*.py"))


def test_prose_claims_of_the_readme():
    import wengert.numpy as wnp

    # "A NumPy function that has no derivative rule raises an error naming it"
    with pytest.raises(Exception, match="numpy.unwrap"):
        wg.grad(lambda x: np.sum(np.unwrap(x)))(np.ones(3))
    # "`max`/`min` split the gradient equally between tied elements"
    np.testing.assert_array_equal(wg.grad(wnp.max)(np.array([1.0, 3.0, 3.0])), [0.0, 0.5, 0.5])
    # "`cumprod` (exact with zeros)": d/dx sum(x0, x0 x1, x0 x1 x2) at (2, 0, 3) by hand
    np.testing.assert_array_equal(wg.grad(lambda x: wnp.sum(wnp.cumprod(x)))(np.array([2.0, 0.0, 3.0])),
                                  [1.0, 2.0 + 2.0 * 3.0, 0.0])

    # docs/indexing.md: "A view taken before its base is written to ... sees the write, as in NumPy"
    def keep(x):
        s = x[:2]
        x[0] = 5.0
        return wnp.sum(s) + wnp.sum(x)

    np.testing.assert_array_equal(wg.grad(keep)(np.array([1.0, 2.0, 3.0])), [0.0, 2.0, 1.0])
    # "An eager Tensor overwritten in place ... makes the next backward() raise an error naming that op"
    x = wg.tensor(np.ones(3), requires_grad=True)
    y = x * 2.0
    z = wnp.sum(wnp.sin(y))
    with wg.no_grad():
        y[0] = 5.0
    with pytest.raises(RuntimeError, match="'sin'"):
        z.backward()

    # docs/program.md, "Control flow in wg.compile": a branch on a traced value is built from source
    def branch(x):
        if x > 0:
            return x
        return -x

    compiled = wg.compile(branch)
    assert (compiled(1.0), compiled(-2.0)) == (1.0, 2.0)
    assert "Python control flow" in compiled.program(-2.0).refusal  # why the trace refused


def test_modules_in_the_docs_tables_exist():
    """A table's module paths are relative to ``src/wengert/program``, ``src/wengert`` or ``src``."""
    bases = [ROOT / "src/wengert/program", ROOT / "src/wengert", ROOT / "src"]
    checked = 0
    for name in ["docs/program.md", "docs/source.md", "docs/checkpointing.md"]:
        text = (ROOT / name).read_text(encoding="utf-8")
        for row in re.findall(r"^\| (`[\w./]+\.py`(?:, `[\w./]+\.py`)*) \|", text, re.M):
            for module in re.findall(r"`([\w./]+\.py)`", row):
                assert any((base / module).exists() for base in bases), f"{name}: {module}"
                checked += 1
    assert checked > 30


def test_checkpointing_bounds_in_the_prose():
    from wengert import checkpointing
    for n in range(1, 130):  # "ctz ... keeps at most ⌊log2 n⌋ + 2 states"
        assert checkpointing.ctz(n).peak_snapshots <= int(math.log2(n)) + 2


def test_adding_a_primitive_contract():
    import wengert.numpy as wnp

    @wg.primitive
    def scale(x, k):
        return x * k

    wg.defvjp(scale, lambda g, out, x, k: g * k, None)  # "None for an argument that is not differentiable"
    with pytest.raises(wg.NoRuleError, match="'scale'.*argument 1"):
        wg.grad(scale, argnums=1)(np.ones(3), 2.0)

    @wg.primitive
    def add(x, b):
        return x + b

    wg.defvjp(add, lambda g, out, x, b: g, lambda g, out, x, b: g)  # output-shaped: summed back
    np.testing.assert_array_equal(wg.grad(lambda b: wnp.sum(add(np.ones((2, 3)), b) ** 2))(np.zeros(3)),
                                  [4.0, 4.0, 4.0])


def test_the_box_table_names_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## What is in the box")[1].split("\n## ")[0]
    names = re.findall(r"`wg\.(\w+)", table)
    assert len(names) >= 20
    assert [n for n in names if not hasattr(wg, n)] == []


def test_the_numpy_additions_listed_are_differentiable():
    import wengert.numpy as wnp

    text = " ".join((ROOT / "docs/numpy.md").read_text(encoding="utf-8").split())
    listed = text.split("The additions include ")[1].split(". Each takes NumPy's arguments")[0]
    names = re.findall(r"`(\w+)`", listed)
    assert len(names) >= 40
    assert [n for n in names if n not in wnp.DIFFERENTIABLE] == []
    assert wnp.random is np.random  # "`wengert.numpy.random` is NumPy's `random`"


def test_vmap_page_prints_what_it_shows(tmp_path):
    ns, shown = {}, 0
    for line, _lang, code, output in python_blocks("docs/vmap.md"):
        ns, stdout = run(code, tmp_path, ns, tag=f"vmap_{line}")
        if output is not None:
            assert stdout.strip() == output.strip(), f"docs/vmap.md line {line}"
            shown += 1
    assert shown == 4
    X, W = ns["X"], ns["W"]
    np.testing.assert_allclose(ns["per_example"], [wg.grad(ns["f"])(x) for x in X], rtol=1e-14)
    t = np.tanh(X @ W.T)  # d/dx sum(tanh(W x)**2) = W^T (2 tanh (1 - tanh**2)), by hand
    np.testing.assert_allclose(ns["per_example"], (2 * t * (1 - t ** 2)) @ W, rtol=1e-13)
    np.testing.assert_allclose(ns["H"], wg.jacfwd(wg.grad(ns["rosenbrock"]))(ns["x"]), rtol=1e-12)


def test_readme_compile_session_prints_what_it_shows(tmp_path):
    ns, _, _ = run_block("README.md", "print(wg.grad(f)(0.5, 4.2))", tmp_path)  # defines f
    session = [b for b in blocks("README.md") if b[2].startswith(">>> ")]
    assert len(session) == 1
    lines = session[0][2].splitlines()
    code = "\n".join(ln[4:] for ln in lines if ln.startswith(">>> "))
    expected = "\n".join(ln for ln in lines if not ln.startswith(">>> "))
    _, printed = run(code, tmp_path, ns, tag="readme_compile_session")
    assert printed.strip() == expected.strip()


@pytest.mark.parametrize("name", ["docs/gallery.md", "docs/tape.md", "docs/getting-started.md"])
def test_pages_print_what_they_show(name, tmp_path):
    ns, shown = {}, 0
    for line, _lang, code, output in python_blocks(name):
        ns, stdout = run(code, tmp_path, ns, tag=f"{Path(name).stem}_{line}")
        if output is not None:
            assert stdout.strip() == output.strip(), f"{name} line {line}"
            shown += 1
    assert shown >= 1
