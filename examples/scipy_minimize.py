"""SciPy's optimisers with wengert's gradients: ``scipy.optimize.minimize(fun, x0, jac=True)``.

``wg.value_and_grad(f)`` returns ``(f(x), gradient)``, which is what ``minimize`` asks for when
``jac=True``: one pass gives both. The parameters here are a pytree (a small logistic-regression
model's weights and bias); ``wg.tree_ravel`` makes the flat vector that SciPy works on, and its
``unravel`` turns SciPy's vectors back into the tree inside the loss, so that the gradient with
respect to the vector comes out flat.

    python examples/scipy_minimize.py [--method L-BFGS-B] [--samples 200]
"""

import argparse

import numpy as np
import scipy.optimize

import wengert as wg
import wengert.numpy as wnp


def make_data(samples, features, rng):
    """Points labelled by a noisy linear rule."""
    x = rng.standard_normal((samples, features))
    true_w = rng.standard_normal(features)
    y = (x @ true_w + 0.3 * rng.standard_normal(samples) > 0).astype(float)
    return x, y


def negative_log_likelihood(params, x, y, l2=1e-2):
    """Logistic regression's loss, with a small L2 penalty on the weights."""
    logits = x @ params["w"] + params["b"]
    # log(1 + exp(-s z)) with z = 2 y - 1, written stably with logaddexp
    loss = wnp.sum(wnp.logaddexp(0.0, -(2.0 * y - 1.0) * logits))
    return loss / len(y) + l2 * wnp.sum(params["w"] ** 2)


def fit(x, y, method="L-BFGS-B"):
    """Minimise the loss with SciPy; returns (parameters as a tree, SciPy's result)."""
    init = {"w": np.zeros(x.shape[1]), "b": 0.0}
    flat, unravel = wg.tree_ravel(init)
    objective = wg.value_and_grad(lambda v: negative_log_likelihood(unravel(v), x, y))
    result = scipy.optimize.minimize(objective, flat, jac=True, method=method)
    return unravel(result.x), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="L-BFGS-B")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    x, y = make_data(args.samples, args.features, np.random.default_rng(args.seed))
    params, result = fit(x, y, args.method)
    accuracy = np.mean(((x @ params["w"] + params["b"]) > 0) == (y > 0.5))
    print(f"{args.method}: {result.nit} iterations, {result.nfev} evaluations, loss {result.fun:.4f}, "
          f"training accuracy {accuracy:.2f}")
    return params, result


if __name__ == "__main__":
    main()
