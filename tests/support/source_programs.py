"""Programs with control flow for the source transformation's tests (their source must be in a file).

Each entry of ``PROGRAMS`` is ``(function, args, argnums)``; the tests compare the gradient built
from source with the tape's (``wg.grad``) and with central finite differences.
"""

import math

import numpy as np

import wengert as wg
import wengert.numpy as wnp

R = np.random.default_rng(5)
V5 = R.normal(size=5)
V8 = R.normal(size=8)
M34 = R.normal(size=(3, 4))
W = R.normal(size=(4, 3))


def seed_example(x1, x2):
    y = np.log(x1) + x1 * x2 - np.sin(x2)
    return y


def straight_math(x, y):
    a = math.exp(x) * math.cos(y)
    b = math.sqrt(x * x + y * y)
    return a / b + math.tanh(x - y)


def tuple_unpack(x, y):
    a, b = x * y, x + y
    a, b = b, a
    return a * 2.0 - b ** 2


def if_else(x):
    if x > 1.0:
        y = x * x
    else:
        y = np.sin(x)
    return y * 3.0


def if_elif_else(x):
    if x > 2.0:
        y = x ** 3
    elif x > 0.0:
        y = np.exp(x)
    else:
        y = -x
    return y + x


def if_no_else(x, y):
    z = x * y
    if z < 0.5:
        z = z * z + y
    return z


def if_on_array_sum(v):
    if v.sum() > 0.0:
        w = v * 2.0
    else:
        w = np.tanh(v)
    return (w * w).sum()


def sum_squares(v):
    s = 0.0
    for i in range(len(v)):
        s += v[i] * v[i]
    return s


