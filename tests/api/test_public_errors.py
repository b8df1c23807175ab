"""The exceptions and warnings users meet are public (``wengert.errors``, and the common ones on
``wengert``), and are the very classes the library raises: each is triggered for real here and caught
by its public name."""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.errors as errors
import wengert.numpy as wnp
import wengert.testing


def test_the_public_names_are_the_internal_classes():
    from wengert.core.errors import TracingError
    from wengert.core.exits import ExitError
    from wengert.engines.batching import NoBatchingRuleWarning
    from wengert.numpy._classification import UnsupportedNumpyFunction
    from wengert.rules.batched_indexing import DataDependentShapeError

    internal = [ExitError, TracingError, NoBatchingRuleWarning, UnsupportedNumpyFunction,
                DataDependentShapeError]
    for cls in internal:
        name = cls.__name__
        assert getattr(wg, name) is cls and getattr(errors, name) is cls, name
        assert name in wg.__all__ and name in errors.__all__, name
    assert wg.TransformError is errors.TransformError and wg.NoRuleError is errors.NoRuleError
    assert errors.GradientCheckError is wengert.testing.GradientCheckError
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert isinstance(cls, type) and issubclass(cls, Exception) and cls.__doc__, name


def test_exit_error_is_caught_by_its_public_name():
    with pytest.raises(wg.ExitError, match=r"float\(\).*float\(wg.stop_gradient\(x\)\)"):
        wg.grad(lambda x: float(x) * x)(2.0)


def test_unsupported_numpy_function_is_caught_by_its_public_name():
    with pytest.raises(wg.UnsupportedNumpyFunction, match="numpy.unique"):
        wg.grad(lambda x: np.unique(x).sum())(np.array([1.0, 2.0]))


def test_tracing_error_is_caught_by_its_public_name():
    with pytest.raises(wg.TracingError, match=r"float\(\) of the traced value"):
        wg.Program.from_trace(lambda x: float(wnp.sum(x)), np.array([1.0, 2.0]))


def test_transform_error_is_caught_by_its_public_name():
    def f(x):
        try:
            return wnp.sum(x * 2.0)
        except ValueError:
            return wnp.sum(x)

    with pytest.raises(wg.TransformError, match="try/except"):
        wg.source_grad(f)(np.array([1.0, 2.0]))


def test_data_dependent_shape_error_is_caught_by_its_public_name():
    with pytest.raises(wg.DataDependentShapeError, match=r"x\[mask\]"):
        wg.vmap(lambda x: x[x > 0].sum())(np.ones((2, 3)))


def test_no_rule_error_is_caught_by_its_public_name():
    @wg.primitive
    def double(x):
        return x * 2.0

    wg.defvjp(double, lambda g, ans, x: g * 2.0)
    with pytest.raises(wg.NoRuleError):
        wg.jvp(double, (1.0,), (1.0,))


def test_undefined_derivative_error_is_caught_by_its_public_name():
    with pytest.raises(errors.UndefinedDerivativeError, match="eigh"):
        wg.grad(lambda a: np.linalg.eigh(a)[1].sum())(np.eye(2))


def test_no_batching_rule_warning_is_filtered_by_its_public_name():
    @wg.primitive
    def triple(x):
        return x * 3.0

    wg.defvjp(triple, lambda g, ans, x: g * 3.0)
    with pytest.warns(wg.NoBatchingRuleWarning, match="triple"):
        out = wg.vmap(triple)(np.ones((3, 2)))
    np.testing.assert_allclose(out, np.full((3, 2), 3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=wg.NoBatchingRuleWarning)
        wg.vmap(triple)(np.ones((3, 2)))


def test_gradient_check_error_is_caught_by_its_public_name():
    @wg.primitive
    def wrong(x):
        return x * 2.0

    wg.defvjp(wrong, lambda g, ans, x: g * 3.0)
    with pytest.raises(errors.GradientCheckError):
        wengert.testing.check_grads(wrong, modes=["rev"], order=1)(1.5)
