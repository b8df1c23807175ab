"""Lists and dicts changed in place inside wg.source_grad: each form is right (checked against the tape
and finite differences) or refused with a TransformError naming the file and line; never zeros."""

import importlib.util
import inspect

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

X = np.array([0.5, -1.2, 2.0])


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def append_sum(x):
    acc = []
    for i in range(3):
        acc.append(x[i] ** 2)
    return sum(acc)


def append_first(x):
    acc = []
    for i in range(3):
        acc.append(x[i] ** 2)
    return acc[0]


def append_last(x):
    acc = []
    for i in range(3):
        acc.append(x[i] ** 2)
    return acc[-1]


def append_len(x):
    acc = []
    for i in range(3):
        acc.append(x[i] ** 2)
    return len(acc) * x[0]


def append_np_stack(x):
    acc = []
    for i in range(3):
        acc.append(x[i] ** 2)
    return np.sum(np.stack(acc) * np.arange(1.0, 4.0))


def append_wnp_stack(x):
    acc = []
    for v in x:
        acc.append(wnp.sin(v))
    return wnp.sum(wnp.stack(acc) ** 2)


def append_while(x):
    acc = []
    i = 0
    while i < 3:
        acc.append(x[i] ** 2)
        i += 1
    return sum(acc)


def append_while_break(x):
    acc = []
    i = 0
    while True:
        acc.append(x[i] * x[0])
        i += 1
        if i == 2:
            break
    return sum(acc)


def append_nested(x):
    acc = []
    for i in range(3):
        for j in range(i):
            acc.append(x[i] * x[j])
    return sum(acc) + len(acc)


def append_and_carry(x):
    acc = [x[0]]
    s = 0.0
    for i in range(1, 3):
        s = s + acc[-1] * x[i]
        acc.append(s)
    return s + acc[1]


def extend(x):
    acc = []
    for i in range(3):
        acc.extend([x[i], x[i] ** 2])
    return sum(acc)


def insert_front(x):
    acc = []
    for i in range(3):
        acc.insert(0, x[i] ** 3)
    return acc[0] + 2.0 * acc[2]


def pop(x):
    acc = [x[0], x[1], x[2]]
    total = 0.0
    for _ in range(2):
        total = total + acc.pop() * 2.0
    return total + acc[0]


def plus_equals(x):
    acc = []
    for i in range(3):
        acc += [x[i] * x[i]]
    return sum(acc)


def list_setitem(x):
    acc = [0.0] * 3
    for i in range(3):
        acc[i] = wnp.exp(x[i])
    return acc[0] * acc[2]


def list_item_plus_equals(x):
    acc = [0.0, 0.0]
    for i in range(3):
        acc[i % 2] += x[i] ** 2
    return acc[0] - acc[1]


def dict_setitem(x):
    d = {}
    for i in range(3):
        d[i] = x[i] * 3.0
    return d[0] + d[2] * d[1]


def dict_plus_equals(x):
    d = {"s": 0.0}
    for i in range(3):
        d["s"] += wnp.sin(x[i])
    return d["s"]


def dict_update(x):
    d = {}
    for i in range(3):
        d.update({i: x[i] ** 2})
    return sum(d.values())


def straight_line(x):
    acc = [x[0]]
    acc.append(x[1] * 2.0)
    acc[0] = acc[0] * x[2]
    d = {"a": x[0]}
    d["b"] = x[1]
    d["a"] += x[2]
    acc.insert(1, d["b"])
    acc.pop(0)
    return sum(acc) + d["a"]


def tuple_carried(x):
    t = ()
    for i in range(3):
        t = t + (x[i] ** 2,)
    return t[0] + t[2]


def _push(acc, v):
    acc.append(v * v)


def through_a_helper(x):
    acc = []
    for i in range(3):
        _push(acc, x[i])
    return sum(acc)


def over_array_rows(x):
    acc = []
    for row in x.reshape(3, 1):
        acc.append(row[0] * 2.0)
    return acc[0] * acc[-1]


RIGHT = [append_sum, append_first, append_last, append_len, append_np_stack, append_wnp_stack, append_while,
         append_while_break, append_nested, append_and_carry, extend, insert_front, pop, plus_equals,
         list_setitem, list_item_plus_equals, dict_setitem, dict_plus_equals, dict_update, straight_line,
         tuple_carried, through_a_helper, over_array_rows]


@pytest.mark.parametrize("fun", RIGHT, ids=[f.__name__ for f in RIGHT])
def test_container_changes_give_the_right_gradient(fun):
    want = wg.grad(fun)(X)
    np.testing.assert_allclose(want, _fd(fun, X), rtol=1e-6, atol=1e-8)
    got = wg.source_grad(fun)(X)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert np.any(got != 0)
    np.testing.assert_allclose(wg.compile(fun).grad()(X), want, rtol=1e-12, atol=1e-14)
    t = np.array([0.3, -0.7, 1.1])
    value, tangent = wg.source_jvp(fun)((X,), (t,))
    assert value == pytest.approx(fun(X))
    assert tangent == pytest.approx(want @ t)


def plain_loop(x):
    s = 0.0
    for i in range(3):
        s = s + x[i] ** 2
    return s


