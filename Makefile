# `make book` builds the HTML book; `make test` runs every check CI runs. Both set up .venv first.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Builds stamp this date (not the clock) into anything dated, so two builds of a commit are identical.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH

.PHONY: venv book test lint unit notebooks bench check-gpu check-configs check-engines check-operators favicon check-site check-reproducible check-portable check-seeds \
	check-position-from-content clean

venv: $(STAMP)

# Re-install whenever requirements.txt, pyproject.toml or book/pyproject.toml (the book's helpers) changes.
$(STAMP): requirements.txt pyproject.toml book/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (posenc)" > /dev/null
	touch $(STAMP)

# ipykernel flushes stdout on a 0.2 s timer; a flush that lands inside one print() splits a line across two
# stream outputs, and MyST-NB's stream merging then renders a blank line that another build does not have.
# During `make` builds (POSENC_WHOLE_CELL_STREAMS=1) the kernel flushes stdout at the end of each cell only.
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.py
export POSENC_WHOLE_CELL_STREAMS := 1
$(KERNEL_CONFIG): Makefile $(STAMP)
	mkdir -p $(dir $@)
	printf '%s\n' \
	  '# Written by the Makefile: see the comment above KERNEL_CONFIG there.' \
	  'import os' \
	  'if os.environ.get("POSENC_WHOLE_CELL_STREAMS") == "1":' \
	  '    c.IPKernelApp.exec_lines = ["__import__(\"ipykernel.iostream\").iostream.OutStream.flush_interval = 3600.0"]' \
	  > $@

