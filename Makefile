# Two commands on a fresh machine:  `make plan` (set up + render the dev stack offline) and `make test`.
# bash for `set -o pipefail` in setup: pip's output is filtered to its progress lines, its exit status kept.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= dev
STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

# verl's own validate_config for one stack, where torch and Ray are installed (VENV with verl's dependencies).
.PHONY: verl-validate
verl-validate:
	$(PY) tools/verl_validate.py --stack $(STACK)

.PHONY: setup plan plans task-check test lint lint-workflows schemas schema urns bench clean runtime-check runtime lock torch

# The first run downloads ~1 GB of pinned wheels (a few minutes; `make test` adds torch, requirements-torch.txt): each step says what it does, and pip shows
# one line per package (--progress-bar off keeps CI logs readable; the names show it is moving); when pip fails,
# its whole output (kept in $(VENV)/pip-install.log) is printed, since the reason is on the lines filtered out.
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-verl.txt
	@echo "setup: creating $(VENV) (once; later runs reuse it)"
	python3 -m venv $(VENV)
	@echo "setup: upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "setup: installing the pinned requirements (requirements-dev.txt, a few minutes the first time)"
	set -o pipefail; $(PY) -m pip install --progress-bar off --disable-pip-version-check -r requirements-dev.txt 2>&1 \
	  | tee $(VENV)/pip-install.log | { grep -E --line-buffered '^(Collecting|Successfully installed|ERROR|error)' || true; } \
	  || { cat $(VENV)/pip-install.log; echo "setup: pip failed (its whole output above)" >&2; exit 1; }
	# verl only for its Hydra config tree (tests compose the trainer config offline); see the file's comment.
	@echo "setup: installing verl's config tree (requirements-verl.txt, no dependencies)"
	$(PY) -m pip install --quiet --no-deps -r requirements-verl.txt
	@echo "setup: done"
	touch $@

setup: $(VENV)/.installed

# torch for the preflight's CPU tests only: kept out of setup so plans (and CI's plan-only jobs) never fetch it.
$(VENV)/.torch: requirements-torch.txt $(VENV)/.installed
	@echo "setup: installing torch for the preflight's tests (requirements-torch.txt)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-torch.txt
	touch $@

torch: $(VENV)/.torch

plan: setup
	$(PY) plan.py --stack $(STACK)

# The task's CPU proof alone (docs/task.md): the reward on its checks and the preset's examples, the dataset's rows,
# the tools; exit 2 naming task.* on a problem. plan.py runs the same proof for every stack.
task-check: setup
	$(PY) -m components.task_check --stack $(STACK)

plans: setup
	@for s in $(STACKS); do $(PY) plan.py --stack $$s || exit 1; done

# The Pulumi program and the offline plan with requirements.txt ONLY, installed from its hash lock
# (requirements.lock: every package, transitive ones included, pinned with its PyPI hashes): the very install
# deploy.yml and teardown.yml run the program from, with the cloud credentials present. Wheels only: no
# package's build script runs at install time. An import of a dev-only
# package fails here instead of at a user's first `pulumi up`, and a lock that no longer installs fails CI.
# A venv of its own, rebuilt when the lock changes (pip's cache makes that ~20-30 s); every stack is
# rendered into a temporary folder.
RUNTIME_VENV ?= .venv-runtime
# pip-tools for `make lock` only, in a throwaway venv (never in the program's).
PIP_TOOLS := pip-tools==7.6.2

