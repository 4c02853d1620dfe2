# One command each, on a fresh machine: `make test` and `make demo` create the
# virtualenv and install everything they need by themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch, pinned: any other spec may pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# Ray Data for mlmkit.integrations.ray (tests/integrations/test_ray.py runs a local Ray cluster).
	$(PY) -m pip install -q -e '.[ray]' || echo "mlmkit[ray] could not be installed: tests/integrations/test_ray.py skips its Ray cluster test"
	# The browser test of mlmkit serve drives the system Chromium (Playwright's download is not reachable).
	@[ -x /usr/bin/chromium ] || ! command -v apt-get >/dev/null || (apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y chromium >/dev/null) || echo "chromium could not be installed: the browser test will fail (apt-get install chromium)"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports

test: lint
	# One worker more than cores: some tests wait on the processes they start. The browser
	# tests' screenshots are kept in artifacts/screenshots (CI's artefacts).
	MLMKIT_ARTIFACTS=$${MLMKIT_ARTIFACTS:-artifacts/screenshots} \
		$(PY) -m pytest tests -n $$(( $$(nproc) + 1 )) --dist loadgroup

demo: $(STAMP)
	$(VENV)/bin/mlmkit pretrain

bench: $(STAMP)
	$(PY) benchmarks/masking.py
	$(PY) benchmarks/scoring.py
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/pretrain.py

clean:
	rm -rf $(VENV) build *.egg-info
