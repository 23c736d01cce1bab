# All set-up happens here: a local virtual environment in .venv, the project installed into it.
# `make recover` installs the runtime dependencies only (numpy, scipy, cvxpy and its solvers, tqdm: what a
# recovery needs); `make test`, `make lint` and `make bench` install the extras EXTRAS on top (torch, the linters,
# cobra, dask, matplotlib, ...). pip shows what it downloads and installs.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
EXTRAS ?= test,lint,torch,dask,plot,bench

.PHONY: venv test lint format recover bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

## The runtime dependencies only (no extras): what `sculpt recover` and `sculpt learn` need.
$(VENV)/.installed-runtime: pyproject.toml | $(VENV)/bin/python
	@echo "== installing sculpt-attention and its runtime dependencies into $(VENV) (no extras)"
	$(PY) -m pip install --progress-bar on -e .
	touch $@

## Everything: the runtime dependencies and the extras EXTRAS (the test suite, the linters, the benchmarks).
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	@echo "== installing sculpt-attention with the extras [$(EXTRAS)] into $(VENV)"
	$(PY) -m pip install --progress-bar on --upgrade pip
	$(PY) -m pip install --progress-bar on -e ".[$(EXTRAS)]"
	touch $@ $(VENV)/.installed-runtime

venv: $(VENV)/.installed

## The test suite (what CI runs).
test: $(VENV)/.installed
	$(PY) -m pytest -q tests

## Lint and type checks (what CI runs after the tests): ruff (rules and format) and mypy over the packages.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check oracles sculpt tests benchmarks docs/examples
	$(VENV)/bin/ruff format --check oracles sculpt
	$(VENV)/bin/mypy

## Apply the formatter and the safe lint fixes.
format: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix oracles sculpt tests benchmarks docs/examples
	$(VENV)/bin/ruff format oracles sculpt

## The main job: recover a default planted layer with the embedded solvers (runtime dependencies only).
recover: $(VENV)/.installed-runtime
	$(VENV)/bin/sculpt recover --d 8 --k 4 --m 2 --samples 20000 --seed 0 --out results/recover

## Benchmarks (tables to stdout, JSON under results/).
bench: $(VENV)/.installed
	$(PY) benchmarks/engine.py --out results/engine.json
	$(PY) benchmarks/recovery.py --out results/bench --plots

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