def test_only_loops_that_change_containers_are_unrolled():
    assert "    for " in wg.Program.from_source(plain_loop, X).source
    assert "for " not in wg.Program.from_source(append_sum, X).source
    np.testing.assert_allclose(wg.source_grad(append_sum)(X), wg.source_grad(plain_loop)(X))


def traced_while(x):
    acc = []
    s = x[0]
    while s < 10.0:
        acc.append(s)
        s = s * 2.0
    return sum(acc)


def traced_if(x):
    acc = [x[0]]
    if x[1] > 0:
        acc.append(x[2])
    return sum(acc)


def traced_if_setitem(x):
    d = {"a": x[0]}
    if x[1] > 0:
        d["a"] = x[2]
    return d["a"]


def traced_break(x):
    acc = []
    for i in range(3):
        acc.append(x[i])
        if x[i] > 1.0:
            break
    return sum(acc)


def traced_key(x):
    acc = [x[0], x[1]]
    k = (x[2] > 0) * 1
    acc[k] = x[2]
    return acc[0]


GLOBAL_LIST = []


def global_list(x):
    for i in range(3):
        GLOBAL_LIST.append(x[i])
    return x[0]


def _line_of(fun, text):
    lines, start = inspect.getsourcelines(fun)
    return start + next(k for k, line in enumerate(lines) if text in line)


REFUSED = [(traced_while, "while s < 10.0", "condition depends on traced values"),
           (traced_if, "if x[1] > 0", "changes acc in place"),
           (traced_break, "for i in range(3)", "break on a traced condition"),
           (traced_key, "acc[k] = x[2]", "indexed by a traced value"),
           (global_list, "GLOBAL_LIST.append", "changing the global list GLOBAL_LIST")]


@pytest.mark.parametrize("fun, line, why", REFUSED, ids=[f.__name__ for f, _, _ in REFUSED])
def test_what_cannot_be_followed_is_refused_naming_the_line(fun, line, why):
    with pytest.raises(wg.TransformError, match=why) as info:
        wg.source_grad(fun)(X)
    assert f"{__file__}, line {_line_of(fun, line)}" in str(info.value)
    assert GLOBAL_LIST == []


def test_an_entry_changed_in_one_arm_of_a_traced_if_is_the_ifs_output():
    # the dict keeps its keys whichever arm runs: only d["a"]'s value depends on the arm (an If output)
    for x in (X, X * np.array([1.0, -1.0, 1.0])):
        np.testing.assert_array_equal(wg.source_grad(traced_if_setitem)(x), wg.grad(traced_if_setitem)(x))
        assert wg.compile(traced_if_setitem)(x) == traced_if_setitem(x)


# -- every way of filling a container, in every kind of loop, read out every way ------------------

FILL = {
    "append": ("acc = []", "acc.append(VALUE)"),
    "extend": ("acc = []", "acc.extend([VALUE])"),
    "insert": ("acc = []", "acc.insert(len(acc), VALUE)"),
    "plus-equals": ("acc = []", "acc += [VALUE]"),
    "setitem": ("acc = [0.0] * 3", "acc[K] = VALUE"),
    "dict": ("acc = {}", "acc[K] = VALUE"),
}
LOOP = {
    "for-range": ("for k in range(3):", "BODY"),
    "for-array": ("k = 0\n    for row in x:", "BODY\n        k += 1"),
    "while": ("k = 0\n    while k < 3:", "BODY\n        k += 1"),
}
READ = {"sum": "acc[0] + acc[1] + acc[2]", "first": "acc[0] * x[1]", "last": "acc[2] * x[0]",
        "len": "len(acc) * x[0] + acc[1]", "stack": "np.sum(np.stack([acc[0], acc[1], acc[2]]) ** 2)"}


def _program(fill, loop, read):
    start, step = FILL[fill]
    head, body = LOOP[loop]
    step = step.replace("VALUE", "np.sin(x[k]) * x[(k + 1) % 3]").replace("K", "k")
    body = body.replace("BODY", step)
    return (f"import numpy as np\n\n\ndef f(x):\n    {start}\n    {head}\n        {body}\n"
            f"    return {READ[read]}\n")


@pytest.mark.parametrize("read", list(READ))
@pytest.mark.parametrize("loop", list(LOOP))
@pytest.mark.parametrize("fill", list(FILL))
def test_every_fill_loop_and_read(tmp_path, fill, loop, read):
    text = _program(fill, loop, read)
    path = tmp_path / f"m_{fill}_{loop}_{read}.py".replace("-", "_")
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    want = wg.grad(module.f)(X)
    np.testing.assert_allclose(want, _fd(module.f, X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(wg.source_grad(module.f)(X), want, rtol=1e-12, atol=1e-14, err_msg=text)


def long_append(x):
    acc = []
    for i in range(20000):
        acc.append(x[0] * i)
    return acc[-1]


def test_a_long_loop_changing_a_list_is_refused_with_the_remedy():
    with pytest.raises(wg.TransformError, match=r"20000 iterations .*wnp.zeros\(n\)") as info:
        wg.source_grad(long_append)(X)
    assert f"{__file__}, line {_line_of(long_append, 'for i in range')}" in str(info.value)
