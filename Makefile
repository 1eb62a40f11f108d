# Tensor Fences. Two commands do all the set-up: `make book` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
# The reference torch, read from its one home (fencecheck/releases.py, REFERENCE).
# An unpinned torch lets pip pick a multi-GB CUDA build.
REFERENCE := $(shell $(PYTHON) -c 'import fencecheck.releases as r; print(r.REFERENCE)')
TORCH  ?= torch==$(or $(REFERENCE),$(error cannot read REFERENCE from fencecheck/releases.py with $(PYTHON)))
# Where pip looks for it first. Empty: the indexes pip is configured with (on PyPI
# alone, the reference torch is the CUDA build, which runs on the CPU too). For the CPU
# build from PyTorch's index: TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
EXTRAS ?= test,site,matrix
BIN    := $(VENV)/bin
# The stamp names what was asked for: another TORCH, index or extras reinstalls.
WANTED := $(TORCH) $(TORCH_INDEX) $(EXTRAS)
STAMP  := $(VENV)/.installed-$(shell printf '%s' '$(WANTED)' | cksum | cut -d' ' -f1)

.PHONY: help book live test matrix matrix-report mutate check-site check-site-tools pdf bench clean ci ci-book

help:
	@echo "make book        build the site into _build/html, executing every fence"
	@echo "make live        preview the site while you write: rebuilt and reloaded in the browser"
	@echo "                 on each save (http://127.0.0.1:8000; LIVE_PORT= for another port)"
	@echo "make test        run every chapter's fences and the tests of the tooling under pytest"
	@echo "make matrix      run every fence on each supported torch release; writes results/ and"
	@echo "                 _build/matrix-report.md (RELEASES=\"2.8.0 newest\" runs some)"
	@echo "make matrix-report  the change report for results/ as it is, against git HEAD"
	@echo "make mutate      change what each fence expects, one change at a time; each must fail"
	@echo "                 (tools/mutate.py; writes mutate-results.json; reuses its outcomes"
	@echo "                 for unchanged fences, MUTATE_ARGS=--fresh runs every mutant)"
	@echo "make check-site  open every built page in headless Chromium and check it"
	@echo "make pdf         print the built site to _build/html/tensor-fences.pdf and check it"
	@echo "make bench       time the verify loop against its floor (benchmarks/bench.py)"
	@echo "make clean       remove _build (keeps .venv)"
	@echo "make ci          what CI runs (.ci/run, and the jobs of .github/workflows/verify.yml):"
	@echo "                 ci-book (test mutate book check-site pdf), then matrix"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
	    '$(TORCH)' -e '.[$(EXTRAS)]'
	@rm -f $(VENV)/.installed-*
	@echo '$(WANTED)' > $@

# What the site is made from. With none of it newer than the last good build,
# `make book` has nothing to do. The torch install and the venv's package
# folder count too: upgrading torch, numpy or myst-nb makes the site stale.
HTML   := _build/html
SITE   := $(HTML)/index.html
INPUTS := _config.yml _toc.yml $(wildcard book/*.md fences/*.py fencecheck/*.py fencecheck/*.js \
          fencecheck/upstream/*.py fencecheck/upstream/*.js results/*.json _static/*) \
          $(wildcard mutate-results.json) \
          $(wildcard $(VENV)/lib/python3*/site-packages) \
          $(wildcard $(VENV)/lib/python3*/site-packages/torch/version.py)

book: $(SITE)

# Execute once, read many: a chapter runs only when the execution cache lacks its run,
# and it runs under the test plugin, which stores it there, as `make test` does; the site
# renders the stored runs (the build itself starts those runs: fencecheck.sphinx
# _run_lacking, in the one Sphinx process). A failing fence stops the build, named, and
# the site is left as it was.
# The site is built into a private folder ($(PRIVATE), Sphinx's incremental state with
# it) and published to $(HTML) only when the build succeeds: a failed or stopped build
# leaves the last good site, and Sphinx's environment is removed, so the next build
# reads every page again (it would not repeat the warnings of pages it does not read
# again; the pages and the wheel it wrote are kept). A chapter taken out of the book loses
# its pages (fencecheck.sphinx sweeps them).
# -n: nitpicky, -W: every warning is an error, --keep-going: report them all.
# Ctrl-C or SIGTERM (make passes it to this shell) stops the build and everything it
# started: with job control (set -m) each step runs in a process group of its own,
# which the trap ends whole (a kernel, in a session of its own, ends when its parent does).
PRIVATE ?= _build/.site
BUILT   := $(PRIVATE)/_build/html
DOCTREES = $(PRIVATE)/_build/.doctrees
$(SITE): $(STAMP) $(INPUTS)
	set -m; step=; \
	    stop() { trap - INT TERM; kill -TERM -- $${step:+-$$step} 2>/dev/null; \
	             wait; rm -rf $(DOCTREES); echo "make book: stopped" >&2; exit 130; }; \
	    trap stop INT TERM; \
	    $(BIN)/python -m fencecheck.preflight . & step=$$!; wait $$step || exit 2; \
	    mkdir -p $(PRIVATE); \
	    FENCES_WORKERS='$(WORKERS)' $(BIN)/jupyter-book build . --path-output $(PRIVATE) -n -W --keep-going & step=$$!; \
	    built=0; wait $$step || built=$$?; \
	    if [ $$built -ne 0 ]; then rm -rf $(DOCTREES); exit $$built; fi; \
	    rm -rf $(HTML).new $(HTML).old; cp -a $(BUILT) $(HTML).new; \
	    if [ -e $(HTML) ]; then mv $(HTML) $(HTML).old; fi; \
	    mv $(HTML).new $(HTML); rm -rf $(HTML).old
	@test -f $@ && touch $@

