# `make book` builds the HTML book; `make test` runs every check CI runs. Both set up .venv first.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv book test unit notebooks clean

venv: $(STAMP)

# Re-install whenever requirements.txt or pyproject.toml changes.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (posenc)" > /dev/null
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build --all -W -n --keep-going . || { cat _build/html/reports/*.log 2>/dev/null; exit 1; }
	@echo "Open _build/html/index.html"

unit: $(STAMP)
	$(BIN)/python -m pytest --doctest-modules posenc tests

notebooks: $(STAMP)
	$(BIN)/python -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider notebooks/

# tests/test_notebook_sources.py (in `unit`) checks that every notebook is stripped and in _toc.yml.
test: unit notebooks book

clean:
	rm -rf _build
