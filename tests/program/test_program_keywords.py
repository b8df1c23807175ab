"""wg.compile with keyword arguments: positional-or-keyword ones given by name, keyword-only ones,
defaults; the compiled gradient with them, checked against the tape."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

X = np.array([1.0, 2.0, 3.0])


def scaled(x, scale=2.0, shift=1.0):
    return wnp.sum(x * x * scale) + shift


def keyword_only(x, *, scale=2.0, p=1.0):
    return wnp.sum(x * x * scale + p * x)


@pytest.mark.parametrize("call", [
    lambda f: f(X), lambda f: f(X, scale=3.0), lambda f: f(x=X, scale=3.0), lambda f: f(X, 3.0),
    lambda f: f(X, shift=0.5, scale=3.0), lambda f: f(X, 3.0, shift=0.5),
], ids=["positional", "keyword", "all-keywords", "positional-default", "two-keywords", "mixed"])
def test_keywords_as_python_binds_them(call):
    assert call(wg.compile(scaled)) == pytest.approx(call(scaled))
    tape = wg.grad(scaled)
    np.testing.assert_allclose(call(wg.compile(scaled).grad()),
                               call(lambda *a, x=None, **k: tape(*((x,) if x is not None else ()), *a, **k)))


@pytest.mark.parametrize("kwargs", [{}, {"scale": 3.0}, {"p": 2.0, "scale": 3.0}, {"scale": 4, "p": 0.5}],
                         ids=["defaults", "one", "two", "int-scale"])
def test_keyword_only(kwargs):
    c = wg.compile(keyword_only)
    assert c(X, **kwargs) == pytest.approx(keyword_only(X, **kwargs))
    np.testing.assert_allclose(c.grad()(X, **kwargs), wg.grad(keyword_only)(X, **kwargs))
    value, grad = c.value_and_grad()(X, **kwargs)
    assert value == pytest.approx(keyword_only(X, **kwargs))
    np.testing.assert_allclose(grad, wg.grad(keyword_only)(X, **kwargs))


def test_positional_calls_still_use_the_cache_after_keyword_calls():
    c = wg.compile(scaled)
    c(X)
    c(X, scale=3.0)
    for _ in range(3):
        c(X)
    assert c.cache_info().misses == 2
    assert c.cache_info().hits >= 3


def test_an_unknown_keyword_is_named():
    with pytest.raises(TypeError, match="scaled: got an unexpected keyword argument 'bogus'"):
        wg.compile(scaled)(X, bogus=1.0)


def test_source_grad_binds_keywords_as_python_does():
    d = wg.source_grad(scaled)
    np.testing.assert_allclose(d(X, scale=3.0), wg.grad(scaled)(X, scale=3.0))
    np.testing.assert_allclose(d(x=X, shift=0.5), wg.grad(scaled)(X, shift=0.5))
    with pytest.raises(TypeError, match="scaled_grad: got an unexpected keyword argument 'bogus'"):
        d(X, bogus=1.0)


def test_keywords_named_like_the_dispatchers_parameters_are_keywords():
    def two(x, y):
        return x * y

    c = wg.compile(two)
    assert c(2.0, 3.0) == 6.0
    with pytest.raises(TypeError, match="two: missing a required argument: 'y'"):
        c(2.0, a1=3.0)
    assert c(2.0, y=4.0) == 8.0
