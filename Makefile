# Two commands set everything up: `make demo` and `make test`. Each creates .venv when missing
# and installs the pinned dependencies of requirements.lock; the second run skips the install.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fieldcheck-installed
# This machine keeps the CPU build of torch in /opt/wheels; elsewhere see docs/install.md.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test bench lint install clean postgresql

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -qq $(FIND_LINKS) -r requirements.lock
	$(PY) -m pip install --disable-pip-version-check -qq --no-deps --no-build-isolation -e .
# Byte-compiled once here: where PYTHONDONTWRITEBYTECODE is set, each process (and pool worker) would compile src again.
	$(PY) -m compileall -q src
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m fieldcheck._demo

# The browser tests drive Debian's Chromium (never a downloaded browser); installed when missing.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM):
	$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium

# The store tests also run on a real PostgreSQL server (pytest-postgresql starts it on loopback).
postgresql:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql)

test: $(STAMP) $(CHROMIUM) postgresql
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy
	$(PY) -m pytest -n 2

bench: $(STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info demo-out
