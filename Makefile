# The two set-up commands of the README. Both create the virtualenv if it is
# missing and (re)install the package when setup.py changes. Python 3.11, or
# else 3.10 (a Cloud TPU VM's): the TF 2.15 stack, both engines; else 3.13 or
# 3.12 (on PATH or a pyenv version): the newest TF, the distribute engine
# (setup.py picks the stack by Python). The first that runs (a pyenv shim may
# exist without its interpreter). PYTHON_VERSIONS=3.12 narrows the search;
# PYTHON=python3.12 (a name) is found the same way, PYTHON=/path is taken
# as it is.

# The interpreters that run among the names $(1), in order: each one as on
# PATH, then as a pyenv version's (pythonX.Y: $(pyenv root)/versions/X.Y*/bin).
runnable = $(shell for p in $(1); do \
	for c in $$p $$(ls -d $$(pyenv root 2>/dev/null)/versions/$$(echo $$p | \
	sed -n 's/^python//p')*/bin/$$p 2>/dev/null); do \
	$$c -c '' 2>/dev/null && echo $$c; done; done)
PYTHON_VERSIONS ?= 3.11 3.10 3.13 3.12
PYTHON ?= $(or $(firstword $(call runnable,$(addprefix python,$(PYTHON_VERSIONS)))),python3.11)
ifeq ($(findstring /,$(PYTHON)),)
override PYTHON := $(or $(firstword $(call runnable,$(PYTHON))),$(PYTHON))
endif
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_DIR ?= runs/digits_search

export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export TF_CPP_MIN_LOG_LEVEL ?= 3

$(PY):
	@$(PYTHON) -c '' 2>/dev/null || { echo "PYTHON=$(PYTHON) does not run (not \
	on PATH, nor a pyenv version: \`pyenv versions\`)"; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; print("Python %d.%d: %s" % (v + ((\
	  "TensorFlow 2.15, engines estimator (default) and distribute",) if v < (3, 12) else \
	  ("the newest TensorFlow, engine distribute (no tf.estimator there)",))))'
	$(PYTHON) -m venv $(VENV)

# Fills the virtualenv whose python is $(1) with the package and its test
# extra. INSTALLER=uv (the default): pip installs uv into the virtualenv,
# and uv installs the rest: the same versions as pip resolves (`pip freeze`
# compared), in ~10 s against pip's ~35 s on 2 cores (parallel downloads,
# files linked from its cache, the bytecode compiled on every core;
# bench/DECISIONS.md). uv reads its own index settings (UV_INDEX_URL,
# UV_EXTRA_INDEX_URL, uv.toml), not pip.conf: behind a mirror that only pip
# is told of, INSTALLER=pip.
INSTALLER ?= uv
install = case "$(INSTALLER)" in \
	uv) echo "Installing into $(1) with uv (INSTALLER=pip: pip)" && \
	  $(1) -m pip install --quiet uv && \
	  $(dir $(1))uv pip install --quiet --compile-bytecode --python $(1) \
	    -e '.[test]' ;; \
	pip) echo "Installing into $(1) with pip" && \
	  $(1) -m pip install --quiet --upgrade pip && \
	  $(1) -m pip install --quiet -e '.[test]' ;; \
	*) echo "INSTALLER=$(INSTALLER): not an installer here (uv or pip)"; \
	  exit 2 ;; esac

$(STAMP): setup.py | $(PY)
	@$(call install,$(PY))
	touch $(STAMP)

# Two worker processes (whole files per worker: a file's tests share their
# set-up; the slowest files first, in tests/conftest.py's order, which
# --no-loadscope-reorder keeps), the 20 slowest tests listed at the end.
# Figures: docs/testing.md. Most of the time is graph building in short
# searches.
PYTEST_FLAGS ?= -n 2 --dist loadfile --no-loadscope-reorder --durations=20
# `make test`: the whole suite on this machine's stack, then the tests that
# compare two code paths' numbers (marker `numerics`) again under the
# kernels this machine does not use by default (oneDNN's or Eigen's:
# tests/testing/other_kernels.py): other summation orders, as another CPU
# would give, so that a tolerance fitted to one CPU fails here and not on
# somebody else's machine. `make test-all` (what CI runs) adds the newest
# TensorFlow's run where the first stack was TF 2.15 (`test-newtf`, under
# the other kernels, without the `tf_free` tests, which exercise nothing of
# TensorFlow and ran on the first stack) and the Python 3.10 check.

