# Two commands on a fresh machine:  `make plan` (set up + render the dev stack offline) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= dev
STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

.PHONY: setup plan plans test lint schemas schema bench clean

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-verl.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	# verl only for its Hydra config tree (tests compose the trainer config offline); see the file's comment.
	$(PY) -m pip install --quiet --no-deps -r requirements-verl.txt
	touch $@

setup: $(VENV)/.installed

plan: setup
	$(PY) plan.py --stack $(STACK)

plans: setup
	@for s in $(STACKS); do $(PY) plan.py --stack $$s || exit 1; done

lint: setup
	$(PY) -m ruff check .

# CRD schemas for the conformance tests: verified in ../shared/schemas, or downloaded into .cache/schemas.
schemas:
	.ci/fetch-schemas

test: lint schemas
	$(PY) -m pytest

schema: setup
	$(PY) -m components.config

bench: setup
	$(PY) benchmark.py

clean:
	rm -rf out .pytest_cache .ruff_cache .cache
