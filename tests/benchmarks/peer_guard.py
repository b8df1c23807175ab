"""A fixture for the smoke tests that must run without the peers: it fails a test that imports
PyTorch, JAX or HIPS autograd (the smoke tests run in the test environment, which has none of them
for speed, and must not depend on them)."""

import sys

import pytest

PEERS = ("torch", "jax", "autograd")


@pytest.fixture(autouse=True)
def no_peer_imports():
    before = {m for m in PEERS if m in sys.modules}
    yield
    assert {m for m in PEERS if m in sys.modules} == before, "the smoke test imported a peer library"
