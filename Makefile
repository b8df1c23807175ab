# Every target works on a fresh machine: it makes .venv if missing and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: test test-slow test-gpu example-dask fuzz bench demo docs lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.demo: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[demo]'
	touch $@

$(VENV)/.docs: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[docs]'
	touch $@

$(VENV)/.bench: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

# The inner loop: lint, types and every test but the slow groups (tests/conftest.py: benchmark smoke
# runs, fuzz profiles, Dask, wheels in fresh venvs, the site build, CLI subprocesses, and the rule-table
# sweeps' cases after each primitive's first).
test: $(VENV)/.test
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -n 2 -m "not slow"

# The slow groups; CI runs `make test` and then this.
test-slow: $(VENV)/.test
	$(PY) -m pytest -n 2 -m slow

# The rule-table tests on CuPy arrays; skipped (not failed) where CuPy or a GPU is missing.
test-gpu: $(VENV)/.test
	$(PY) -m pip install -q -e '.[gpu]' || echo "CuPy could not be installed: the GPU tests will be skipped"
	$(PY) -m pytest -rs tests/rules/test_cupy_arrays.py

# Logistic regression on 2 x 10^7 rows (3.2 GB, generated lazily) on a local Dask cluster of two
# 1.5 GB workers; EXAMPLE_ARGS="--rows 1000000 --check" compares a smaller fit with NumPy in memory.
$(VENV)/.dask: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dask,scipy]'
	touch $@

example-dask: $(VENV)/.dask
	$(PY) examples/dask_logistic_regression.py $(EXAMPLE_ARGS)

# Random programs through every engine, for FUZZ_MINUTES; the report goes to build/fuzz-report.md.
FUZZ_MINUTES ?= 30
fuzz: $(VENV)/.test
	$(PY) -m tests.fuzz.run --minutes $(FUZZ_MINUTES) --report build/fuzz-report.md

demo: $(VENV)/.demo
	$(PY) -m wengert demo

bench: $(VENV)/.bench
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
	  $(PY) -m benchmarks $(BENCH_ARGS)

# The documentation site (MkDocs, Material theme, API reference from the docstrings) in site/;
# warnings are errors. `make test` checks that it builds and that its code blocks run.
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

lint: $(VENV)/.test
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache .ruff_cache
