# One entry point for every developer task. Each target creates .venv if needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test lint typecheck check demo dashboard-demo screenshots docs bench bench-ab bench-queue clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## The test command of the README: a fresh clone needs nothing else. The package is
## byte-compiled first: where PYTHONDONTWRITEBYTECODE is set (as on CI) every process
## the tests start (the CLI, workers, process executors) would compile it again.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q src tests > /dev/null
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/lint-imports

## mypy --strict on the package and on tests/ (the files and flags: pyproject's [tool.mypy]).
typecheck: $(STAMP)
	$(BIN)/mypy

check: test lint typecheck

## The API reference and guides, warnings as errors (mkdocs.yml; the docs extra).
docs: $(STAMP)
	$(BIN)/python docs/gen_config_md.py
	$(BIN)/mkdocs build --strict

demo: $(STAMP)
	$(BIN)/python examples/demo.py

## A worker and the web dashboard on one SQLite file; prints the URL and the token.
dashboard-demo: $(STAMP)
	$(BIN)/python examples/dashboard_demo.py --serve $(DEMO_ARGS)

## Re-take the dashboard screenshots in docs/images (the browser tests take them).
screenshots: $(STAMP)
	CHONGMING_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest tests/web/test_browser.py tests/web/test_browser_gaps.py tests/web/test_browser_a11y.py -k sqlite -q

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/run.py $(BENCH_ARGS)

## The work queue's figures (docs/queue.md#performance): latency, throughput against
## procrastinate with 1/2/4 workers, recovery time. Needs PostgreSQL
## (CHONGMING_TEST_POSTGRES); QUEUE_BENCH_ARGS="--quick" for a short look.
bench-queue: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/queue_bench.py --json bench/results/queue-latest.json $(QUEUE_BENCH_ARGS)

## A/B gate against an earlier commit, both measured in one run, rounds interleaved:
## make bench-ab BASE=<rev> [AB_ARGS="--quick --rounds 1"] (docs/benchmarks.md).
bench-ab: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/ab.py $(if $(BASE),--base $(BASE)) $(AB_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist src/*.egg-info
