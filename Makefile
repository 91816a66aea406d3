# The two quick-start commands: `make demo` and `make test`. Each sets up .venv on its own.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch comes from the index pip is set up with (PyPI by default), where Linux gets the CUDA
# build (several GB). TORCH_INDEX names another index for torch alone, for the CPU-only
# build: make TORCH_INDEX=https://download.pytorch.org/whl/cpu test. Empty by default, so a
# machine that reaches only its package index installs as before. README "Installing PyTorch".
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: setup test test-gpu test-kernels lint demo tutorial browser bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

# -rs prints each skipped test's reason (a missing GPU, extra or browser), which pytest's
# default summary leaves out.
test: setup
	$(BIN)/python -m pytest -rs

# Only the tests marked `cuda`: the CPU suite's oracles (cached decoding, batched beam, bf16
# training, resume, torchrun, the commands' --device) on the GPU. They need a CUDA build of
# torch (PyPI's on Linux; README "Installing PyTorch"); without CUDA each skips, saying why.
test-gpu: setup
	$(BIN)/python -m pytest -m cuda -rs

# The tests that train and bound what a model learns (marked convergence: the tutorial's
# training chapters among them) once more on torch's AVX2 kernels: torch picks its CPU
# kernels by instruction set, their rounding differs, and a bound that holds on one CPU kind
# must hold on every kind. On an AVX-512 machine `make test` runs the AVX-512 kernels, and
# this the AVX2 ones.
test-kernels: setup
	ATEN_CPU_CAPABILITY=avx2 $(BIN)/python -m pytest -m convergence

# Hygiene: ruff's lint rules and formatting, then mypy; their settings are in pyproject.toml.
lint: setup
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/mypy

demo: setup
	$(BIN)/transformer-lab demo

# The tutorial's chapters (docs/tutorial/*.py and zh/*.py, jupytext percent format) written as
# notebooks into build/tutorial/ (git-ignored) and executed there; the docs extra is in dev.
# Chapter 5 reads what `transformer-lab download multi30k` and `download couplets` put in the
# data folder ($TRANSFORMER_LAB_DATA, else ~/.cache/transformer_lab/data).
tutorial: setup
	$(BIN)/python docs/make_tutorial.py --out build/tutorial

# The browser test's Chromium and chromedriver, and a CJK font for figures (Debian's
# packages), installed when missing and where we may (root and apt-get); .ci/run calls it
# before the tests. Without them their tests skip and say why; a failed install does not
# stop the tests.
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		echo "browser: chromium and chromedriver are installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing chromium and chromium-driver from Debian"; \
		( export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq chromium chromium-driver ) \
			|| echo "browser: apt-get failed; the browser test will skip"; \
	else \
		echo "browser: chromium or chromedriver missing and not installable here (needs root and apt-get); the browser test will skip"; \
	fi
	@# A CJK font for the Chinese text of figures (transformer_lab/lab/fonts.py); its test skips without one.
	@if fc-list 2>/dev/null | grep -qi "CJK"; then \
		echo "browser: a CJK font is installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing fonts-noto-cjk from Debian"; \
		( export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq fonts-noto-cjk || \
			{ apt-get update -qq && apt-get install -y -qq fonts-noto-cjk; } ) \
			|| echo "browser: apt-get failed; figures draw Chinese text as boxes and the font test skips"; \
	fi

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
