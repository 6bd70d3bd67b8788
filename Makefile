# The two commands a newcomer needs: `make run` (whole stack, embedded SQLite) and `make test`.
# Both create the virtualenv and install everything on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The suite runs against PostgreSQL too; point it elsewhere, or set it empty to skip those tests.
BATCHGATE_TEST_DATABASE_URL ?= postgresql+asyncpg://postgres@127.0.0.1:5432/test
export BATCHGATE_TEST_DATABASE_URL

.PHONY: run test test-image lint gen migration bench clean

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

# Opt-in, not part of `make test` (root, the Docker Engine, minutes): builds the image on a Debian
# base made here (no registry needed) and runs compose.yaml's services as its containers on the
# host's network, driving a batch through them. Installs debootstrap and, when no Docker Engine
# answers, docker.io (Debian's); starts and stops its own daemon if none runs. Downloads and
# image layers stay cached in $(BATCHGATE_IMAGE_CACHE). Bounded: SIGINT after the timeout
# (clean-up runs), SIGKILL a minute later.
BATCHGATE_IMAGE_CACHE ?= /var/cache/batchgate-test-image
IMAGE_TEST_TIMEOUT_S ?= 1800
export BATCHGATE_IMAGE_CACHE

test-image: $(STAMP)
	command -v debootstrap >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
	$(PY) -c 'import docker; docker.from_env().ping()' 2>/dev/null || command -v dockerd >/dev/null \
	  || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; }
	BATCHGATE_TEST_IMAGE=1 timeout --signal=INT --kill-after=60 $(IMAGE_TEST_TIMEOUT_S) \
	  $(PY) -m pytest tests/image --durations=0 $(PYTEST_ARGS)

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
