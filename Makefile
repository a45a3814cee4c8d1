# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test lint demo bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

lint: setup
	$(BIN)/ruff check litellm_governance tests bench examples
	$(BIN)/ruff format --check litellm_governance tests bench examples
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

demo: setup
	$(BIN)/python examples/demo.py

bench: setup
	$(BIN)/python bench/run.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/proxy_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .demo
