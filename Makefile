# Tensor Fences. Two commands do all the set-up: `make book` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
# The reference torch: the CPU wheel. An unpinned torch lets pip pick a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tensor-fences-installed

.PHONY: help book test matrix mutate check-site bench clean

help:
	@echo "make book        build the site into _build/html, executing every fence"
	@echo "make test        run every chapter's fences and the tests of fences/ under pytest"
	@echo "make matrix      run every fence on each supported torch release; writes results/"
	@echo "make mutate      change what each fence expects, one change at a time; each must fail"
	@echo "                 (tools/mutate.py; writes results/mutation.json)"
	@echo "make check-site  open every built page in headless Chromium and check it"
	@echo "make bench       time the verify loop against its floor (benchmarks/bench.py)"
	@echo "make clean       remove _build (keeps .venv)"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH) -e .
	@touch $@

# What the site is made from. With none of it newer than the last good build,
# `make book` has nothing to do. The torch install and the venv's package
# folder count too: upgrading torch, numpy or myst-nb makes the site stale.
SITE   := _build/html/index.html
INPUTS := _config.yml _toc.yml $(wildcard book/*.md fences/*.py results/*.json _static/*) \
          tools/preexecute.py $(wildcard $(VENV)/lib/python3*/site-packages) \
          $(wildcard $(VENV)/lib/python3*/site-packages/torch/version.py)

book: $(SITE)

# A build that fails leaves no index.html behind, so nothing half-built passes for done.
.DELETE_ON_ERROR:

# fences.cachekey drops what _build derived from execution when torch, the
# installed packages or fences/ changed; tools/preexecute.py then runs the
# uncached chapters in parallel into the cache that jupyter-book reads.
# -n: nitpicky, -W: every warning is an error, --keep-going: report them all.
$(SITE): $(STAMP) $(INPUTS)
	$(BIN)/python -m fences.cachekey _build
	$(BIN)/python tools/preexecute.py _build/.jupyter_cache
	$(BIN)/jupyter-book build . -n -W --keep-going
	@test -f $@ && touch $@

test: $(STAMP)
	$(BIN)/python -m pytest

matrix: $(STAMP)
	$(BIN)/python tools/matrix.py $(RELEASES)

# Every fence re-run with one expectation changed at a time; a change that passes
# (survives) and is not justified in mutate-allowlist.yml fails. CHAPTERS=book/x.md for one.
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py $(CHAPTERS)

# Debian's chromium, driven by Playwright for Python (no browser download).
check-site: $(STAMP)
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@$(BIN)/python -c "import playwright" 2>/dev/null || $(BIN)/python -m pip install --quiet playwright
	$(BIN)/python tools/check_site.py _build/html

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf _build
