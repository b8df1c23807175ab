"""wengert: exact derivatives of ordinary Python/NumPy programs.

Reverse mode on a pruned tape (``grad``, ``vjp``, ``Tensor.backward``, ``Tape``), forward mode with
dual numbers (``jvp``), and their compositions (``jacfwd``, ``jacrev``, ``hessian``, ``hvp``), all
reading one rule table. ``import wengert.numpy as wnp`` for NumPy's names; plain NumPy calls on
traced values dispatch there. ``Program`` and ``compile`` derive derivative programs, as Python source,
from the same rules.
"""

from wengert.api.batching import vmap
from wengert.api.checkpointing.transforms import checkpoint, iterate
from wengert.api.jacobians import (
    hessian,
    hessian_tensor_product,
    hessian_vector_product,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
)
from wengert.api.tape import Grad, Tape, Var
from wengert.api.tensor import Tensor, enable_grad, is_grad_enabled, no_grad, tensor
from wengert.api.transforms import elementwise_grad, grad, jvp, stop_gradient, value_and_grad, vjp
from wengert.api.tree import tree_flatten, tree_map, tree_ravel, tree_unflatten
from wengert.core.extend import (
    defbatch,
    defjvp,
    defjvp_argnum,
    defvjp,
    defvjp_accumulate,
    defvjp_argnum,
    defvjp_float,
    defvjp_inplace,
    elementwise,
    facts,
    primitive,
)
from wengert.core.primitive import Primitive
from wengert.errors import (
    DataDependentShapeError,
    ExitError,
    NativeFallbackWarning,
    NoBatchingRuleWarning,
    NoRuleError,
    TracingError,
    TransformError,
    UnsupportedNumpyFunction,
)
from wengert.program import Program
from wengert.program.compiled import compile_function as compile  # noqa: A004 - wg.compile, as jax.jit
from wengert.program.source.api import source_grad, source_jvp
from wengert.program.source.checkpoint import checkpointed
from wengert.rules.broadcasting import NotBatched

__version__ = "0.1.0"

__all__ = [
    "grad", "value_and_grad", "vjp", "elementwise_grad", "jvp", "jacfwd", "jacrev", "jacobian",
    "hessian", "hvp", "hessian_vector_product", "hessian_tensor_product", "stop_gradient", "vmap",
    "Tensor", "tensor", "no_grad", "enable_grad", "is_grad_enabled",
    "Tape", "Var", "Grad",
    "primitive", "defvjp", "defjvp", "defbatch", "NotBatched", "elementwise", "facts",
    "defvjp_argnum", "defjvp_argnum",
    "defvjp_accumulate", "defvjp_float", "defvjp_inplace", "Primitive", "NoRuleError",
    "tree_flatten", "tree_unflatten", "tree_map", "tree_ravel",
    "Program", "compile", "checkpoint", "iterate",
    "source_grad", "source_jvp", "checkpointed",
    "TransformError", "ExitError", "UnsupportedNumpyFunction", "TracingError", "DataDependentShapeError",
    "NoBatchingRuleWarning", "NativeFallbackWarning",
]

_SUBMODULES = ("numpy", "scipy", "nn", "optim", "viz", "checkpointing", "testing", "misc", "extend",
               "test_util")


def __getattr__(name):
    """``wg.nn``, ``wg.optim``, ... imported on first use, as ``torch.nn`` is after ``import torch``."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'wengert' has no attribute {name!r}")
