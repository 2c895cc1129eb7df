# Two entry points that work on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bedrock,vertex]'
	touch $(STAMP)

# The project's own modules byte-compiled, as pip does for an installed wheel: this machine
# sets PYTHONDONTWRITEBYTECODE, so an editable install would compile about 90 modules from
# source at every command (0.1 s of `gateway audit list`'s start). Rewrites changed files only.
COMPILE := -m compileall -q gateway audit verifier

setup: $(STAMP)
	$(BIN)/python $(COMPILE)

# `make run` has a lean environment of its own: the package and its runtime dependencies,
# none of the dev extras (pytest, mypy, scipy, matplotlib) that `make setup` adds for tests.
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed

$(RUN_STAMP): pyproject.toml
	$(PY) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/pip install --quiet --upgrade pip
	$(RUN_VENV)/bin/pip install --quiet -e .
	touch $(RUN_STAMP)

# The main job on embedded defaults, offline: see scripts/run.sh.
run: $(RUN_STAMP)
	$(RUN_VENV)/bin/python $(COMPILE)
	GATEWAY_BIN=$(RUN_VENV)/bin scripts/run.sh

# Lint, type-check and the whole test suite (PostgreSQL is started by the tests themselves).
test: setup
	scripts/test.sh

# The day-to-day loop: lint, type check, and the tests that are neither slow nor PostgreSQL,
# on two pytest-xdist workers (the full run stays serial: its PostgreSQL is one per session).
test-fast: setup
	scripts/test.sh -m "not slow and not postgres" -x -q -n 2

lint: $(STAMP)
	$(BIN)/ruff check gateway audit tests bench verifier
	$(BIN)/ruff format --check gateway audit tests bench verifier

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/audit_bench.py
	$(BIN)/python bench/gateway_bench.py
	$(BIN)/python bench/sampling_bench.py

clean:
	rm -rf $(VENV) $(RUN_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
