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

.PHONY: install browser book reproduce html test clean

install: $(STAMP) browser

# torch==2.13.0 first: where a CPU wheel of it is on local disk (this project's CI) pip takes it,
# so the dependency below is already satisfied and no CUDA build is downloaded.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
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
	    echo "note: chromium is missing and cannot be installed here (needs root and apt-get); tests/test_browser.py will fail"; \
	  fi; }

book: reproduce html

reproduce: $(STAMP)
	$(BIN)/lstmstudy reproduce --device $(DEVICE) $(if $(QUICK),--quick)

html: $(STAMP)
	$(BIN)/lstmstudy book

test: $(STAMP) browser
	$(BIN)/python -m pytest

clean:
	rm -rf _build
