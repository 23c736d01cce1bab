# All set-up happens here: a local virtual environment in .venv, the project installed into it.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
EXTRAS ?= test,lint,torch,dask,plot,bench

.PHONY: venv test lint format recover bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

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

## The main job: recover a default planted layer with the embedded solvers.
recover: $(VENV)/.installed
	$(VENV)/bin/sculpt recover --d 8 --k 4 --m 2 --samples 20000 --seed 0 --out results/recover

## Benchmarks (tables to stdout, JSON under results/).
bench: $(VENV)/.installed
	$(PY) benchmarks/engine.py --out results/engine.json
	$(PY) benchmarks/recovery.py --out results/bench --plots

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
