# Nylon: the two commands are `make run` and `make test`; both do all the set-up themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench-locomo clean

$(STAMP): pyproject.toml sdk/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]" -e sdk/python
	touch $(STAMP)

run: $(STAMP)
	$(PY) nylon_project/pgvector_build.py
	$(PY) manage.py nylon_run

test: $(STAMP)
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	$(VENV)/bin/ruff check .
	$(PY) nylon_project/pgvector_build.py
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench-locomo: $(STAMP)
	$(PY) manage.py locomo_eval --data ../shared/locomo

clean:
	rm -rf $(VENV) .nylon
