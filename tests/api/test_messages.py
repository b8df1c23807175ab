"""Messages a user meets name what the user wrote and say what the problem is in that context."""

import re

import numpy as np
import pytest

import wengert as wg


def test_np_vectorize_is_named_as_the_user_wrote_it():
    doubled = np.vectorize(lambda a: a * 2.0)
    for run in (lambda: wg.grad(lambda x: doubled(x).sum())(np.array([1.0, 2.0])),
                lambda: doubled(wg.tensor([1.0, 2.0], requires_grad=True))):
        with pytest.raises(wg.ExitError) as info:
            run()
        message = str(info.value)
        assert message.startswith("numpy.vectorize, which converts its arguments"), message
        assert "__call__" not in message and "wengert.numpy has no vectorize" in message, message


def test_bool_under_vmap_says_the_value_differs_per_example():
    with pytest.raises(wg.ExitError) as info:
        wg.vmap(lambda x: x if x > 0 else -x)(np.array([1.0, -2.0]))
    message = str(info.value)
    assert message.startswith("bool(), applied to a value batched by wg.vmap of shape ()"), message
    assert "a value of its own in each example" in message and "derivative" not in message, message
    assert "wnp.where(condition, a, b)" in message, message
    for sentence in re.split(r"(?<=\.) (?=\S)", message.split("`, ", 1)[1]):
        assert not sentence[:1].islower() or sentence.startswith("has a value"), (sentence, message)


def test_the_advice_for_vmap_bool_works():
    x = np.array([1.0, -2.0, 3.0])
    out = wg.vmap(lambda v: wg.numpy.where(v > 0, v, -v))(x)
    np.testing.assert_allclose(out, np.abs(x))
