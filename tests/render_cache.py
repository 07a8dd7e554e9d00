"""One render per distinct input in a test process: the suite renders the same shipped stacks from many files
(`record`, `build_plan`, `plan.main`), and a render is a pure function of its inputs, so a repeat is served a fresh
copy of the first one's result instead of running the program again.

Two layers, both keyed by everything the result depends on (a changed input is a new key, never a stale answer):
- `run_program`: the Recording, kept pickled; every caller gets its own unpickled copy, so a caller that sets
  `.platform` or mutates it changes nothing another test sees.
- `build_plan`: the plan dict (as JSON) and the folder it wrote, copied into the caller's `out` with the very
  checks and moves `build_plan` ends with (the same out-folder refusal, the same errors on an unwritable folder).

A render is served from the cache only where it cannot differ from a fresh one:
- the test has not monkeypatched anything (a patched fake, loader or environment changes what the program sees;
  `guard` below tells the cache which test runs);
- no day-2 inputs (`own_outputs`, `prior`) and no change review (`changes`): those runs are the point of their tests;
- the fake account's state (tests/components/workloads/test_staging_cache.py edits its bucket) and the environment
  are part of the key.
Only successful runs are kept: a refused input runs, and fails, every time. Nothing outlives the process.
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
_recordings: dict[str, bytes] = {}  # key -> pickled Recording
_plans: dict[str, tuple[str, Path]] = {}  # key -> (plan as JSON, the folder build_plan wrote)
_folder: Path | None = None  # this process's copies of the plan folders, removed at exit
_monkeypatch = None  # the running test's MonkeyPatch (set by `guard`)


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
    env = sorted((k, v) for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST")
    return hashlib.sha256(repr((parts, repr(fakes.ACCOUNT), env)).encode()).hexdigest()


def run_program(program, config, secret_keys, *, own_outputs=None, prior=None, **kw):
    """engine.run_program, served from this process's earlier identical run where that cannot differ."""
    if own_outputs is not None or prior is not None or _patched():
        return _real_run_program(program, config, secret_keys, own_outputs=own_outputs, prior=prior, **kw)
    key = _key(str(program), sorted(config.items()), list(secret_keys), sorted(kw.items()))
    if key in _recordings:
        return pickle.loads(_recordings[key])
    recording = _real_run_program(program, config, secret_keys, **kw)
    _recordings[key] = pickle.dumps(recording)
    return recording


def build_plan(path: Path, stack: str, out: Path, secret_values: dict[str, str] | None = None, changes=None) -> dict:
    """offline.plan.build_plan, served from this process's earlier identical plan where that cannot differ."""
    global _folder
    if changes is not None or _patched():
        return _real_build_plan(path, stack, out, secret_values, changes)
    path = Path(path)
    key = _key(str(path), path.read_bytes(), stack, sorted((secret_values or {}).items()))
    if key not in _plans:
        plan = _real_build_plan(path, stack, out, secret_values)
        if _folder is None:
            _folder = Path(tempfile.mkdtemp(prefix="verl-ack-test-plans-"))
            atexit.register(shutil.rmtree, _folder, ignore_errors=True)
        kept = _folder / str(len(_plans))
        shutil.copytree(out, kept)
        _plans[key] = (json.dumps(plan), kept)
        return plan
    text, kept = _plans[key]
    # build_plan's own ending, from its checked out folder to the move (offline/plan.py).
    offline_plan.check_out_folder(out)
    tmp = Path(tempfile.mkdtemp(prefix=f"plan-{stack}-"))
    try:
        shutil.copytree(kept, tmp, dirs_exist_ok=True, copy_function=shutil.copy)
        offline_plan.check_out_folder(out)
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(tmp), str(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return json.loads(text)


def install() -> None:
    """Route the program's runs through the cache: the names tests and offline/plan.py call them by (modules that
    import them later, the tests and plan.py, get these)."""
    engine.run_program = offline_plan.run_program = run_program
    offline_plan.build_plan = build_plan
