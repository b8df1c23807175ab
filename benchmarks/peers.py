"""The peer libraries (PyTorch, JAX, HIPS autograd, Numba), imported lazily and guarded: a peer that is
missing or fails to import raises ``PeerUnavailable``, which the harness reports instead of crashing.
``NotApplicable`` says that this checkout of wengert lacks what an implementation needs (a keyword
such as ``backend="numba"``): reported as "n/a".
"""

import importlib
import importlib.metadata

__all__ = ["PeerUnavailable", "NotApplicable", "load_torch", "load_jax", "load_autograd", "load_numba",
           "package_version"]


class PeerUnavailable(Exception):
    """A peer library cannot be used; the message says why ("not installed", or the import error)."""


class NotApplicable(PeerUnavailable):
    """The implementation does not apply to this checkout (its wengert lacks a feature): "n/a"."""

    status = "n/a"


_loaded = {}


def _load(name, configure):
    if name not in _loaded:
        try:
            module = importlib.import_module(name)
            _loaded[name] = configure(module)
        except ModuleNotFoundError as e:
            missing = e.name or name
            why = "not installed" if missing.split(".")[0] == name else f"import failed: {e}"
            _loaded[name] = PeerUnavailable(why)
        except Exception as e:  # a broken install must not crash the harness
            _loaded[name] = PeerUnavailable(f"import failed: {type(e).__name__}: {e}")
    result = _loaded[name]
    if isinstance(result, PeerUnavailable):
        raise result
    return result


def _configure_torch(torch):
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before any inter-op work has started
        pass
    return torch


def _configure_jax(jax):
    jax.config.update("jax_enable_x64", True)  # float64 workloads; float32 arrays stay float32
    import jax.numpy as jnp

    return jax, jnp


def _configure_autograd(autograd):
    import autograd.numpy as anp

    return autograd, anp


def load_torch():
    """The ``torch`` module, set to one intra-op (and inter-op) thread."""
    return _load("torch", _configure_torch)


def load_jax():
    """``(jax, jax.numpy)`` on the CPU with float64 enabled."""
    return _load("jax", _configure_jax)


def load_autograd():
    """``(autograd, autograd.numpy)``."""
    return _load("autograd", _configure_autograd)


def load_numba():
    """The ``numba`` module (compiling in nopython mode, one thread: no ``parallel=True`` is used)."""
    return _load("numba", lambda numba: numba)


def package_version(dist):
    """The installed version of distribution ``dist`` (without importing it), or "not installed"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
