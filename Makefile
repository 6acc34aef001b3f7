# The two commands of the README:
#   make book   set up .venv, reproduce the study on this machine at its default grids, build the HTML book
#   make test   set up .venv if needed, run the test suite
# DEVICE=cuda picks the GPU for `make book`; QUICK=1 shrinks every grid.
# Two more:
#   make html        render the committed pages only, in a lean .venv-book (requirements/book.txt:
#                    jupyter-book, no torch or TensorFlow); `make book` renders with the full .venv instead
#   make wheelhouse  download into wheelhouse/ the wheels an offline GPU node lacks to run
#                    `lstmstudy measure` (keras, namex, optree; CPython 3.12, manylinux x86_64 by default)

# Bytecode is written (into git-ignored __pycache__/ folders): where PYTHONDONTWRITEBYTECODE is set (this project's
# CI) every process the suite and the book start would compile the package again, and pytest would rewrite every
# test module again in each worker (6 s a worker).
unexport PYTHONDONTWRITEBYTECODE

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVICE ?= auto
QUICK ?=
# the environment `make html` renders with: the lean one by default, the full one under `make book`
BOOK_VENV ?= .venv-book
BOOK_BIN := $(BOOK_VENV)/bin
# what an offline GPU node lacks (it has torch, numpy, pandas, h5py, ml-dtypes, rich...; see README)
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORMS ?= manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
# keras 3.15.1, pinned: releases of spring 2026 sent the torch backend's cuDNN LSTM silently to its Python loop
# (keras-team/keras#22470, fixed by #22874), and a newer one has not been rehearsed on the node's torch
WHEELS ?= keras==3.15.1 namex optree
WHEELHOUSE ?= wheelhouse

.PHONY: install browser book reproduce html test clean wheelhouse

install: $(STAMP) browser

# torch==2.13.0 first, with pip: where a CPU wheel of it is on local disk (this project's CI) pip takes it,
# so the dependency below is already satisfied and no CUDA build is downloaded. The rest (the `study` extra:
# TensorFlow, Jupyter Book, some 200 packages, pinned where the study needs it) goes in with uv, which installs them in a quarter of pip's time; it keeps the
# torch it finds, as pip would. Unlike pip, uv writes no bytecode unless told: where PYTHONDONTWRITEBYTECODE
# is set (this project's CI) every process would then compile Keras, TensorFlow and pandas from source again,
# some 5 s each, and the test suite starts dozens of them.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet torch==2.13.0 'uv>=0.5'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[study,test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# tests/test_browser.py opens the built book in Debian's Chromium. Installed from apt where it is
# missing and this is a root shell with apt (CI's container); elsewhere install it yourself, or the
# browser test fails and says so.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	  else \
	    echo "note: chromium is missing and cannot be installed here (needs root and apt-get); tests/test_browser.py will fail" >&2; \
	  fi; }

# reproduce, then render with the full .venv that reproduce needed anyway
book: reproduce
	$(MAKE) html BOOK_VENV=$(VENV)

reproduce: $(STAMP)
	$(BIN)/lstmstudy reproduce --device $(DEVICE) $(if $(QUICK),--quick)

# The pages are notebooks already executed, so rendering needs only jupyter-book; the package goes in
# without its dependencies, for the `lstmstudy` command (which needs only PyYAML to check the pages).
ifeq ($(BOOK_VENV),$(VENV))
BOOK_STAMP := $(STAMP)
else
BOOK_STAMP := $(BOOK_VENV)/.installed
$(BOOK_STAMP): requirements/book.txt pyproject.toml
	$(PYTHON) -m venv $(BOOK_VENV)
	$(BOOK_BIN)/python -m pip install --quiet --upgrade pip
	$(BOOK_BIN)/python -m pip install --quiet -r requirements/book.txt
	$(BOOK_BIN)/python -m pip install --quiet --no-deps -e .
	touch $@
endif

html: $(BOOK_STAMP)
	$(BOOK_BIN)/lstmstudy book

# Wheels only, no dependencies beyond the list: the node has the rest (README, "Measure on an offline
# GPU node"). Emptied first, so that `pip install wheelhouse/*.whl` never meets two versions of one package.
wheelhouse:
	rm -rf $(WHEELHOUSE)
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version $(WHEEL_PYTHON) \
	  --implementation cp $(addprefix --platform ,$(WHEEL_PLATFORMS)) -d $(WHEELHOUSE) $(foreach w,$(WHEELS),'$(w)')
	@ls -1 $(WHEELHOUSE); du -sh $(WHEELHOUSE)

# The suite on up to 4 pytest-xdist workers; then, on a CPU with AVX-512, the tests marked `isa` again with
# oneDNN capped at AVX2, as on a CPU without it (most laptops, Zen 2/3 servers), so that a machine with AVX-512
# catches what would fail there. The variable takes effect only where it is set before oneDNN starts: hence a
# second run. On a CPU without AVX-512 the first run already was that run.
PYTEST_WORKERS ?= -n auto --maxprocesses 4 --dist worksteal
test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_WORKERS)
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  echo "ONEDNN_MAX_CPU_ISA=AVX2: the tests marked isa again, as on a CPU without AVX-512"; \
	  ONEDNN_MAX_CPU_ISA=AVX2 $(BIN)/python -m pytest $(PYTEST_WORKERS) -m isa; \
	else \
	  echo "this CPU has no AVX-512: the run above was the AVX2 run of the tests marked isa"; \
	fi

clean:
	rm -rf _build
