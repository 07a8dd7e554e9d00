"""One render per distinct input in a test run: the suite renders the same shipped stacks from many files
(`record`, `build_plan`, `plan.main`), and a render is a pure function of its inputs, so a repeat is served a fresh
copy of the first one's result instead of running the program again.

Two layers, both keyed by everything the result depends on (a changed input is a new key, never a stale answer):
- `run_program`: the Recording, kept pickled; every caller gets its own unpickled copy, so a caller that sets
  `.platform` or mutates it changes nothing another test sees.
- `build_plan`: the folder it wrote (its plan.json is the plan it returns), copied into the caller's `out` with the
  very checks and moves `build_plan` ends with (the same out-folder refusal, the same errors on an unwritable folder).

A render is served from the cache only where it cannot differ from a fresh one:
- the test has not monkeypatched anything (a patched fake, loader or environment changes what the program sees;
  tests/conftest.py tells the cache which test runs);
- no day-2 inputs (`own_outputs`, `prior`) and no change review (`changes`): those runs are the point of their tests;
- the fake account's state (tests/components/workloads/test_staging_cache.py edits its bucket) and the environment
  are part of the key.
Only successful runs are kept: a refused input runs, and fails, every time. Nothing outlives the run: the xdist
workers share a folder under the run's own pytest basetemp (tests/conftest.py), a single process keeps its own.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path

from offline import engine, fakes
from offline import plan as offline_plan

_real_run_program = engine.run_program
_real_build_plan = offline_plan.build_plan
# Where kept results live, one file or folder per key: the run's folder that its xdist workers share (`share`), so a
# render one worker made is not made again by the other; else a folder of this process's own, removed at exit.
_store: Path | None = None
_monkeypatch = None  # the running test's MonkeyPatch (set by tests/conftest.py before each test)


def share(folder: Path) -> None:
    """Keep results in `folder`, which every worker of this run (and no other run) uses."""
    global _store
    folder.mkdir(parents=True, exist_ok=True)
    _store = folder


def _folder() -> Path:
    global _store
    if _store is None:
        _store = Path(tempfile.mkdtemp(prefix="verl-ack-test-renders-"))
        atexit.register(shutil.rmtree, _store, ignore_errors=True)
    return _store


def _patched() -> bool:
    """Whether the running test has changed anything through monkeypatch (pytest's MonkeyPatch keeps its undo
    lists in these attributes; pinned pytest, requirements-dev.txt). A fresh fake account in place of
    fakes.ACCOUNT does not count: the account's state is part of every key."""
    mp = _monkeypatch
    if mp is None:
        return False
    attrs = [(obj, name) for obj, name, _ in mp._setattr if not (obj is fakes and name == "ACCOUNT")]
    return bool(attrs or mp._setitem or mp._cwd is not None or mp._savesyspath is not None)


def _key(*parts) -> str:
    # pytest's own variables name the test and the worker, which the program never reads.
    env = sorted((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_"))
    return hashlib.sha256(repr((parts, repr(fakes.ACCOUNT), env)).encode()).hexdigest()


def run_program(program, config, secret_keys, *, own_outputs=None, prior=None, **kw):
    """engine.run_program, served from this run's earlier identical run where that cannot differ."""
    if own_outputs is not None or prior is not None or _patched():
        return _real_run_program(program, config, secret_keys, own_outputs=own_outputs, prior=prior, **kw)
    kept = _folder() / f"{_key(str(program), sorted(config.items()), list(secret_keys), sorted(kw.items()))}.pickle"
    if kept.is_file():
        return pickle.loads(kept.read_bytes())
    recording = _real_run_program(program, config, secret_keys, **kw)
    tmp = kept.with_name(f"{kept.name}.{os.getpid()}")
    tmp.write_bytes(pickle.dumps(recording))
    os.replace(tmp, kept)  # whole or not at all: the other worker never reads half a file
    return recording


def build_plan(path: Path, stack: str, out: Path, secret_values: dict[str, str] | None = None, changes=None) -> dict:
    """offline.plan.build_plan, served from this run's earlier identical plan where that cannot differ."""
    if changes is not None or _patched():
        return _real_build_plan(path, stack, out, secret_values, changes)
    path = Path(path)
    kept = _folder() / f"{_key(str(path), path.read_bytes(), stack, sorted((secret_values or {}).items()))}.plan"
    if not kept.is_dir():
        plan = _real_build_plan(path, stack, out, secret_values)
        tmp = kept.with_name(f"{kept.name}.{os.getpid()}")
        shutil.copytree(out, tmp)
        try:
            os.rename(tmp, kept)
        except OSError:  # the other worker kept the same plan first
            shutil.rmtree(tmp, ignore_errors=True)
        return plan
    # build_plan's own ending, from its checked out folder to the move (offline/plan.py); the plan it returns is
    # what its plan.json holds.
    offline_plan.check_out_folder(out)
    tmp = Path(tempfile.mkdtemp(prefix=f"plan-{stack}-"))
    try:
        shutil.copytree(kept, tmp, dirs_exist_ok=True, copy_function=shutil.copy)
        offline_plan.replace_out_folder(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return json.loads((kept / "plan.json").read_text())


def install() -> None:
    """Route the program's runs through the cache: the names tests and offline/plan.py call them by (modules that
    import them later, the tests and plan.py, get these)."""
    engine.run_program = offline_plan.run_program = run_program
    offline_plan.build_plan = build_plan
