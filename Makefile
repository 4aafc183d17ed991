# Every target works on a fresh clone: it creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo reproduce reproduce-quick test test-slow lint bench constraints clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tmsim compare inception_v4 --batch 16 --ratio 4:1

reproduce: $(STAMP)
	$(BIN)/tmsim reproduce --out out/figures

reproduce-quick: $(STAMP)
	$(BIN)/tmsim reproduce --quick --out out/figures-quick

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

# Record the installed versions as the new constraints (run after a passing `make test`).
constraints: $(STAMP)
	{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^tmsim'; } > constraints.tmp
	mv constraints.tmp constraints.txt

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