def dot_loop(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s = s + a[i] * b[i]
    return s


def loop_over_array(v):
    s = 0.0
    for x in v:
        s += np.sin(x) * x
    return s


def product_loop(v):
    p = 1.0
    for i in range(v.shape[0]):
        p = p * (1.0 + 0.1 * v[i])
    return p


def power_iteration(x, n):
    y = x
    for _ in range(n):
        y = np.sin(y) + x
    return y


def loop_step(v):
    s = 0.0
    for i in range(1, len(v), 2):
        s += v[i] * v[i - 1]
    return s


def nested_loops(m):
    s = 0.0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            s += m[i, j] * (i + 1.0) * np.cos(m[i, j])
    return s


def nested_with_row_state(m):
    total = 0.0
    for i in range(m.shape[0]):
        row = 0.0
        for j in range(m.shape[1]):
            row = row + m[i, j] ** 2
        total = total + np.sqrt(row)
    return total


def branch_in_loop(v):
    s = 0.0
    for i in range(len(v)):
        if v[i] > 0.0:
            s += v[i] * v[i]
        else:
            s -= np.sin(v[i])
    return s


def relu_sum_loop(v):
    s = 0.0
    for x in v:
        if x > 0.0:
            t = x * 2.0
            s = s + t * x
    return s


def continue_loop(v):
    s = 0.0
    for i in range(len(v)):
        if v[i] < 0.0:
            continue
        s += np.exp(v[i]) * v[i]
    return s


def break_loop(v):
    s = 0.0
    for i in range(len(v)):
        s = s + v[i] * v[i]
        if s > 2.0:
            break
    return s


def while_data_exit(x):
    k = 0
    while x < 10.0:
        x = x * 1.7 + 0.3
        k += 1
    return x * k


def while_counter(x):
    i = 0
    y = x
    while i < 5:
        y = y * np.cos(y) + x
        i += 1
    return y


def while_break(x):
    y = x
    while True:
        y = y * 1.3
        if y > 5.0:
            break
    return y


def newton_sqrt(a):
    x = a
    while np.abs(x * x - a) > 1e-10:
        x = 0.5 * (x + a / x)
    return x


def array_carried(v):
    acc = np.zeros(3)
    for i in range(4):
        acc = acc * 0.5 + v[i] * np.arange(3.0)
    return (acc * acc).sum()


def matrix_loop(m, w):
    h = m
    for _ in range(2):
        h = np.tanh(h @ w) @ w.T
    return (h * h).sum()


def functional_update(v):
    out = np.zeros(len(v))
    for i in range(len(v)):
        out[i] = v[i] * v[i] + 1.0
    return (out * v).sum()


def augmented_subscript(v):
    w = v * 1.0
    for i in range(1, len(v)):
        w[i] += w[i - 1] * 0.5
    return (w * w).sum()


def helper_square(x):
    return x * x


def helper_poly(x, c=2.0):
    if x > 0.0:
        r = helper_square(x) + c * x
    else:
        r = c * np.sin(x)
    return r


def calls_user(x, y):
    return helper_poly(x) * helper_square(y) + helper_poly(y, 3.0)


def calls_in_loop(v):
    s = 0.0
    for i in range(len(v)):
        s += helper_poly(v[i])
    return s


def wnp_calls(v):
    s = wnp.sum(wnp.exp(v) * wnp.sin(v))
    for i in range(2):
        s = s + wnp.max(v) * i
    return s


def static_int_branch(x, mode):
    if mode == 1:
        y = x * x
    else:
        y = x + 1.0
    for _ in range(mode):
        y = y * 1.5
    return y


def loop_mean(v):
    m = 0.0
    for i in range(len(v)):
        m = m + (v[i] - m) / (i + 1.0)
    return m * m


def early_continue_nested(m):
    s = 0.0
    for i in range(m.shape[0]):
        if i == 1:
            continue
        for j in range(m.shape[1]):
            if m[i, j] < -0.5:
                continue
            s = s + m[i, j] * m[i, j] * j
    return s


def two_accumulators(v):
    a = 0.0
    b = 1.0
    for x in v:
        a = a + x
        b = b * np.cos(x)
    return a * b


def triangular_loops(v):
    s = 0.0
    for i in range(len(v)):
        for j in range(i):
            s = s + v[i] * v[j]
    return s


def while_in_for_with_and(v, x):
    t = 0.0
    for i in range(len(v)):
        y = v[i]
        k = 0
        while y < x and k < 3:
            y = y * 2.0 + 0.5
            k += 1
        if k > 1 or not y > 0.0:
            t = t + y * x
        else:
            t = t - np.cos(y)
    return t


def break_at_once(v):
    s = 1.0
    for x in v:
        s = s * x
        break
    return s


def same_call_in_both_arms(x):
    if x > 0.0:
        y = np.sin(x) * 2.0
    else:
        y = np.sin(x) * 3.0
    return y + np.sin(x)


def early_return(x):
    if x > 1.0:
        return x * x
    y = np.sin(x)
    if y < 0.0:
        return -y * x
    return y + x


def early_return_array(v):
    if v.sum() > 0.0:
        return (v * v).sum()
    return np.exp(v).sum()


def prefix_sums(v):
    out = v * 0.0
    out[0] = v[0]
    for i in range(1, len(v)):
        out[i] = out[i - 1] + v[i]
    return (out * out).sum()


def update_and_read(v):
    out = v * 1.0
    s = 0.0
    for i in range(len(v)):
        out[i] = out[i] * 2.0
        s = s + (out * out).sum()
    return s


def fib_like(x):
    a, b = x, 1.0
    for _ in range(5):
        a, b = b, a * b + 0.1
    return a + b

def while_cont_break(x):
    k = 0
    s = 0.0
    while k < 10:
        k += 1
        if k % 2 == 0:
            continue
        s = s + np.sin(x * k)
        if s > 1.5:
            break
    return s

def loop_over_rows(m):
    s = 0.0
    for row in m:
        s = s + np.tanh(row).sum() * row[0]
    return s

def matrix_update(m):
    out = m * 1.0
    for i in range(m.shape[0]):
        out[i, :] = out[i, :] * 2.0 + 1.0
    return (out * m).sum()


PROGRAMS = [
    (seed_example, (2.0, 5.0), (0, 1)),
    (straight_math, (0.7, 1.3), (0, 1)),
    (tuple_unpack, (0.7, 1.3), (0, 1)),
    (if_else, (2.0,), 0),
    (if_else, (0.5,), 0),
    (if_elif_else, (3.0,), 0),
    (if_elif_else, (1.0,), 0),
    (if_elif_else, (-1.0,), 0),
    (if_no_else, (0.3, 0.4), (0, 1)),
    (if_no_else, (1.3, 0.9), (0, 1)),
    (if_on_array_sum, (V5,), 0),
    (if_on_array_sum, (-np.abs(V5),), 0),
    (sum_squares, (V8,), 0),
    (dot_loop, (V5, V5[::-1].copy()), (0, 1)),
    (loop_over_array, (V8,), 0),
    (product_loop, (V8,), 0),
    (power_iteration, (0.5, 4), 0),
    (loop_step, (V8,), 0),
    (nested_loops, (M34,), 0),
    (nested_with_row_state, (M34,), 0),
    (branch_in_loop, (V8,), 0),
    (relu_sum_loop, (V8,), 0),
    (continue_loop, (V8,), 0),
    (break_loop, (V8,), 0),
    (while_data_exit, (1.5,), 0),
    (while_counter, (0.4,), 0),
    (while_break, (0.7,), 0),
    (newton_sqrt, (2.0,), 0),
    (array_carried, (V5,), 0),
    (matrix_loop, (M34, W), (0, 1)),
    (functional_update, (V5,), 0),
    (augmented_subscript, (V5,), 0),
    (calls_user, (0.8, -0.6), (0, 1)),
    (calls_in_loop, (V8,), 0),
    (wnp_calls, (V5,), 0),
    (static_int_branch, (0.9, 1), 0),
    (static_int_branch, (0.9, 3), 0),
    (loop_mean, (V8,), 0),
    (early_continue_nested, (M34,), 0),
    (two_accumulators, (V5,), 0),
    (triangular_loops, (V8,), 0),
    (while_in_for_with_and, (V8, 1.2), (0, 1)),
    (break_at_once, (V5,), 0),
    (same_call_in_both_arms, (0.5,), 0),
    (same_call_in_both_arms, (-0.5,), 0),
    (early_return, (2.0,), 0),
    (early_return, (0.5,), 0),
    (early_return, (-0.5,), 0),
    (early_return_array, (V5,), 0),
    (early_return_array, (-np.abs(V5),), 0),
    (prefix_sums, (V8,), 0),
    (update_and_read, (V5,), 0),
    (fib_like, (0.7,), 0),
    (while_cont_break, (0.3,), 0),
    (while_cont_break, (0.9,), 0),
    (loop_over_rows, (M34,), 0),
    (matrix_update, (M34,), 0),
]


# -- for checkpointed loops (tests/program/test_source_checkpoint.py) -------------------------------------

def sine_map(x, n):
    for i in range(n):
        x = 0.9 * np.sin(x) + 0.1 * x
    return np.sum(x * x)


def while_array_exit(v):
    k = 0
    while np.sum(v * v) < 60.0:
        v = v * 1.3 + 0.1 * np.sin(v)
        k += 1
    return np.sum(v) * k


def stepped_range(v):
    s = 0.0
    for i in range(1, len(v), 2):
        s = s * 0.5 + v[i] * v[i - 1]
    return s


def marked_outer(x, v):
    for t in wg.checkpointed(range(20), "binomial", snapshots=3):
        s = 0.0
        for j in range(len(v)):
            s = s + v[j] * x[j]
        x = 0.9 * np.sin(x) + 0.1 * s
    return np.sum(x * x)


def marked_over_array(v):
    s = 1.0
    for a in wg.checkpointed(v, checkpoint="ctz"):
        s = np.sin(s) + a * s
    return s


def marked_inside_stored(x, v):
    for t in range(5):
        for j in wg.checkpointed(range(3), "ctz"):
            x = x * v[j]
    return np.sum(x)


def marked_bad_snapshots(x):
    for t in wg.checkpointed(range(5), "binomial", snapshots=0):
        x = np.sin(x)
    return x