$(RUNTIME_VENV)/.installed: requirements.lock requirements-verl.txt
	rm -rf $(RUNTIME_VENV)
	python3 -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
	  --only-binary :all: -r requirements.lock
	# verl's wheel without its dependencies, hash-locked: the task's reward scorers run on its examples at preview.
	$(RUNTIME_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
	  --only-binary :all: -r requirements-verl.txt
	touch $@

runtime: $(RUNTIME_VENV)/.installed

# Regenerate the hash locks after a pin in requirements.txt or policy/requirements.txt moves (PyPI only, Python
# 3.11 like the workflows): tests/test_workflows.py holds each lock's pins equal to its requirements file. The data
# Jobs' locks too (pipeline/locks/<job>.lock, Python 3.11 like their python:3.11-slim image): tools/pipeline_locks.py
# writes each Job's top-level pins (<job>.in) from versions.pipeline_packages' defaults; tests/test_supply_chain.py
# holds them equal.
lock: setup
	$(PY) tools/pipeline_locks.py
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && python3 -m venv "$$tmp" && \
	"$$tmp/bin/pip" install --quiet "$(PIP_TOOLS)" && \
	for req in requirements.txt policy/requirements.txt; do \
	  ( cd "$$(dirname $$req)" && PIP_CONFIG_FILE=/dev/null "$$tmp/bin/pip-compile" --quiet --generate-hashes \
	    --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --index-url https://pypi.org/simple \
	    --output-file requirements.lock requirements.txt ) || exit 1; \
	done && \
	for spec in pipeline/locks/*.in; do \
	  job=$$(basename "$$spec" .in); \
	  ( cd pipeline/locks && PIP_CONFIG_FILE=/dev/null "$$tmp/bin/pip-compile" --quiet --generate-hashes \
	    --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --index-url https://pypi.org/simple \
	    --output-file "$$job.lock" "$$job.in" ) || exit 1; \
	done

runtime-check: $(RUNTIME_VENV)/.installed
	@out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && \
	for s in $(STACKS); do \
	  $(RUNTIME_VENV)/bin/python plan.py --stack $$s --out "$$out/$$s" > "$$out/$$s.log" 2>&1 || \
	    { cat "$$out/$$s.log"; echo "runtime-check: stack $$s does not render with requirements.txt alone" >&2; exit 1; }; \
	done && echo "runtime-check: $(words $(STACKS)) stacks render with requirements.txt alone"

lint: setup
	$(PY) -m ruff check .

# The workflows: zizmor's offline audits at its strictest persona (pinned, in a venv of its own; every finding is
# fixed or carries a `# zizmor: ignore[rule] <why>` comment), then shellcheck (Debian's package; the hosted
# runners have it) on every `run:` script and the repository's shell scripts (.ci/shellcheck-workflows).
ZIZMOR := 1.32.0
ZIZMOR_VENV ?= .venv-zizmor

lint-workflows: setup
	@$(ZIZMOR_VENV)/bin/zizmor --version 2>/dev/null | grep -qx "zizmor $(ZIZMOR)" || { rm -rf $(ZIZMOR_VENV) && \
	  python3 -m venv $(ZIZMOR_VENV) && \
	  $(ZIZMOR_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "zizmor==$(ZIZMOR)"; }
	$(ZIZMOR_VENV)/bin/zizmor --offline --persona=auditor .github/workflows/
	$(PY) .ci/shellcheck-workflows

# CRD schemas for the conformance tests: verified in ../shared/schemas, or downloaded into .cache/schemas.
schemas:
	.ci/fetch-schemas

# -n auto: one worker per core (the suite is CPU-bound: most of it renders the program); --dist loadfile keeps a
# file's tests in one worker, so its module fixtures run once; the workers share one render store for the run
# (tests/render_cache.py), so each distinct render or plan is made once however the files are spread. With
# workers pytest prints only dots; tests/conftest.py prints one line per test file as it completes (pyproject's `-q`
# alone would print only dots, for minutes on a small machine); the slowest tests are listed at the end.
TEST_PROGRESS = -n auto --dist loadfile --durations=10

# Python's default bytecode cache, even where PYTHONDONTWRITEBYTECODE is set: pytest keeps its assertion-rewritten
# test modules and Python the compiled sources in __pycache__ (git-ignored); without it every run and every worker and
# subprocess compiles them all again (~13 s of CPU of a run here).
test: lint schemas torch
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest $(TEST_PROGRESS)

schema: setup
	$(PY) -m components.config

# Accept a change of the shipped stacks' URNs (tests/test_urns.py): only for an intended replacement; say so in the PR.
urns: setup
	VERL_ACK_ACCEPT_URN_CHANGES=1 $(PY) -m pytest -q -p no:cacheprovider -n 0 tests/test_urns.py

bench: setup
	$(PY) benchmark.py

clean:
	rm -rf out .pytest_cache .ruff_cache .cache $(RUNTIME_VENV)
