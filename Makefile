# Two commands: `make run` starts the app at http://localhost:8501, `make test` runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test install install-dev bench

run: install
	$(BIN)/streamlit run app.py --server.port 8501

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile
	$(BIN)/python -m pytest

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

bench: install-dev
	$(BIN)/python bench/bench_engine.py
	$(BIN)/python bench/bench_models.py
	$(BIN)/python bench/bench_browser.py
	$(BIN)/python bench/bench_open.py
	$(BIN)/python bench/bench_repaint.py
	$(BIN)/python bench/bench_isolation.py
	$(BIN)/python bench/bench_training.py
	$(BIN)/python bench/bench_scrub.py
	$(BIN)/python bench/bench_variants.py
	$(BIN)/python bench/bench_decoding.py
	$(BIN)/python bench/bench_reading.py
	$(BIN)/python bench/load.py --per-page --sessions 10,15,20,30 --waves 2