.PHONY: test test-all test-newtf check-py310 search clean-venv

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_FLAGS)
	@kernels=$$($(PY) -m tests.testing.other_kernels) && \
	echo "The numerics tests again, with $$kernels:" && \
	env $$kernels $(PY) -m pytest -q -m numerics $(PYTEST_FLAGS)

test-all: test
	@tf215=$$($(PY) -c 'import sys; print(int(sys.version_info < (3, 12)))') && \
	if [ $$tf215 = 1 ] && [ -n "$(PYNEW)" ]; then \
	  kernels=$$($(PY) -m tests.testing.other_kernels) && \
	  echo "The suite on the newest TensorFlow ($(PYNEW)), with $$kernels:" && \
	  env $$kernels $(MAKE) --no-print-directory test-newtf; \
	elif [ $$tf215 = 1 ]; then \
	  echo "No Python 3.13 or 3.12 here: the newest-TF stack not tested"; fi
	@$(MAKE) --no-print-directory check-py310

# The newest TensorFlow (2.16+, which has no tf.estimator) on Python 3.13, or
# else 3.12 (on PATH or a pyenv version), in its own virtualenv: setup.py
# picks that stack there. Everything runs on the distribute engine; the tests
# of the Estimator engine (marker `estimator`) are skipped, saying 'needs
# tf.estimator (TF <= 2.15)'.
PYNEW ?= $(firstword $(call runnable,python3.13 python3.12))
VENVNEW ?= .venv-newtf
STAMPNEW := $(VENVNEW)/.installed

$(STAMPNEW): setup.py
	@test -n "$(PYNEW)" || { echo "test-newtf: this machine has no Python \
	3.13 or 3.12 (on PATH or a pyenv version)"; exit 1; }
	test -x $(VENVNEW)/bin/python || $(PYNEW) -m venv $(VENVNEW)
	@$(call install,$(VENVNEW)/bin/python)
	touch $(STAMPNEW)

test-newtf: $(STAMPNEW)
	$(VENVNEW)/bin/python -m pytest -q -m 'not tf_free' $(PYTEST_FLAGS)

# Python 3.10, a Cloud TPU VM's Python, where this machine has one (on PATH,
# or a pyenv version): the package in its own virtualenv, an 8-step search
# and its extraction, and the fast tests (the TPU resolution, signal and
# run-lock tests among them). Says so and passes where there is
# none. `test-all` (CI) runs it after `test`.
PY310 ?= $(firstword $(call runnable,python3.10))
VENV310 ?= .venv310

check-py310:
	@if [ -z "$(PY310)" ]; then \
	  echo "check-py310: skipped, this machine has no Python 3.10"; exit 0; fi; \
	set -e; echo "check-py310: $(PY310) ($$($(PY310) --version))"; \
	test -x $(VENV310)/bin/python || $(PY310) -m venv $(VENV310); \
	$(call install,$(VENV310)/bin/python); \
	dir=$$(mktemp -d); \
	$(VENV310)/bin/python -m tunas_tf.train_search --model_dir=$$dir/search \
	  --max_steps=8 --train_batch_size=16 --rl_delay_steps_fraction=0.5 \
	  --tpu_iterations_per_loop=2 --save_checkpoints_steps=4; \
	$(VENV310)/bin/python -m tunas_tf.tools.extract_architecture \
	  --model_dir=$$dir/search; \
	rm -rf $$dir; \
	$(VENV310)/bin/python -m pytest -q -n 2 --dist loadfile tests/search_space \
	  tests/controller tests/cost_model tests/layers tests/graph \
	  tests/runtime/cloud_tpu_test.py tests/runtime/preemption_test.py \
	  tests/runtime/run_lock_test.py

# The offline demo: digits, digits_search, its MACs model and rule target.
# Running it again resumes (or, when finished, only re-extracts).
search: $(STAMP)
	$(PY) -m tunas_tf.train_search --model_dir=$(RUN_DIR) $(SEARCH_FLAGS)
	$(PY) -m tunas_tf.tools.extract_architecture --model_dir=$(RUN_DIR)
	$(PY) -m tunas_tf.tools.report --model_dir=$(RUN_DIR)
	@echo "Searched architecture: $(RUN_DIR)/architecture.json; report: $(RUN_DIR)/report.png ($(RUN_DIR)/report.html)"

clean-venv:
	rm -rf $(VENV)
