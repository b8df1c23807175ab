"""Benchmarks for wengert against hand-written NumPy and, where installed, PyTorch, JAX and HIPS
autograd. Run with ``python -m benchmarks``; importing this package pins every library to one thread.
"""

import os

# Before NumPy (or any peer) is imported anywhere: one BLAS/OpenMP thread for every implementation.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

_XLA_SINGLE_THREAD = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")
_xla_flags = os.environ.get("XLA_FLAGS", "").split()
os.environ["XLA_FLAGS"] = " ".join(_xla_flags + [f for f in _XLA_SINGLE_THREAD if f not in _xla_flags])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

del _name, _xla_flags
