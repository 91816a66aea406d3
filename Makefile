# The two quick-start commands: `make demo` and `make test`. Each sets up .venv on its own.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of PyTorch; see README "Installing PyTorch" for GPU machines.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup test demo bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

test: setup
	$(BIN)/python -m pytest

demo: setup
	$(BIN)/transformer-lab demo

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
