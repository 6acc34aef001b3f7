# The two commands of the README:
#   make book   set up .venv, reproduce the study on this machine at its default grids, build the HTML book
#   make test   set up .venv if needed, run the test suite
# DEVICE=cuda picks the GPU for `make book`; QUICK=1 shrinks every grid.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVICE ?= auto
QUICK ?=

.PHONY: install book reproduce html test clean

install: $(STAMP)

# torch==2.13.0 first: where a CPU wheel of it is on local disk (this project's CI) pip takes it,
# so the dependency below is already satisfied and no CUDA build is downloaded.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

book: reproduce html

reproduce: $(STAMP)
	$(BIN)/lstmstudy reproduce --device $(DEVICE) $(if $(QUICK),--quick)

html: $(STAMP)
	$(BIN)/lstmstudy book

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf _build
