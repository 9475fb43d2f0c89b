# The two quick-start commands: `make run` (the main job) and `make test` (the whole suite).
# Each creates the virtual environment it needs in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
RESULTS ?= results

.PHONY: run test lint bench docs clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,dask,numgen]'
	touch $(STAMP)

## run: the built-in sweep (the three baselines, every manifold), then NumGen on synthetic stimuli
## (no weights needed), both into $(RESULTS)/numerate.duckdb
run: $(STAMP)
	$(BIN)/numerate run --db $(RESULTS)/numerate.duckdb
	$(BIN)/numerate numgen run --generator synthetic --detector blobs \
		--db $(RESULTS)/numerate.duckdb --images-dir $(RESULTS)/numgen

## test: lint, the import contract (layers), the type check, then the whole test suite (what CI runs)
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest

## docs: the documentation site (docs/, mkdocs.yml) into site/, offline; a broken link or anchor
## fails it (`make test` builds it too: tests/test_docs.py)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## bench: generation throughput per manifold, pipeline throughput and caching, rate limits,
## start-up of `numerate run`, requests saved by adaptive sampling, many users of one database
bench: $(STAMP)
	$(BIN)/python bench/generate.py
	$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/rate_limit.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/adaptive.py
	$(BIN)/python bench/sampling_design.py
	$(BIN)/python bench/contention.py

clean:
	rm -rf $(VENV) $(RESULTS) site .pytest_cache .ruff_cache .mypy_cache .import_linter_cache .hypothesis
