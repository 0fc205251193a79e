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
JAZZY_VENV := .venv-jazzy
JBIN := $(JAZZY_VENV)/bin
JAZZY_REQS_STAMP := $(JAZZY_VENV)/.requirements.stamp
JAZZY_EDITABLE_STAMP := $(JAZZY_VENV)/.editable.stamp
JAZZY_INTERFACES_STAMP := $(JAZZY_VENV)/.interfaces.stamp
# Offscreen rendering of the cameras without a GPU: Mesa's EGL and software rasteriser.
GL_PACKAGES := libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6

.PHONY: help demo test test-jazzy build build-jazzy both-builds lint docs clean system-packages

help:
	@echo "make demo   run the SimOps demo (sets everything up first)"
	@echo "make test   build, lint and run the tests, then the ROS tests on Jazzy (sets everything up)"
	@echo "make build  set up .venv and colcon-build the workspace"
	@echo "make docs   regenerate the parameter and exit-code tables in docs/interfaces.md"
	@echo "make clean  remove .venv, .venv-jazzy, build/, install/, log/ and their -jazzy twins"

demo: build
	$(BIN)/simops-demo

# The tests that touch ROS (`-m ros`: they start nodes and processes and time them) run one
# at a time, on Kilted and then on Jazzy; the others (physics, fitting, training, files, and
# the `ros_free` tests whose commands never import rclpy) run first on two workers
# (tests/run_legs.sh).
test: both-builds lint
	tests/run_legs.sh $(BIN) $(JBIN) $(PYTEST_ARGS)

# Both workspaces, side by side (two jobs, each one's output printed when it ends): most of a
# build is pip waiting on downloads and colcon compiling one distro's interfaces on one core.
both-builds:
	@echo "building the Kilted (.venv) and Jazzy (.venv-jazzy) workspaces side by side"
	@$(MAKE) --no-print-directory -j2 --output-sync=target build build-jazzy

lint: $(REQS_STAMP)
	$(BIN)/ruff check .

docs: $(EDITABLE_STAMP)
	$(BIN)/python -c 'import pathlib, simops_core.parameter_schema as s; \
		import simops_bringup.exit_code_table as e; p = pathlib.Path("docs/interfaces.md"); \
		p.write_text(e.with_exit_code_table(s.with_tables(p.read_text())))'

build: $(EDITABLE_STAMP) $(INTERFACES_STAMP)
	$(BIN)/colcon --log-base log build --base-paths src --symlink-install \
		--event-handlers console_cohesion- summary+ 2>&1 | tail -n 3

$(BIN)/python: | system-packages
	$(PYTHON) -m venv $(VENV)

# What the build needs from Debian: Python >= 3.10 with venv and its headers, a C++ compiler
# and CMake (the interface packages), and Mesa's EGL and software rasteriser (the cameras
# render headless with MUJOCO_GL=egl or osmesa, without a GPU). Checked once, before either
# venv is made; what is missing is installed in one apt-get (as root, or through sudo), so
# the Kilted and Jazzy builds never run apt-get side by side.
system-packages:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "SimOps needs Python >= 3.10 (found $$($(PYTHON) --version))"; exit 1; }
	@missing=""; \
	$(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
		missing="$$missing python3-venv"; \
	$(PYTHON) -c 'import os, sysconfig, sys; \
		sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' || \
		missing="$$missing python3-dev"; \
	command -v g++ >/dev/null && command -v cmake >/dev/null || missing="$$missing build-essential cmake"; \
	dpkg -s $(GL_PACKAGES) >/dev/null 2>&1 || missing="$$missing $(GL_PACKAGES)"; \
	[ -z "$$missing" ] || { echo "installing what the build needs from Debian:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; }

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
# franka_msgs), built with colcon into a venv, whose lib/ and site-packages the ROS wheels
# already put on the library and module paths, with the field set of the venv's distro.
# Only on this pip-only path: with a ROS 2 distro, rosdep installs the real packages and
# interfaces/ is not built (see interfaces/README.md).
# $(call interfaces,VENV,DISTRO): build them into VENV for DISTRO (kilted or jazzy).
define interfaces
	@started=$$(date +%s); \
	AMENT_PREFIX_PATH=$(abspath $(1)) CMAKE_PREFIX_PATH=$(abspath $(1)) \
	PATH=$(abspath $(1)/bin):$$PATH \
	$(1)/bin/colcon --log-base log/interfaces-$(2) build --base-paths interfaces \
		--build-base build/interfaces-$(2) --install-base $(1) --merge-install \
		--event-handlers console_cohesion- summary+ \
		--cmake-args -DCMAKE_PROJECT_INCLUDE=$(abspath interfaces/cmake/wheel_paths.cmake) \
		-DPYTHON_EXECUTABLE=$(abspath $(1)/bin/python) -DSIMOPS_ROS_DISTRO=$(2) \
		-DBUILD_TESTING=OFF 2>&1 | tail -n 3; \
	status=$${PIPESTATUS[0]}; \
	echo "interface packages ($(2)) built in $$(( $$(date +%s) - started )) s"; \
	exit $$status
	@touch $@
endef

$(INTERFACES_STAMP): $(REQS_STAMP) $(INTERFACE_FILES)
	$(call interfaces,$(VENV),kilted)

# The Jazzy leg: a second venv with the ROS 2 Jazzy wheels (franka_ros2 v3's distro), the
# interfaces with Jazzy's field set, and the workspace built into install-jazzy/. `make test`
# runs the tests that touch ROS (`-m ros`, tests/conftest.py) in it after the Kilted suite.
$(JBIN)/python: | system-packages
	$(PYTHON) -m venv $(JAZZY_VENV)

$(JAZZY_REQS_STAMP): requirements-jazzy.txt requirements-python.txt requirements-lerobot.txt \
		requirements-nodeps.txt | $(JBIN)/python
	$(JBIN)/python -m pip install --quiet --upgrade pip
	$(JBIN)/python -m pip install --quiet -r requirements-jazzy.txt -r requirements-lerobot.txt
	$(JBIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@touch $@

$(JAZZY_EDITABLE_STAMP): $(JAZZY_REQS_STAMP) $(PACKAGES)
	$(JBIN)/python -m pip install --quiet --no-deps $(addprefix -e ,$(dir $(PACKAGES)))
	@touch $@

$(JAZZY_INTERFACES_STAMP): $(JAZZY_REQS_STAMP) $(INTERFACE_FILES)
	$(call interfaces,$(JAZZY_VENV),jazzy)

build-jazzy: $(JAZZY_EDITABLE_STAMP) $(JAZZY_INTERFACES_STAMP)
	$(JBIN)/colcon --log-base log/jazzy build --base-paths src --symlink-install \
		--build-base build-jazzy --install-base install-jazzy \
		--event-handlers console_cohesion- summary+ 2>&1 | tail -n 3

# The Jazzy leg runs the tests that touch ROS and are not marked slow: the slow ones (60 s
# camera and lossless recordings, pick-and-place and parity through the graph, the dataset
# round trip, fr3_duo, the sysid stand-in) run on Kilted only, so the two ROS legs together
# take about 37 minutes on two cores.
test-jazzy: build-jazzy
	tests/run_legs.sh --jazzy $(JBIN) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(JAZZY_VENV) build install build-jazzy install-jazzy log