# Every build starts from an empty _build/html (no page of an older build survives), and records which sources it
# built (tests/check_reproducible.py --print-state) so that check-reproducible can take it as its first build.
book: $(STAMP) $(KERNEL_CONFIG)
	rm -rf _build/html _build/jupyter_execute _build/.doctrees _build/source-state
	state=$$($(BIN)/python tests/check_reproducible.py --print-state); \
	$(BIN)/jupyter-book build --all -W -n --keep-going . || { cat _build/html/reports/*.log 2>/dev/null; exit 1; }; \
	printf '%s\n' "$$state" > _build/source-state
	@echo "Built _build/html: serve it with $(BIN)/python -m http.server -d _build/html, then open http://localhost:8000 (search needs a server)"

# ruff (configured in pyproject.toml; notebooks/ruff.toml formats chapters to 80 columns), then mypy, strict,
# over the library (pyproject.toml, [tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check posenc _posenc_pytestplugin.py book/posenc_book tests notebooks book/draw_favicon.py book/_ext
	$(BIN)/ruff format --check posenc _posenc_pytestplugin.py book/posenc_book tests notebooks book/draw_favicon.py book/_ext
	$(BIN)/mypy posenc _posenc_pytestplugin.py

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 --doctest-modules posenc book/posenc_book tests

notebooks: $(STAMP) $(KERNEL_CONFIG)
	$(BIN)/python -m pytest -n 2 --dist loadfile --nbval-lax --nbval-current-env -p no:cacheprovider notebooks/

# Time posenc.sinusoidal and posenc.nn.RotaryEmbedding against the usual implementations (about two minutes;
# not part of `test`). The benchmark is one of the book's helpers, book/posenc_book/bench.py.
bench: $(STAMP)
	$(BIN)/python -m posenc_book.bench

# posenc.nn on a CUDA GPU, in one run that writes _build/check-gpu.md (book/posenc_book/bench_gpu.py): parity in
# float32 and bfloat16, no host reads or synchronisations, a tiny Llama with posenc's rotary, torch.compile,
# FlexAttention at 16k and 64k tokens, and timings against transformers, Liger-Kernel and flash-attn (those two
# where installed). A few minutes on one H100; not part of `test` or CI. Without a CUDA GPU it says so and exits 0
# (`$(BIN)/python -m posenc_book.bench_gpu --device cpu` runs the parts that do not need CUDA on the CPU).
check-gpu: $(STAMP)
	$(BIN)/python -m posenc_book.bench_gpu --out _build/check-gpu.md

# The differential sweep (tests/config_sweep.py): every census class of transformers, each key its modeling code
# reads changed one at a time, posenc's plan against the tiny model built from the same config.json
# (tests/rope_oracle.py); writes book/posenc_book/config_sweep.json (versions, date, the hash of posenc's reading
# code, one row per case), which is committed and which tests/test_config_sweep.py (in `unit`) refuses when stale.
# Two worker processes; not part of `test` or CI.
check-configs: $(STAMP)
	$(BIN)/python tests/config_sweep.py

# Chapter 17's engines whose install does not fit `make test` (requirements-engines.txt: ONNX Runtime GenAI's model
# builder, vLLM's CPU build), in a virtual environment of their own (.venv-engines: requirements.txt, then these
# without their dependencies' pins); runs every case of the parity matrix in them and GPT-OSS's truncate question,
# and writes book/data/engines.json (committed; chapter 17 shows it, tests/test_engines.py refuses a stale one).
ENGINES_VENV := .venv-engines
ENGINES_STAMP := $(ENGINES_VENV)/.installed
$(ENGINES_STAMP): requirements.txt requirements-engines.txt pyproject.toml book/pyproject.toml
	test -x $(ENGINES_VENV)/bin/python || $(PYTHON) -m venv $(ENGINES_VENV)
	$(ENGINES_VENV)/bin/python -m pip install --quiet -r requirements.txt
	$(ENGINES_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-engines.txt
	touch $(ENGINES_STAMP)

check-engines: $(ENGINES_STAMP)
	$(ENGINES_VENV)/bin/python -m posenc_book.engines.run

# The engines and operators that need more than requirements.txt and are not in .venv-engines, in a virtual
# environment of their own (.venv-extra-engines: requirements.txt, then requirements-extra-engines.txt without their
# dependencies): keras-hub for check-operators.
EXTRA_VENV := .venv-extra-engines
EXTRA_STAMP := $(EXTRA_VENV)/.installed
$(EXTRA_STAMP): requirements.txt requirements-extra-engines.txt pyproject.toml book/pyproject.toml
	test -x $(EXTRA_VENV)/bin/python || $(PYTHON) -m venv $(EXTRA_VENV)
	$(EXTRA_VENV)/bin/python -m pip install --quiet -r requirements.txt
	$(EXTRA_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-extra-engines.txt
	touch $(EXTRA_STAMP)

# posenc's conformance suite (posenc.testing.rotary_cases, float32 and float16, both layouts) against four standard
# rotary operators: ONNX's RotaryEmbedding (opset 23) and com.microsoft.RotaryEmbedding on ONNX Runtime's CPU
# provider, MLX's fast.rope, keras-hub's RotaryEmbedding on Keras's JAX backend. Writes book/data/operators.json
# (committed; chapter 17 shows it, tests/test_engines.py refuses a stale one). 469 s on the loaded machine.
check-operators: $(EXTRA_STAMP)
	KERAS_BACKEND=jax $(EXTRA_VENV)/bin/python -m posenc_book.engines.operators

# Redraw the site's icon, book/site_root/favicon.ico (committed; tests/test_favicon.py checks it matches).
favicon: $(STAMP)
	$(BIN)/python book/draw_favicon.py

# tests/test_notebook_sources.py (in `unit`) checks that every notebook is stripped and in _toc.yml.
test: lint unit notebooks book

# The built book in Debian's headless Chromium (/usr/bin/chromium; see README.md): first the checker's own
# tests on a tiny broken site, then every page of _build/html (run `make book` or `make test` before).
check-site: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -m browser tests/test_site_check.py
	$(BIN)/python tests/site_check.py

# Two builds must give identical pages, notebook outputs and figure bytes: make book's build when it is of the
# sources as they are now (as in CI, right after make test), and one fresh build; otherwise two fresh builds.
check-reproducible: $(STAMP) $(KERNEL_CONFIG)
	$(BIN)/python tests/check_reproducible.py

# The unit tests and every chapter again with NumPy's and PyTorch's kernels capped at AVX2, then at the x86-64
# baseline (levels below this processor's only): results that hold on one processor only fail here. About
# 5 minutes per level on 2 cores; not part of CI (see tests/check_portable.py).
check-portable: $(STAMP) $(KERNEL_CONFIG)
	$(BIN)/python tests/check_portable.py

# Chapter 16's claims about schemes, over nine training seeds (and the spread of its own seed under four perturbations):
# trains every model of the chapter ten more times and rewrites book/data/position_from_content.json, which the
# chapter reads and tests/test_content_position.py refuses when stale. About 10 minutes on 2 cores; not part of `test`.
check-position-from-content: $(STAMP)
	$(BIN)/python -m posenc_book.content_position --out book/data/position_from_content.json

# Every claim chapters 5, 9 and 12 make about a scheme, a chain or every seed, on nine training seeds (0-8):
# each chapter's code once per seed, each bound held by every seed with three standard deviations over the
# seeds of margin. Writes book/data/seed_claims.md (committed; tests/test_seed_claims.py, in `unit`, refuses it when
# the chapters' code has changed since) and fails if a claim does not hold. About 20 minutes on 2 cores; not
# part of `test` or CI (tests/check_seeds.py).
check-seeds: $(STAMP) $(KERNEL_CONFIG)
	$(BIN)/python tests/check_seeds.py

clean:
	rm -rf _build
