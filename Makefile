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

# The main job: SFT warm start (built once, cached in .darwin-cache), then PPO on 8 SimPhones.
demo: install
	$(BIN)/darwin run examples/spa_bench.py

# Two test processes (pytest-xdist): the suite is CPU-bound and the reference machine has 2 cores.
test: install
	$(BIN)/pytest -q -n 2

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/darwin bench sim

clean:
	rm -rf $(VENV) build dist *.egg-info runs .pytest_cache .ruff_cache .mypy_cache .mypy_tree
