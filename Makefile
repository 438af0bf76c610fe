# One way to do things: the README, pre-commit and .ci/run all call these targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PARALLEL ?= -n 4 --dist loadfile
UV_VERSION := 0.13.9
# The suite starts hundreds of Python processes (test processes, workers, gateways, CLIs): each
# keeps the bytecode it compiles (in .venv and the tree's __pycache__, which git ignores), even
# where the shell sets PYTHONDONTWRITEBYTECODE; without it every one compiles its imports again
# and pytest rewrites every test module in every test process (collection 10.5 CPU s, not 4.8).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test test-container container-images check lint unit integration schemas bench bench-scaling bench-latency bench-failover bench-deep bench-group clean

## Install what is missing: Chromium (apt), the virtual environment, the locked packages. The
## system part (apt, npm ci) runs beside the environment's build: neither needs the other.
setup:
	@bash scripts/ensure-system.sh & system=$$!; \
	built=0; $(MAKE) --no-print-directory $(STAMP) || built=$$?; \
	ensured=0; wait $$system || ensured=$$?; \
	[ $$built -eq 0 ] && [ $$ensured -eq 0 ]

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

## The main job: a broker, a worker and the sample site; one request followed to its end.
demo: setup
	$(BIN)/crawlstream demo

## Everything CI checks: lint, types, schemas in sync, unit and integration tests.
## Four test processes sharing one broker (tests/support/shared_broker.py): with three, a fifth
## of the two cores stayed idle while tests waited out session timeouts and outages; four keep
## them 89% busy (docs/development.md). Each test module runs in one process
## (its module-scoped worker is started once); the modules holding `long_running` tests go
## out first, so the run does not end on a long one. Lint runs beside the tests: it fails the
## target all the same, and its seconds fill the cores while the broker starts.
test: setup
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	suite=0; $(BIN)/pytest -q $(PARALLEL) || suite=$$?; \
	linted=0; wait $$lint || linted=$$?; cat $(VENV)/lint.log; \
	echo "pytest: exit $$suite; lint: exit $$linted"; \
	[ $$suite -eq 0 ] && [ $$linted -eq 0 ]

## The container lane (docs/containers.md): an engine (started here when none answers), the
## base images made from Debian's packages and the official Kafka jars when no registry serves
## them, the image from ./Dockerfile, then docker-compose.yml's services and the image by hand
## (tests/deploy/test_container.py, which skips outside this lane). Run as root. LANE_ARGS go
## to pytest, e.g. LANE_ARGS="-k kill" for the tests of a `docker kill` (and their fixtures).
test-container: setup
	bash scripts/container/lane.sh $(LANE_ARGS)

## The container lane's steps 1-3 only: the engine, the base images and the project's image
## (`.ci/run` builds them before the suite starts, so a first build does not load its run).
container-images: setup
	LANE_BUILD_ONLY=1 bash scripts/container/lane.sh

## The fast lane for every change: lint, types and the unit tests (no broker, no browser).
check: setup lint
	$(BIN)/pytest -q -n 2 tests/unit

lint: setup
	$(BIN)/ruff check service tests bench
	$(BIN)/ruff format --check service tests bench
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests/unit

integration: setup
	$(BIN)/pytest -q $(PARALLEL) tests/integration

schemas: setup
	$(BIN)/crawlstream schemas

bench: setup
	$(BIN)/python bench/throughput.py

## 1, 2 and 3 workers on a latency-bound site over many hosts (render http): one big request,
## 48 random-ID requests, a deep crawl over 10 hosts; the per-host peak at the site.
bench-scaling: setup
	$(BIN)/python bench/scaling.py

## p50/p95 of a 1-URL request end to end against a bare Playwright page load, in one run.
bench-latency: setup
	$(BIN)/python bench/latency.py

## Duplicates, re-runs and lost work when workers die, leave or join (also a coordinator and a
## fetcher of split roles), and across a 60 s broker outage.
bench-failover: setup
	$(BIN)/python bench/failover.py

## A deep crawl against a list crawl of the same 300 pages; the seen set's memory per URL.
bench-deep: setup
	$(BIN)/python bench/deep_crawl.py

## Workers started together: seconds until they hold every request partition, 10 tries each.
bench-group: setup
	$(BIN)/python bench/group_formation.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
