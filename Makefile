# The single entry for common tasks. `make run` and `make test` work on a fresh
# machine: they create .venv and install what they need first.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-serial test-fast test-slow test-stress bench bench-first-run e2e-deps bump-claude-code clean help

help:
	@echo "make run          start the worker in the foreground on the embedded defaults"
	@echo "make test         run the whole test suite on PYTEST_XDIST processes (default 3; installs everything it needs)"
	@echo "make test-serial  the same suite in one process, for debugging (= make test PYTEST_XDIST=0)"
	@echo "make test-slow    the slow tests too (the full LoCoMo and scale benchmarks as tests)"
	@echo "make test-stress  the suite RUNS times (default 5) in a row with every core kept busy"
	@echo "make bench        run the benchmarks (spine, session, LoCoMo, multilingual, branches, scale, team, search, context, staleness) and print figures"
	@echo "make bench-first-run  time a new user's first run (plugin install to first observation; downloads from PyPI)"
	@echo "make e2e-deps     install the two pinned Claude Code CLIs the end-to-end tests drive (oldest supported, newest)"
	@echo "make bump-claude-code  move the newest pinned Claude Code to npm's latest release (package.json + lock)"
	@echo "make clean        remove the virtual environment and caches"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	@echo "Memory Anchor: the worker runs in the foreground below (Ctrl-C stops it). Next, in another terminal:"
	@echo "  $(VENV)/bin/memory-anchor doctor       is memory working, and what fixes it if not"
	@echo "  $(VENV)/bin/memory-anchor viewer       open the web viewer"
	@echo "  $(VENV)/bin/memory-anchor briefing     what a Claude Code session started in this folder is told"
	@echo "  claude plugin marketplace add $(CURDIR) && claude plugin install memory-anchor@memory-anchor"
	@echo "                                         use it in Claude Code (README: Install the plugin)"
	$(VENV)/bin/memory-anchor worker run

# The end-to-end tests drive two real Claude Code CLIs, each pinned in its own folder
# (npm holds one version of a package per node_modules): the oldest the plugin
# supports and the newest release. npm ci leaves node_modules/.package-lock.json,
# so a pin is installed again only when its lock changed.
CLAUDE_CODE_PINS := tests/e2e/cli/oldest tests/e2e/cli/newest

e2e-deps: $(addsuffix /node_modules/.package-lock.json,$(CLAUDE_CODE_PINS))

tests/e2e/cli/%/node_modules/.package-lock.json: tests/e2e/cli/%/package-lock.json tests/e2e/cli/%/package.json
	cd tests/e2e/cli/$* && npm ci --no-audit --no-fund --loglevel=error
	touch $@

bump-claude-code:
	cd tests/e2e/cli/newest && npm install --save-exact --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@latest
	tests/e2e/cli/newest/node_modules/.bin/claude --version

# The suite runs on PYTEST_XDIST pytest-xdist processes (0: in pytest's own process, as
# `make test-serial` does). Much of a process's time is spent waiting on the processes it
# started (workers, hooks, the Claude Code CLI): on a quiet 2-core machine two pytest
# processes left the cores idle 10% of the run, three 6%. PYTEST_DIST picks how tests are
# shared out (docs/benchmarks.md: the runs behind both defaults).
PYTEST_XDIST ?= 3
PYTEST_DIST ?= worksteal
PYTEST_PARALLEL := -n $(PYTEST_XDIST) --dist $(PYTEST_DIST)

# Where the tests' temporary files go. They make and delete tens of thousands of files
# (virtual environments, plugin copies, data dirs, PostgreSQL databases): on an ext4 disk
# allocating their inodes took about 5% of the suite's CPU (perf), which a tmpfs does not
# pay. /dev/shm when it is writable and has 6 GB free (a run holds up to about 2 GB there; a
# container's default /dev/shm is 64 MB); TEST_TMPDIR= keeps the system's temporary directory.
TEST_TMPDIR ?= $(shell [ -w /dev/shm ] && [ "$$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $$4}')" -ge 6000000 ] 2>/dev/null && echo /dev/shm)
# Byte-code is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set
# on some machine images): otherwise every worker, hook and CLI a test starts compiles the
# project's modules again, about 0.4 s of CPU each time (measured on a clean clone).
TEST_ENV := $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) PYTHONDONTWRITEBYTECODE=
PYTEST := $(TEST_ENV) $(PY) -m pytest

test: $(STAMP) e2e-deps
	$(PYTEST) -q $(PYTEST_PARALLEL)

test-serial:
	$(MAKE) test PYTEST_XDIST=0

RUNS ?= 5
test-stress: $(STAMP) e2e-deps
	$(TEST_ENV) $(PY) -m tests.stress_suite $(RUNS) $(PYTEST_PARALLEL)

test-fast: $(STAMP)
	$(PYTEST) -q $(PYTEST_PARALLEL) -m 'not slow and not e2e'

test-slow: $(STAMP) e2e-deps
	$(PYTEST) -q $(PYTEST_PARALLEL) -m 'slow or not slow'

bench: $(STAMP) e2e-deps
	$(VENV)/bin/memory-anchor bench spine
	$(VENV)/bin/memory-anchor bench session
	$(VENV)/bin/memory-anchor bench locomo --data ../shared/bench/locomo-dev.json
	$(VENV)/bin/memory-anchor bench multilingual
	$(VENV)/bin/memory-anchor bench branches --memories 10000
	$(VENV)/bin/memory-anchor bench scale --n 100000
	$(VENV)/bin/memory-anchor bench team --n 20000
	$(VENV)/bin/memory-anchor bench search --n 20000
	$(VENV)/bin/memory-anchor bench context
	$(VENV)/bin/memory-anchor bench staleness

bench-first-run: $(STAMP) e2e-deps
	$(PY) -m tests.e2e.bench_first_run --cache both

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis tests/e2e/node_modules tests/e2e/cli/*/node_modules
