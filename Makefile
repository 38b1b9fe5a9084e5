# llmdash: dashboards-as-code for LLM serving. `make demo` and `make test` set everything up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
LLMDASH := $(BIN)/llmdash

.PHONY: help install dashboards check test test-e2e demo publish diff layout bench-detect bench-cost bench-build clean

help:
	@echo "make demo          build, simulate a KV-cache collapse on a local Prometheus, write out/demo/*.png"
	@echo "make test          drift check of generated/ and the whole test suite (real Prometheus included)"
	@echo "make dashboards    rebuild generated/ (commit the result)"
	@echo "make publish       push the dashboards to Grafana (GRAFANA_URL, GRAFANA_TOKEN)"
	@echo "make diff          semantic diff of dashboards and rules against the merge base with main"
	@echo "make bench-detect  detection delay (min/median/max over seeds 1-4) and false firings of the alerts vs naive baselines"
	@echo "make bench-cost    samples and time of one dashboard load (20 and 200 instances) vs vLLM's overview dashboard"
	@echo "make bench-build   start-up and build time of the llmdash command (min and median of 5 runs)"

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

dashboards: install
	$(LLMDASH) build

check: install
	$(LLMDASH) build --check

test: check
	$(BIN)/pytest -q

test-e2e: install
	$(BIN)/pytest -q -m e2e

demo: install
	$(LLMDASH) demo --out out/demo

PUBLISH_FLAGS ?=
publish: install
	$(LLMDASH) publish $(PUBLISH_FLAGS)

MAIN_BRANCH ?= main
DIFF_ARGS ?=
diff: install
	@base=$$(git merge-base HEAD $(MAIN_BRANCH)) || { echo "error: no merge base with $(MAIN_BRANCH)" >&2; exit 2; }; \
	$(LLMDASH) diff $$base HEAD $(DIFF_ARGS) || test $$? -eq 1

ENGINE ?= vllm
layout: install
	$(LLMDASH) layout $(ENGINE) --base $$(git merge-base HEAD $(MAIN_BRANCH)) --out out/layout-$(ENGINE).png

bench-detect: install
	$(LLMDASH) bench-detect --out out/bench-detect.md

bench-cost: install
	$(LLMDASH) bench-cost --out out/bench-cost.md

bench-build: install
	$(BIN)/python -m llmdash.lab.bench_build

clean:
	rm -rf out .pytest_cache
