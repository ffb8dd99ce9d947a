# Stream Inspector: `make run` serves http://127.0.0.1:8000, `make test` lints and tests.
SHELL := /bin/bash
.DEFAULT_GOAL := run

VENV   := .venv
STAMP  := $(VENV)/.installed
# The Vercel lens's npm packages (inspector/lenses/node/package-lock.json).
NODE_DIR   := inspector/lenses/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
PY     := $(VENV)/bin/python
PYTHON_BOOTSTRAP := $(shell command -v python3.11 2>/dev/null || command -v python3)

HOST ?= 127.0.0.1
PORT ?= 8000

export DJANGO_SETTINGS_MODULE := inspector.settings

.PHONY: venv .venv run test clean

venv .venv: $(STAMP) $(NODE_STAMP)

# Reinstall only when pyproject.toml changes (or the venv is new).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install -e ".[dev,lenses]"
	@touch $(STAMP)

# `npm ci` when Node is here (again when the lockfile changes); without Node the
# Vercel lens says "unavailable" and how to install it, and this is tried again.
$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(NODE_DIR) --no-audit --no-fund && touch $(NODE_STAMP); \
	else \
		echo "note: no node/npm here: the Vercel lens stays unavailable until Node.js is installed"; \
	fi

run: $(STAMP) $(NODE_STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py recover_live --force
	$(PY) manage.py load_demo
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) inspector.asgi:application

test: $(STAMP) $(NODE_STAMP)
	@set -u; status=0; \
	echo "==> ruff check . && ruff format --check ."; \
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . || status=1; \
	echo; echo "==> pytest leg 1/2: SQLite + in-memory channel layer"; \
	env -u DATABASE_URL -u REDIS_URL $(VENV)/bin/pytest -q || status=1; \
	if [ -n "$${DATABASE_URL:-}" ] && [ -n "$${REDIS_URL:-}" ]; then \
		echo; echo "==> pytest leg 2/2: PostgreSQL + Redis (DATABASE_URL, REDIS_URL)"; \
		$(VENV)/bin/pytest -q || status=1; \
	else \
		echo; echo "==> pytest leg 2/2 skipped: set DATABASE_URL and REDIS_URL to run it"; \
	fi; \
	if [ $$status -ne 0 ]; then echo; echo "==> FAILED"; fi; \
	exit $$status

clean:
	rm -rf test-results .pytest_cache .ruff_cache test_db.sqlite3 test_db.sqlite3-wal test_db.sqlite3-shm

# Speed benchmark of the tool-call assembler (bench/README.md); figures also go to bench-results/.
.PHONY: bench
bench:
	$(PY) bench/assemble.py
