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
INTERFACES_STAMP := $(VENV)/.interfaces.stamp
INTERFACE_FILES := $(shell find interfaces -type f)
PYTEST_ARGS ?=
GL_STAMP := $(VENV)/.gl.stamp
# Offscreen rendering of the cameras without a GPU: Mesa's EGL and software rasteriser.
GL_PACKAGES := libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6

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

build: $(EDITABLE_STAMP) $(INTERFACES_STAMP) $(GL_STAMP)
	$(BIN)/colcon --log-base log build --base-paths src --symlink-install \
		--event-handlers console_cohesion- summary+ 2>&1 | tail -n 3

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "SimOps needs Python >= 3.10 (found $$($(PYTHON) --version))"; exit 1; }
	@$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
		{ echo "Python's venv module is missing; installing python3-venv"; \
		  apt-get update -qq && apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)

$(REQS_STAMP): requirements.txt requirements-python.txt requirements-lerobot.txt \
		requirements-nodeps.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-lerobot.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@touch $@

$(EDITABLE_STAMP): $(REQS_STAMP) $(PACKAGES)
	$(BIN)/python -m pip install --quiet --no-deps $(addprefix -e ,$(dir $(PACKAGES)))
	@touch $@

# The interface packages SimOps serves (interfaces/: control_msgs, controller_manager_msgs,
# franka_msgs), built with colcon into the venv, whose lib/ and site-packages the ROS wheels
# already put on the library and module paths. Only on this pip-only path: with a ROS 2 distro, rosdep installs
# the real packages and interfaces/ is not built (see interfaces/README.md).
$(INTERFACES_STAMP): $(REQS_STAMP) $(INTERFACE_FILES)
	@command -v g++ >/dev/null && command -v cmake >/dev/null || \
		{ echo "a C++ compiler and CMake are missing; installing build-essential cmake"; \
		  apt-get update -qq && apt-get install -y -qq build-essential cmake; }
	@$(BIN)/python -c 'import os, sysconfig, sys; \
		sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' || \
		{ echo "Python's headers are missing; installing python3-dev"; \
		  apt-get update -qq && apt-get install -y -qq python3-dev; }
	@started=$$(date +%s); \
	AMENT_PREFIX_PATH=$(abspath $(VENV)) CMAKE_PREFIX_PATH=$(abspath $(VENV)) \
	PATH=$(abspath $(BIN)):$$PATH \
	$(BIN)/colcon --log-base log/interfaces build --base-paths interfaces \
		--build-base build/interfaces --install-base $(VENV) --merge-install \
		--event-handlers console_cohesion- summary+ \
		--cmake-args -DCMAKE_PROJECT_INCLUDE=$(abspath interfaces/cmake/wheel_paths.cmake) \
		-DPYTHON_EXECUTABLE=$(abspath $(BIN)/python) -DBUILD_TESTING=OFF 2>&1 | tail -n 3; \
	status=$${PIPESTATUS[0]}; \
	echo "interface packages (control_msgs, controller_manager_msgs, franka_msgs) built in $$(( $$(date +%s) - started )) s"; \
	exit $$status
	@touch $@

# The cameras render headless with MUJOCO_GL=egl (or osmesa) on Mesa: installed from
# Debian's packages when missing (as root, or through sudo).
$(GL_STAMP): | $(BIN)/python
	@dpkg -s $(GL_PACKAGES) >/dev/null 2>&1 || \
		{ echo "Mesa's offscreen OpenGL is missing; installing $(GL_PACKAGES)"; \
		  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(GL_PACKAGES); }
	@touch $@

clean:
	rm -rf $(VENV) build install log
