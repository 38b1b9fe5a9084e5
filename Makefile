# llmdash: dashboards-as-code for LLM serving. `make demo` and `make test` set everything up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
LLMDASH := $(BIN)/llmdash

.PHONY: help install deps dashboards check lint test test-stack test-unit test-e2e time-tests mutate demo publish diff layout bench-detect bench-cost bench-rules bench-build grafana-schemas clean

help:
	@echo "make help          this list"
	@echo "make install       create .venv and install llmdash with its test dependencies"
	@echo "make deps          install Debian's prometheus, mtail, prometheus-alertmanager, victoria-metrics if missing; build the current stack"
	@echo "make demo          build, simulate a KV-cache collapse on a local Prometheus, write out/demo/*.png"
	@echo "make test          drift check of generated/, ruff, and the test suite on Debian's stack (real servers included)"
	@echo "make test-stack    the current stack's share of the suite, which make test leaves out (.ci/run runs both)"
	@echo "make test-unit     the tests marked neither e2e, publish nor process (no real server, no llmdash process), < 1 min"
	@echo "make lint          ruff over the whole tree (part of make test)"
	@echo "make test-e2e      only the tests against a real Prometheus / promtool on simulated data"
	@echo "make mutate        named mutants of rules, fleet, Prometheus 3 text, redaction, manifest vs the unit tests (WRITE=1: docs/testing.md)"
	@echo "make time-tests    time make test-unit and make test against their budgets (WRITE=1: docs/testing.md)"
	@echo "make check         fail when generated/ is stale (llmdash build --check)"
	@echo "make dashboards    rebuild generated/ (commit the result)"
	@echo "make publish       push the dashboards to Grafana (GRAFANA_URL, GRAFANA_TOKEN; PUBLISH_FLAGS=...)"
	@echo "make diff          semantic diff of dashboards and rules against the merge base with main"
	@echo "make layout        picture of a dashboard grid, old vs new (ENGINE=vllm)"
	@echo "make bench-detect  detection delay (seeds 1-4), false firings vs naive baselines, live page delay per backend -> docs/benchmarks/bench-detect.md"
	@echo "make bench-cost ANCHOR=FILE  one dashboard load (20, 200 instances; 3 h, 24 h) vs vLLM's overview -> docs/benchmarks/bench-cost.md (FLEET=200x24h: that load only)"
	@echo "make bench-rules   what each rule group costs a Prometheus at 20, 200, 1000 replicas -> docs/benchmarks/bench-rules.md"
	@echo "make bench-build   start-up and build time of the llmdash command (5 runs) -> docs/benchmarks/bench-build.md"
	@echo "make grafana-schemas  regenerate dashboards/grafana_schema/ from @grafana/schema (needs node + npm)"
	@echo "make clean         remove out/ and .pytest_cache"

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# The real servers the demo and the tests run: installed when missing (as root or with passwordless sudo),
# else one line saying what to install. .ci/run runs the same script.
deps:
	@bash .ci/install-deps

dashboards: install
	$(LLMDASH) build

check: install
	$(LLMDASH) build --check

lint: install
	$(BIN)/ruff check .

# Three workers on two cores, one test file each at a time, the longest first (files sharing an expensive session
# fixture in one worker: tests/conftest.py SAME_WORKER); a third worker keeps the cores busy while the Alertmanager
# tests wait for notifications (docs/testing.md#time-budgets, with how long it takes on the 2-core machine).
PYTEST := $(BIN)/pytest -q -n 3 --dist loadfile

test: deps check lint
	$(PYTEST) -m "not stack_leg"

test-stack: deps install
	$(PYTEST) -m stack_leg

test-unit: install
	$(PYTEST) -m unit

test-e2e: deps install
	$(PYTEST) -m e2e

# Not part of `make test` (its run time: docs/testing.md#mutation-score): each mutant runs its unit tests in a
# temporary copy of the tree.
WRITE ?=
mutate: install
	$(BIN)/python -m tests.mutation.mutants $(if $(WRITE),--write)

# Times `make test-unit` and `make test` as a user runs them; WRITE=1 puts the figures into docs/testing.md.
time-tests: deps install
	$(BIN)/python -m tests.budget $(if $(WRITE),--write)

demo: deps install
	$(LLMDASH) demo --out out/demo

PUBLISH_FLAGS ?=
# make reports any failing recipe as exit 2, so say which of llmdash's codes it was.
publish: install
	@$(LLMDASH) publish $(PUBLISH_FLAGS) || { code=$$?; \
	echo "llmdash publish exited $$code (1 refused, 2 usage/config, 3 Grafana/network); make itself exits 2" >&2; \
	exit $$code; }

MAIN_BRANCH ?= main
DIFF_ARGS ?=
# In this source a code change is what a review wants to see, so each side is built with its own code:
# `make install` has already run this checkout's code, and the merge base is main's.
diff: install
	@base=$$(git merge-base HEAD $(MAIN_BRANCH)) || { echo "error: no merge base with $(MAIN_BRANCH)" >&2; exit 2; }; \
	$(LLMDASH) diff $$base HEAD --build-with-revision-code $(DIFF_ARGS) || test $$? -eq 1

ENGINE ?= vllm
layout: install
	$(LLMDASH) layout $(ENGINE) --base $$(git merge-base HEAD $(MAIN_BRANCH)) --build-with-revision-code \
		--out out/layout-$(ENGINE).png

bench-detect: install
	$(LLMDASH) bench-detect

# vLLM's own overview dashboard, the reference bench-cost measures against (llmdash ships no copy of it)
ANCHOR ?=
# FLEET: only these loads, e.g. FLEET=200x24h (every load by default)
FLEET ?=
bench-cost: install
	@test -n "$(ANCHOR)" || { echo "make bench-cost needs ANCHOR=<path to vLLM's overview dashboard JSON>" >&2; exit 2; }
	$(LLMDASH) bench-cost --anchor "$(ANCHOR)" $(foreach f,$(FLEET),--fleet $(f))

bench-rules: install
	$(LLMDASH) bench-rules

bench-build: install
	$(BIN)/python -m llmdash.lab.bench_build

# npm is needed only here; the schemas are committed, so tests and builds never need it.
grafana-schemas:
	dashboards/grafana_schema/regenerate.sh

clean:
	rm -rf out .pytest_cache
