# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# UV=/path/to/uv (CI sets it): install the same pins with uv, which is several times faster than pip.
ifdef UV
PIP := $(UV) pip install --quiet --python $(BIN)/python --compile-bytecode -c constraints.txt
else
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
endif
RUNTIME := $(VENV)/.runtime-installed
TOOLCHAIN := $(VENV)/.installed

.PHONY: setup clients test test-all lint docs demo bench matrix clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What the demo needs: the plugin and LiteLLM's proxy.
$(RUNTIME): pyproject.toml constraints.txt | $(BIN)/python
	@echo "Installing litellm-governance and LiteLLM's proxy into $(VENV) (first run only, about a minute) ..."
	$(PIP) -e . 'litellm[proxy]'
	touch $(RUNTIME)

# What the tests need on top: pytest, Hypothesis, ruff, mypy, import-linter, and MkDocs for the docs site.
$(TOOLCHAIN): $(RUNTIME)
	@echo "Installing the test toolchain into $(VENV) ..."
	$(PIP) -e '.[test,docs]'
	touch $(TOOLCHAIN)

setup: $(TOOLCHAIN)

# The real agent CLIs the end-to-end suite drives (Claude Code and Codex, pinned with their lock file
# in tests/clients): `npm ci` from the npm registry, once per change of the lock, and only when asked
# (`make clients`: `make test` stays offline). Without them the real-client tests skip, saying why
# (CI runs `make clients` and requires them).
CLIENTS := tests/clients/node_modules/.installed
$(CLIENTS): tests/clients/package.json tests/clients/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		echo "Installing the pinned agent CLIs into tests/clients (npm ci) ..."; \
		cd tests/clients && npm ci --no-audit --no-fund && touch node_modules/.installed; \
	else \
		echo "NOTE: npm not found: the real-client tests will skip (install nodejs and npm, then make clients)"; \
	fi

clients: $(CLIENTS)

lint: setup
	$(BIN)/ruff check litellm_governance tests bench examples docs/generate.py
	$(BIN)/ruff format --check litellm_governance tests bench examples docs/generate.py
	$(BIN)/mypy
	$(BIN)/lint-imports  # import contracts: pyproject.toml [tool.importlinter]
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet  # the docs site (mkdocs.yml, docs/): a broken link or page fails

# The whole suite, in parallel (pytest-xdist: one worker per CPU; the real-client runs share one),
# offline: the real-client tests run once `make clients` installed the CLIs, and skip until then.
test: lint
	$(BIN)/python -m pytest -n auto

# Before a release: `make test`, then the whole suite on every matrix entry (CI runs only each
# entry's own share: the tests that touch LiteLLM's API, or the unit tests and a proxy smoke test).
test-all: test
	MATRIX_FULL=1 ./.ci/matrix

# Regenerate the docs' generated pages from the code (docs/generate.py), then build the site into site/.
# tests/test_docs.py fails while a committed generated page is stale.
docs: setup
	$(BIN)/python docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

demo: $(RUNTIME)
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python examples/demo.py

# Every benchmark a target reads, in one run (about 6 minutes on 2 CPUs, offline): bench/results.json,
# and the table of docs/benchmarks.md rendered from it (tests/test_bench_smoke.py fails while it is stale).
bench: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python bench/run.py

# Other LiteLLM versions and Pythons, each entry its own share of the suite (see .ci/matrix; CI runs it).
# Every entry replays the test sessions built from the pinned LiteLLM in .venv, hence the dependency.
matrix: $(RUNTIME)
	./.ci/matrix

clean:
	rm -rf $(VENV) site .ci-venvs .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .hypothesis .demo tests/clients/node_modules
