# The README's commands. `make run` and `make test` work on a fresh machine with Python 3.11.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test lint format migrate bench bench-report clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found: install Python 3.11 or run 'make PYTHON=python3 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file changed.
$(STAMP): $(BIN)/python requirements/base.txt requirements/local.txt requirements/production.txt
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements/local.txt
	@touch $(STAMP)

migrate: $(STAMP)
	$(BIN)/python manage.py migrate --noinput

# Web, Celery worker, beat, the file observer and a local runner as supervised children (manage.py serve).
# The demo key and URLs go to a private file that serve prints (and deletes) once the web answers,
# so they are the last lines of start-up rather than lost above the children's logs. The local
# runner's config (with its key, kept between runs) is another private file; its root is var/runner.
WELCOME := $(or $(SWITCHYARD_VAR_DIR),var)/.welcome
RUNNER_CONFIG := $(or $(SWITCHYARD_VAR_DIR),var)/local-runner.toml
run: migrate
	$(BIN)/python manage.py setup_demo --port $(PORT) --welcome-file $(WELCOME) --runner-config $(RUNNER_CONFIG)
	$(BIN)/python manage.py setup_schedules
	PORT=$(PORT) $(BIN)/python manage.py serve --port $(PORT) --welcome-file $(WELCOME) --runner-config $(RUNNER_CONFIG)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -r requirements/production.txt
	$(BIN)/python bench/run.py

# bench/README.md's table of figures, made from bench/figures.json (standard library only: any python3).
bench-report:
	python3 bench/report.py

clean:
	rm -rf $(VENV) var
