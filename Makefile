# SimOps: `make demo` runs the main job, `make test` runs the test suite. Each one sets the
# machine up by itself (virtualenv, pinned requirements, editable packages, colcon build),
# and a second run only redoes what changed.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGES := $(sort $(wildcard src/*/setup.py))
REQS_STAMP := $(VENV)/.requirements.stamp
EDITABLE_STAMP := $(VENV)/.editable.stamp
PYTEST_ARGS ?=

.PHONY: help demo test build lint docs clean

help:
	@echo "make demo   run the SimOps demo (sets everything up first)"
	@echo "make test   build, lint and run the tests (sets everything up first)"
	@echo "make build  set up .venv and colcon-build the workspace"
	@echo "make docs   regenerate the parameter tables in docs/interfaces.md"
	@echo "make clean  remove .venv, build/, install/, log/"

demo: build
	$(BIN)/simops-demo

test: build lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(REQS_STAMP)
	$(BIN)/ruff check .

docs: $(EDITABLE_STAMP)
	$(BIN)/python -c 'import pathlib, simops_core.parameter_schema as s; \
		p = pathlib.Path("docs/interfaces.md"); p.write_text(s.with_tables(p.read_text()))'

build: $(EDITABLE_STAMP)
	$(BIN)/colcon --log-base log build --base-paths src --symlink-install \
		--event-handlers console_cohesion- summary+ 2>&1 | tail -n 3

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "SimOps needs Python >= 3.10 (found $$($(PYTHON) --version))"; exit 1; }
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
		{ echo "Python's venv module is missing; installing python3-venv"; \
		  apt-get update -qq && apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)

$(REQS_STAMP): requirements.txt requirements-python.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	@touch $@

$(EDITABLE_STAMP): $(REQS_STAMP) $(PACKAGES)
	$(BIN)/python -m pip install --quiet --no-deps $(addprefix -e ,$(dir $(PACKAGES)))
	@touch $@

clean:
	rm -rf $(VENV) build install log
