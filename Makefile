# Every target works on a fresh clone: it creates .venv and installs what it needs: the core
# alone for the demo and the figures (no torch), every extra for the tests and the tools.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core
STAMP := $(VENV)/.installed

.PHONY: demo reproduce reproduce-quick test test-slow lint bench notebook docs constraints clean

$(CORE): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $(CORE)

$(STAMP): $(CORE)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,dev,docs,torch]'
	touch $(STAMP)

demo: $(CORE)
	$(BIN)/tmsim compare inception_v4 --batch 16 --ratio 4:1

reproduce: $(STAMP)
	$(BIN)/tmsim reproduce --out out/figures

reproduce-quick: $(STAMP)
	$(BIN)/tmsim reproduce --quick --out out/figures-quick

# Tests are spread one at a time, idle workers taking the rest of a busy one's queue: 391 s
# by whole files, 312 s so (two cores). Figures' whole pipelines, the tutorial, the site build
# and process-pool and dask runs are marked slow: ``make test-slow``.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q -n auto --dist worksteal

test-slow: $(STAMP)
	$(BIN)/pytest -q -n auto --dist worksteal -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

# The documentation site (guides, tutorial, API reference), into out/docs (warnings are errors).
docs: $(STAMP)
	$(BIN)/sphinx-build -q -W --keep-going -b html docs out/docs

# Run the tutorial again in place, keeping the outputs of this run (tests run a copy).
notebook: $(STAMP)
	$(BIN)/python docs/execute.py docs/tutorial.ipynb

# Record the installed versions as the new constraints (run after a passing `make test`).
constraints: $(STAMP)
	{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^tmsim'; } > constraints.tmp
	mv constraints.tmp constraints.txt

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
