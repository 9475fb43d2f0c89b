# The two quick-start commands: `make run` (the main job) and `make test` (the whole suite).
# Each creates the virtual environment it needs in .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
RESULTS ?= results

.PHONY: run test lint bench docs screenshots browser postgres clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,dask,numgen,lake]'
	touch $(STAMP)

## run: the built-in sweep (the three baselines, every manifold), then NumGen on synthetic stimuli
## (no weights needed), both into $(RESULTS)/numerate.duckdb
run: $(STAMP)
	$(BIN)/numerate run --db $(RESULTS)/numerate.duckdb
	$(BIN)/numerate numgen run --generator synthetic --detector blobs \
		--db $(RESULTS)/numerate.duckdb --images-dir $(RESULTS)/numgen

## browser: Chromium from Debian's packages, for numerate view's browser tests (Playwright drives
## it; it never downloads a browser of its own). Needs root for apt-get; without it those tests
## are skipped and say how to install it.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ echo "installing Chromium (apt-get install chromium) for the browser tests"; \
		  apt-get install -y -q chromium >/dev/null 2>&1 || \
		  echo "warning: could not install Chromium: numerate view's browser tests will be skipped"; }

## postgres: PostgreSQL from Debian's packages, for the results lake's tests (tests/postgres.py starts
## and stops a server of their own on a free loopback port). Needs root for apt-get; without it
## those tests are skipped and say how to install it.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ echo "installing PostgreSQL (apt-get install postgresql) for the lake's tests"; \
		  { apt-get install -y -q postgresql >/dev/null 2>&1 || \
		    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q postgresql >/dev/null 2>&1; }; } || \
		  echo "warning: could not install PostgreSQL: the results lake's tests will be skipped"; }

## test: lint, the import contract (layers), the type check, then the whole test suite (what CI runs).
## The suite runs on $(TEST_WORKERS) pytest-xdist workers (most tests wait on processes and servers:
## three fill two cores) while mypy checks the types beside it; it ends with the 15 slowest tests,
## so that growth shows at every landing. One folder while developing: docs/architecture.md.
## Python's bytecode (and pytest's rewritten tests) is cached in __pycache__ folders (ignored by git)
## even where PYTHONDONTWRITEBYTECODE is set: the suite starts some 300 Python processes, and each
## would compile numerate's modules again (about 0.25 s of CPU each).
TEST_WORKERS ?= 3
test: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP) browser postgres
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@$(BIN)/mypy > .mypy.log 2>&1 & mypy=$$!; \
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=15; tests=$$?; \
	wait $$mypy; typed=$$?; echo "mypy: $$(tail -n 1 .mypy.log)"; \
	if [ $$typed -ne 0 ]; then cat .mypy.log; fi; rm -f .mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

## docs: the documentation site (docs/, mkdocs.yml) into site/, offline; a broken link or anchor
## fails it (`make test` builds it too: tests/test_docs.py)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## screenshots: numerate view's pages in a real browser (the browser tests), into docs/images/
screenshots: $(STAMP) browser
	NUMERATE_SCREENSHOTS=docs/images $(BIN)/pytest -q tests/view/test_browser.py

## bench: generation throughput per manifold, pipeline throughput and caching, sweeps of 3,000 to
## 300,000 cases (time and memory), rate limits,
## start-up of `numerate run`, requests saved by adaptive sampling, many users of one database,
## numerate view's pages on a million answers, the analyses of a run of a million answers,
## NumGen images through an Images API
bench: $(STAMP)
	$(BIN)/python bench/generate.py
	$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/checkpoints.py
	$(BIN)/python bench/rate_limit.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/adaptive.py
	$(BIN)/python bench/sampling_design.py
	$(BIN)/python bench/contention.py
	$(BIN)/python bench/view.py
	$(BIN)/python bench/analysis.py
	$(BIN)/python bench/numgen_api.py

clean:
	rm -rf $(VENV) $(RESULTS) site .pytest_cache .ruff_cache .mypy_cache .mypy.log .import_linter_cache .hypothesis
