# Two commands: `make run` starts the app at http://localhost:8501, `make test` runs every check.
# `make check` is the fast tier (no browser, no model, no long run); `make mutants` plants known bugs and reports
# how many the fast tier catches (docs/mutants.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Three pytest workers on two cores: a browser test waits on Chromium and the app's server more than it computes,
# and a third worker fills those waits (the suite 15 min 51 s against 17 min 08 s with two, docs/benchmarks.md).
WORKERS ?= 3
FAST := not browser and not models and not slow
# The numeric tests' second pass: MKL's and oneDNN's most conservative code paths and torch's plainest kernels, so
# that a tolerance only one CPU's rounding meets fails here, on whatever machine runs it (tests/numerics.py). The
# real models' comparisons measure float32's rounding on each run (assert_like_reference): they need no second pass.
# Nor do the learning tests (marker `learns`): they assert what runs learn across seeds, not a rounding, and under
# the plainest kernels their runs take six times as long; `make learns-plain` runs them so.
CONSERVATIVE := MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 DNNL_MAX_CPU_ISA=SSE41

.PHONY: run test test-random check lint mutants learns-plain install install-dev bench bench-all decks

# `make run MODEL=path` adds one's own model to the Real model page: a folder (config, safetensors, tokenizer) or a
# .gguf file of any family transformers reads (docs/user-guide.md).
# A checkout from before the pages moved to app_pages/ may keep pages/__pycache__ (git leaves ignored files behind),
# and a folder named pages/ starts Streamlit in its older multipage mode (app_pages/__init__.py): it goes.
run: install
	rm -rf pages/__pycache__ && { rmdir pages 2>/dev/null || true; }
	$(if $(MODEL),ATTENTION_MODEL_DIRS="$(abspath $(MODEL))$${ATTENTION_MODEL_DIRS:+:$$ATTENTION_MODEL_DIRS}") \
		$(BIN)/streamlit run app.py --server.port 8501

test: lint
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup
	$(CONSERVATIVE) $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup -m "numeric and not models and not learns"

# The whole suite in a shuffled order (pytest-randomly; the seed is printed: `make test-random SEED=N` repeats one).
test-random: lint
	$(BIN)/python -m pytest -p randomly $(if $(SEED),--randomly-seed=$(SEED)) -n $(WORKERS) --dist loadgroup

check: lint
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup -m "$(FAST)"

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile

learns-plain: install-dev
	$(CONSERVATIVE) $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup -m learns

# Every shipped deck as one HTML file that opens without the server (app_pages/decks/export.py), in build/decks/:
# for a lecture hall's laptop without Python, or a course's web site (docs/user-guide.md).
decks: install
	mkdir -p build/decks
	for deck in decks/*.json; do \
		$(BIN)/python -m app_pages.decks.export $$deck build/decks/$$(basename $$deck .json).html || exit 1; done

mutants: install-dev
	$(BIN)/python scripts/mutants.py

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-nodeps.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -r requirements-nodeps.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# axe-core, the accessibility engine the browser tests inject (tests/test_accessibility.py), pinned in package-lock.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# `make bench` measures what the README's performance table says (a knob's step on every page against the yardstick,
# opening the app, 30 sessions at once, 60 students following a lecturer, a 4,096-token text, heads knocked out and
# patched) and writes that table (bench/perf_table.py, with the machine and the commit); `make bench-all` adds every other figure of docs/benchmarks.md.
bench: install-dev
	$(BIN)/python bench/bench_loop.py
	$(BIN)/python bench/bench_open.py
	$(BIN)/python bench/load.py --sessions 30 --waves 5 --record
	$(BIN)/python bench/bench_class.py --followers 60 --decks 2 --record
	$(BIN)/python bench/bench_long_page.py
	$(BIN)/python bench/bench_long_step.py
	$(BIN)/python bench/bench_patch.py
	$(BIN)/python bench/bench_deck_file.py
	$(BIN)/python bench/perf_table.py

bench-all: bench
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_models.py
	$(BIN)/python bench/bench_browser.py
	$(BIN)/python bench/bench_repaint.py
	$(BIN)/python bench/bench_isolation.py
	$(BIN)/python bench/bench_training.py
	$(BIN)/python bench/bench_scrub.py
	$(BIN)/python bench/bench_variants.py
	$(BIN)/python bench/bench_decoding.py
	$(BIN)/python bench/bench_reading.py
	$(BIN)/python bench/load.py --per-page --sessions 10,15,20,30 --waves 2
