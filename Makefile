# The two commands a newcomer needs: `make run` (whole stack, embedded SQLite) and `make test`.
# Both create the virtualenv and install everything on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The suite runs against PostgreSQL too; point it elsewhere, or set it empty to skip those tests.
BATCHGATE_TEST_DATABASE_URL ?= postgresql+asyncpg://postgres@127.0.0.1:5432/test
export BATCHGATE_TEST_DATABASE_URL

.PHONY: run test lint gen migration bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/batchgate up $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/buf lint

gen: $(STAMP)
	$(PY) -m tools.codegen

migration: $(STAMP)
	$(PY) -m tools.baseline_migration

bench: $(STAMP)
	$(PY) -m bench $(ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache
