"""wengert.viz: the DOT text is read back structurally (nodes, edges, labels), never compared to a
snapshot of itself."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.support.dot_parser import fields, parse
from wengert import nn, viz


def seed_graph():
    """The third seed's figure: h = matmul(x, W_1); pred = matmul(h, W_2); loss = softmax(pred, label)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    label = np.array([0, 2, 1, 1])
    W_1 = wg.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    W_2 = wg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    h = x @ W_1
    pred = h @ W_2
    loss = nn.cross_entropy(pred, label)
    return loss, dict(x=x, label=label, W_1=W_1, W_2=W_2, h=h, pred=pred, loss=loss)


def by_name(graph, subgraph):
    return {fields(label)[0]: (node_id, fields(label)) for node_id, (label, sub) in graph["nodes"].items()
            if sub == subgraph}


def test_the_seeds_figure_has_its_nodes_and_edges():
    loss, names = seed_graph()
    graph = parse(viz.to_dot(loss, names=names))
    variables = by_name(graph, "variable")
    functions = [fields(label) for label, sub in graph["nodes"].values() if sub == "function"]
    assert sorted(variables) == sorted(["x", "label", "W_1", "W_2", "h", "pred", "loss"])
    assert sorted(f[0] for f in functions) == ["type: matmul", "type: matmul", "type: softmax_cross_entropy"]
    assert {v[1][-1] for k, v in variables.items() if k in ("x", "label", "W_1", "W_2")} == {"creator: None"}
    assert variables["h"][1][-1] == "creator: matmul" and variables["pred"][1][-1] == "creator: matmul"
    assert variables["loss"][1][-1] == "creator: softmax_cross_entropy"
    assert variables["W_1"][1][1] == "(3, 5) float64"
    assert sorted(f[1] for f in functions) == ["inputs: h, W_2", "inputs: pred, label", "inputs: x, W_1"]

    flow = [(t, h) for t, h, sub in graph["edges"] if sub == "data_flow"]
    prev = [(t, h) for t, h, sub in graph["edges"] if sub == "prev_func"]
    assert len(flow) == 9 and len(prev) == 2
    fid = {fields(graph["nodes"][n][0])[1]: n for n in graph["nodes"] if graph["nodes"][n][1] == "function"}
    m0, m1, sm = fid["inputs: x, W_1"], fid["inputs: h, W_2"], fid["inputs: pred, label"]
    v = {k: node_id for k, (node_id, _) in variables.items()}
    assert set(flow) == {(v["x"], m0), (v["W_1"], m0), (m0, v["h"]), (v["h"], m1), (v["W_2"], m1),
                         (m1, v["pred"]), (v["pred"], sm), (v["label"], sm), (sm, v["loss"])}
    assert set(prev) == {(m1, m0), (sm, m1)}
    assert 'color = "red"' in viz.to_dot(loss).split("subgraph prev_func")[1]


def test_only_what_the_output_depends_on_is_drawn():
    a = wg.tensor(np.ones(3), requires_grad=True)
    unused = wnp.exp(a)  # noqa: F841 - recorded, but the output does not depend on it
    out = wnp.sum(wnp.sin(a) * 2.0)
    graph = parse(viz.to_dot(out))
    ops = sorted(fields(label)[0] for label, sub in graph["nodes"].values() if sub == "function")
    assert ops == ["type: multiply", "type: sin", "type: sum"]
    mult = next(fields(label) for label, sub in graph["nodes"].values() if "multiply" in label)
    assert mult[1] == "inputs: t0, 2.0"  # the scalar constant shown inline, unnamed values numbered


def test_a_tape_is_drawn_whole_in_program_order():
    tape = wg.Tape()
    x, y = tape.var(0.5, name="x"), tape.var(4.2, name="y")
    z = x * y + wnp.sin(x)
    graph = parse(viz.to_dot(tape, names={"z": z}))
    variables = by_name(graph, "variable")
    assert sorted(variables) == ["t0", "t1", "x", "y", "z"]
    assert len([e for e in graph["edges"] if e[2] == "data_flow"]) == 3 + 2 + 3  # in and out edges
    assert len([e for e in graph["edges"] if e[2] == "prev_func"]) == 2  # add <- multiply, add <- sin


def test_objects_that_draw_themselves_are_asked_to():
    class Program:
        def to_dot(self):
            return "digraph program {\n}\n"

    assert viz.to_dot(Program()) == "digraph program {\n}\n"


def test_errors_say_what_to_do():
    with pytest.raises(TypeError, match="Tensor"):
        viz.to_dot(np.ones(3))
    w = wg.tensor(np.ones(2), requires_grad=True)
    loss = wnp.sum(w * w)
    loss.backward()
    with pytest.raises(ValueError, match="before calling backward"):
        viz.to_dot(loss)


def test_render_without_graphviz_writes_dot_and_says_how(tmp_path, monkeypatch, capsys):
    loss, names = seed_graph()
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    written = viz.render(loss, tmp_path / "g.svg", names=names)
    assert written == str(tmp_path / "g.dot") and not (tmp_path / "g.svg").exists()
    parse((tmp_path / "g.dot").read_text())
    assert "dot -Tsvg" in capsys.readouterr().out


def test_render_with_graphviz_when_installed(tmp_path):
    if viz.shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    loss, names = seed_graph()
    written = viz.render(loss, tmp_path / "g.svg", names=names)
    assert written == str(tmp_path / "g.svg")
    assert "<svg" in (tmp_path / "g.svg").read_text()


def test_render_rejects_unknown_formats(tmp_path):
    loss, _ = seed_graph()
    with pytest.raises(ValueError, match="unknown picture format"):
        viz.render(loss, tmp_path / "g.jpeg2000")


def test_an_array_input_the_tape_did_not_keep_is_drawn_with_its_shape():
    """``add`` reads neither argument, so the tape lets go of a big constant operand (keeping its shape
    and dtype): the picture still draws it as an input array, not as the placeholder's class name."""
    x = wg.tensor(np.ones(1000), requires_grad=True)
    z = wnp.sum(wnp.sin(x + np.arange(1000.0)))
    text = viz.to_dot(z)
    assert "Unsaved" not in text and "not saved" not in text
    add = [line for line in text.splitlines() if "type: add" in line]
    assert add and "inputs: input0, input1" in add[0]
    assert text.count("(1000,) float64") >= 3  # x, the constant, and the sum's operand


def test_a_graph_inside_a_transform_is_drawn_in_recording_order():
    """Inside ``wg.grad`` the nodes carry no creation counter (the trace keeps its Wengert list):
    drawing one raised AttributeError '_id'. Floats too (the compact scalar nodes)."""
    texts = []

    def f(x, s):
        y = wnp.sin(x) * 2.0
        t = s * 3.0 + 1.0
        texts.append(viz.to_dot(y))
        texts.append(viz.to_dot(t))
        return wnp.sum(y) * t

    g = wg.grad(f, argnums=(0, 1))(np.ones(3), 0.5)
    np.testing.assert_allclose(g[0], 2.0 * np.cos(np.ones(3)) * 2.5)
    array_dot, float_dot = texts
    assert "type: sin" in array_dot and "type: multiply" in array_dot and "(3,) float64" in array_dot
    assert array_dot.index('"sin0"') < array_dot.index('"multiply0"')
    assert "type: multiply" in float_dot and "type: add" in float_dot and "scalar float64" in float_dot