# A live preview for authors: sphinx-autobuild with the build's own Sphinx configuration
# (jupyter-book writes it as conf.py, here into _build/live/, its paths made absolute).
# Each rebuild first runs the chapters the execution cache lacks through the test
# plugin, as `make book` does, so the preview renders the same stored runs. Warnings are
# shown, not fatal: the preview is for writing; `make book` is the check.
LIVE_PORT ?= 8000
live: $(STAMP)
	@$(BIN)/python -c "import sphinx_autobuild" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[live]' '$(TORCH)'
	mkdir -p _build/live
	$(BIN)/jupyter-book config sphinx . >/dev/null
	sed -e "s#'_static#'$(CURDIR)/_static#g" -e "s#'_toc.yml'#'$(CURDIR)/_toc.yml'#" conf.py > _build/live/conf.py
	rm conf.py
	$(BIN)/sphinx-autobuild . _build/live/html -c _build/live --port $(LIVE_PORT) \
	    --ignore '$(CURDIR)/_build/*' --ignore '$(CURDIR)/.git/*' --ignore '*.ipynb'

# Every chapter runs in a fresh kernel of its own, here as in CI and the matrix.
# One worker per core; a chapter's cells stay on one worker (one kernel). A chapter whose
# run the execution cache holds is read back, not executed, and so is a costly proof of the
# tooling under an unchanged key (tests/conftest.py: proven); FRESH=1 runs every one.
WORKERS ?= -n auto --dist loadscope
test: $(STAMP)
	$(BIN)/python -m pytest $(WORKERS) $(if $(FRESH),--fences-fresh) $(PYTEST_ARGS)

# nox makes the release environments with uv, from one shared cache (noxfile.py).
# The arguments and results/ are checked first: a typo installs nothing.
matrix: $(STAMP)
	$(BIN)/python tools/matrix.py --check $(RELEASES)
	$(BIN)/python tools/matrix.py $(RELEASES)

matrix-report: $(STAMP)
	$(BIN)/python tools/matrix.py --report-only

# Every fence re-run with one expectation changed at a time; a change that passes
# (survives) and is not justified in mutate-allowlist.yml fails. CHAPTERS=book/x.md for one.
# Outcomes recorded in mutate-results.json are reused for fences whose code, the cells
# before them, torch, the packages and the tool are unchanged; MUTATE_ARGS=--fresh runs all.
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py $(MUTATE_ARGS) $(CHAPTERS)
	$(BIN)/python tools/gate_lifted.py $(CHAPTERS)

# Debian's chromium, driven by Playwright for Python (no browser download); axe-core
# comes inside axe-playwright-python for the accessibility audit.
check-site-tools: $(STAMP)
	@test "$${CHROMIUM:-}" = bundled || test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@$(BIN)/python -c "import pytest_playwright, axe_playwright_python, pypdf, uv" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[check-site]' '$(TORCH)'

check-site: check-site-tools
	TORCH='$(TORCH)' TORCH_INDEX='$(TORCH_INDEX)' $(BIN)/python -m pytest tests/site --site _build/html

# The whole book as one PDF, printed by the same Chromium, linked from the landing page.
pdf: $(SITE) check-site-tools
	$(BIN)/python tools/pdf.py _build/html

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf _build

# The one CI definition: .ci/run runs `make ci`; the workflow's book job runs `make ci-book`
# and its matrix jobs `make matrix RELEASES=<one of tools/matrix.py --list>` (tests/test_ci.py).
# Sequential: each step reads what the one before built.
ci-book:
	$(MAKE) test
	$(MAKE) mutate
	$(MAKE) book
	$(MAKE) check-site
	$(MAKE) pdf

# Each chapter executes at most twice on the reference torch: once for the tests and the
# site (one stored run), once as the downloaded notebook (fencecheck.cachekey --executions).
ci:
	@mkdir -p _build && date -u +%Y-%m-%dT%H:%M:%S > _build/.ci-started
	$(MAKE) ci-book
	$(MAKE) matrix
	$(BIN)/python -m fencecheck.cachekey --executions "$$(cat _build/.ci-started)" 2
