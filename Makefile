# The README's commands. `make run` and `make test` work on a fresh machine with Python 3.11.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
# Two install stamps: serving needs only base.txt (and the client it names); tests, lint and the
# benchmarks add the dev and test tools of local.txt on top.
BASE_STAMP := $(VENV)/.installed-base
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test lint format migrate bench bench-report clean sandbox-tool

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found: install Python 3.11 or run 'make PYTHON=python3 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file changed. pip's own upgrade is skipped: the Python 3.11
# venv's pip installs these pins, and asking the index for a newer pip costs seconds on every setup.
$(BASE_STAMP): $(BIN)/python requirements/base.txt client/pyproject.toml
	@echo "installing what serving needs (requirements/base.txt)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/base.txt
	@touch $(BASE_STAMP)

$(DEV_STAMP): $(BASE_STAMP) requirements/local.txt
	@echo "installing the test and lint tools (requirements/local.txt)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/local.txt
	@touch $(DEV_STAMP)

migrate: $(BASE_STAMP)
	$(BIN)/python manage.py migrate --noinput

# Web, Celery worker, beat, the file observer and a local runner as supervised children (manage.py serve).
# The demo key and URLs go to a private file that serve prints (and deletes) once the web answers,
# so they are the last lines of start-up rather than lost above the children's logs. The local
# runner's config (with its key, kept between runs) is another private file; its root is var/runner.
WELCOME := $(or $(SWITCHYARD_VAR_DIR),var)/.welcome
RUNNER_CONFIG := $(or $(SWITCHYARD_VAR_DIR),var)/local-runner.toml
# The local runner sandboxes its agents with bubblewrap where it is installed: as root with apt, install
# it; else say once that the demo's agents run unsandboxed (README "Runners", the sandbox).
sandbox-tool:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && echo "installing bubblewrap (the runs' sandbox)" \
	  && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
	       || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; }; }; } \
	  || echo "bubblewrap is not installed and could not be: the local runner's agents run unsandboxed"

run: migrate sandbox-tool
	$(BIN)/python manage.py setup_demo --port $(PORT) --welcome-file $(WELCOME) --runner-config $(RUNNER_CONFIG)
	$(BIN)/python manage.py setup_schedules
	PORT=$(PORT) $(BIN)/python manage.py serve --port $(PORT) --welcome-file $(WELCOME) --runner-config $(RUNNER_CONFIG)

# The suite over TEST_WORKERS pytest-xdist processes, a test file to a worker (its module-scoped servers
# start once), the longest files first (tests/schedule.py; --no-loadscope-reorder keeps that order rather
# than pytest-xdist's most-tests-first); TEST_WORKERS=0 runs it in this process. More workers than cores
# pay: most of a live test's time is spent waiting on the processes it started.
# Python's bytecode cache stays on for the tests, in var/pycache, even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE): without it every Python process a test starts (servers, Celery workers,
# runners, agents) compiles the project's source again, and every pytest worker its test files.
TEST_WORKERS ?= 3
test: $(DEV_STAMP)
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$(CURDIR)/var/pycache" \
	  $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -r requirements/production.txt
	$(BIN)/python bench/run.py

# bench/README.md's table of figures, made from bench/figures.json (standard library only: any python3).
bench-report:
	python3 bench/report.py

clean:
	rm -rf $(VENV) var
