# rbdgen — every tool the build and the tests need is installed from here.
# `make demo` and `make test` work on a fresh machine with nothing installed by hand.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=
# both cores: compile-heavy tests run in parallel workers
PYTEST_WORKERS ?= 2

.PHONY: demo test bench bench-cuda clean venv generated

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,cuda]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rbdgen demo

test: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# the generated packages kept in the repository (tests/test_generated.py checks they are current)
generated: $(STAMP)
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --out generated --name iiwa14 --quiet
	$(VENV)/bin/rbdgen generate robots/quadruped.urdf --floating-base --out generated --name quadruped --quiet
	$(VENV)/bin/rbdgen generate robots/iiwa14.urdf --target cuda --dtype float64 --out generated --name iiwa14_cuda --quiet

# benchmarks (not a test): rbdgen vs the NumPy reference vs Pinocchio (C++), ~13 min; writes
# benchmarks/results/. BENCH_ARGS="--robots iiwa14 --quick" for a smoke run (see benchmarks/README.md)
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# on a machine with an NVIDIA GPU: CUDA kernels vs batch size next to the CPU kernels (installs
# cupy); writes benchmarks/results/cuda.{json,md}. Without a GPU it says so and writes nothing.
bench-cuda: $(STAMP)
	$(PY) -m pip install --quiet -e '.[gpu]'
	$(PY) benchmarks/run_cuda.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
