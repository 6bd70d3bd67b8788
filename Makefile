# The two commands a newcomer needs: `make run` (whole stack, embedded SQLite) and `make test`.
# Both create the virtualenv and install everything on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The web panel's third-party browser code (Papa Parse), installed from its lock file by npm.
UI := gateway/ui
UI_STAMP := $(UI)/node_modules/.installed
# The browser the panel's tests drive (Playwright cannot download browsers here).
CHROMIUM := /usr/bin/chromium

# The suite runs against PostgreSQL too; point it elsewhere, or set it empty to skip those tests.
BATCHGATE_TEST_DATABASE_URL ?= postgresql+asyncpg://postgres@127.0.0.1:5432/test
export BATCHGATE_TEST_DATABASE_URL

.PHONY: run test test-image lint gen migration bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(UI_STAMP): $(UI)/package.json $(UI)/package-lock.json
	cd $(UI) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(UI_STAMP)

# Only when it is missing: Debian's chromium, as root or through sudo.
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -qq && apt-get install -y -qq chromium'

run: $(STAMP) $(UI_STAMP)
	$(VENV)/bin/batchgate up $(ARGS)

# Two passes: first every test not marked `alone` on $(TEST_WORKERS) pytest-xdist workers (a module
# stays on one worker, so its module-wide stack starts once), then the `alone` ones (they bound how
# long something takes) one at a time. Both always run; exit status 5 is "none selected", a
# failure only when neither pass selected a test.
# TEST_WORKERS=0 runs the first pass in this process too.
TEST_WORKERS ?= 2

test: lint $(UI_STAMP) $(CHROMIUM)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not alone" $(PYTEST_ARGS); parallel=$$?; \
	$(PY) -m pytest -m alone $(PYTEST_ARGS); alone=$$?; \
	[ $$parallel -ne 5 ] || [ $$alone -ne 5 ] || exit 5; \
	for status in $$parallel $$alone; do [ $$status -eq 0 ] || [ $$status -eq 5 ] || exit $$status; done

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

# ruff (with complexity, C90 ≤ 12), formatting, mypy --strict ([tool.mypy]), the protos.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/buf lint

gen: $(STAMP)
	$(PY) -m tools.codegen

migration: $(STAMP)
	$(PY) -m tools.baseline_migration

bench: $(STAMP)
	$(PY) -m bench $(ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache .mypy_cache $(UI)/node_modules
