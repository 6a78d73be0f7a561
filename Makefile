# Two entry points: `make demo` (install + run the main job) and `make test` (install + tests).
# GPU users: make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.darwin-installed

.PHONY: install demo test lint bench clean

install: $(STAMP)

# Re-installs only when pyproject.toml changes, so both targets are idempotent.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_SPEC)
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/darwin eval --agent oracle --phones 8 --tasks base8 --episodes 2
	$(BIN)/darwin eval --agent random --phones 8 --tasks base8 --episodes 2

test: install
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/darwin bench sim

clean:
	rm -rf $(VENV) build dist *.egg-info runs .pytest_cache .ruff_cache
