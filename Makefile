# One command each, on a fresh machine: `make test` and `make demo` create the
# virtualenv and install everything they need by themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Two stamps, one virtualenv: `make demo` installs the core (and what the demo needs),
# `make test` adds the extras and the test tools to the same .venv; each installs again
# when pyproject.toml changes.
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install test lint demo bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The demo is `mlmkit pretrain`: the core, plus [plots], because the run the README
# describes writes plots/loss.png, accuracy.png, lr.png and TensorBoard events (without
# matplotlib and tensorboard it would train all the same, with a warning, and leave them
# out). No browser, no test tools.
$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	# The CPU build of torch, pinned: any other spec may pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[plots]'
	touch $(DEMO_STAMP)

# The tests: every extra (mlmkit[all]) and the test tools (mlmkit[dev]).
$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[serve,plots,finetune,docs,dev]'
	# Ray Data for mlmkit.integrations.ray (tests/integrations/test_ray.py runs a local Ray cluster): the
	# last extra of [all], installed on its own so that a machine without Ray wheels still tests.
	$(PY) -m pip install -q -e '.[all,dev]' || echo "mlmkit[ray] could not be installed: tests/integrations/test_ray.py skips its Ray cluster test"
	# The browser test of mlmkit serve drives the system Chromium (Playwright's download is not reachable).
	@[ -x /usr/bin/chromium ] || ! command -v apt-get >/dev/null || (apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y chromium >/dev/null) || echo "chromium could not be installed: the browser test will fail (apt-get install chromium)"
	touch $(TEST_STAMP)

install: $(TEST_STAMP)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports

test: lint
	# One worker more than cores: some tests wait on the processes they start. The browser
	# tests' screenshots are kept in artifacts/screenshots (CI's artefacts).
	MLMKIT_ARTIFACTS=$${MLMKIT_ARTIFACTS:-artifacts/screenshots} \
		$(PY) -m pytest tests -n $$(( $$(nproc) + 1 )) --dist loadgroup

demo: $(DEMO_STAMP)
	$(VENV)/bin/mlmkit pretrain

bench: $(TEST_STAMP)
	$(PY) benchmarks/masking.py
	$(PY) benchmarks/scoring.py
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/pretrain.py

clean:
	rm -rf $(VENV) build *.egg-info
