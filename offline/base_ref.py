"""The base of a change report rendered by the program as it was at a git commit (`plan.py --base-ref REF`).

`plan.py --base-config-file OLD` renders OLD with today's program, so a change to `components/` (a resource's
inputs, a rename) is invisible to it. `--base-ref REF` renders the base stack with the program *at REF*:

1. `git worktree add --detach` of REF into a temporary folder this module creates (a clean checkout of REF's
   tracked files: its `__main__.py`, `components/`, `offline/`, `stacks/`);
2. that tree's own offline engine runs its own stack file in a subprocess with this interpreter (the same venv):
   `offline/base_dump.py` is handed to it and imports only the tree's modules (`offline.plan.record_stack`,
   `build_plan`), writing the recorded resources, the raw state the day-2 replay needs (secrets still wrapped,
   never printed) and the base's own plan into the temporary folder;
3. the worktree is removed (`git worktree remove --force` of that folder only) and the temporary folder deleted,
   on success and on every error; nothing else is touched.

The caller then runs today's program over that state, exactly as the stack-file review does (offline/day2.py), so
the changes are what `pulumi preview --diff` would show after merging: replace, update, create, delete.
A REF without the stack file makes a stack that does not exist yet: every resource a create.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from offline.engine import RawState, Recording, Registration

REPO = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().parent / "base_dump.py"
# A render of the biggest stack pair takes seconds; a program at REF that hangs must not hold CI for hours.
TIMEOUT_S = 600


class BaseRefError(Exception):
    """The base cannot be rendered at REF (unknown ref, a program at REF that fails): plan.py exits 2."""


@dataclasses.dataclass
class BaseRender:
    """What the program at REF made of the stack: its recording (None: no stack file there) and its own plan."""

    ref: str
    sha: str
    recording: Recording | None
    plan: dict
    settings: dict
    stack_file: str  # the path in the tree at REF ("" when absent)


def _git(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def resolve(ref: str, repo: Path = REPO) -> str:
    """The commit REF names in `repo`, or BaseRefError saying so (a shallow clone may lack it: fetch more)."""
    if ref.startswith("-"):
        raise BaseRefError(f"--base-ref {ref!r} is not a git ref")
    found = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo)
    if found.returncode != 0 or not found.stdout.strip():
        raise BaseRefError(f"--base-ref {ref}: no such commit in {repo} (a shallow clone lacks older commits: fetch "
                           "them, e.g. actions/checkout with fetch-depth: 0, or `git fetch --unshallow`)")
    return found.stdout.strip()


def _exit_on_term(signum, frame):
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def worktree(sha: str, repo: Path = REPO) -> Iterator[Path]:
    """A detached checkout of `sha` in a new temporary folder, removed afterwards whatever happens."""
    holder = Path(tempfile.mkdtemp(prefix="verl-ack-base-ref-"))
    tree = holder / "tree"
    added = None
    # A cancelled CI job gets SIGTERM: end through the `finally` below, as Ctrl-C (KeyboardInterrupt) does.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_on_term) if main else None
    try:
        added = _git("worktree", "add", "--detach", "--quiet", str(tree), sha, cwd=repo)
        if added.returncode != 0:
            raise BaseRefError(f"cannot check out {sha[:12]} into a temporary worktree: {added.stderr.strip()}")
        yield tree
    finally:
        if added is not None and added.returncode == 0:
            # only the worktree added above (its folder and its record): --force drops its temporary changes
            _git("worktree", "remove", "--force", str(tree), cwd=repo)
        shutil.rmtree(holder, ignore_errors=True)  # the folder mkdtemp made for it, nothing else
        if main:
            signal.signal(signal.SIGTERM, previous)


def _recording(data: dict) -> Recording:
    """A Recording from the driver's JSON: only the fields this program's Registration knows (REF's may differ)."""
    known = {f.name for f in dataclasses.fields(Registration)}
    rec = Recording(outputs=data["outputs"], secret_outputs=data["secret_outputs"])
    for r in data["resources"]:
        rec.resources.append(Registration(**{k: v for k, v in r.items() if k in known}))
    rec.raw = {urn: RawState(s["id"], s["inputs"], s["outputs"], tuple(s.get("init_errors", ())))
               for urn, s in data["raw"].items()}
    return rec


def render_at(ref: str, stack: str, stack_path: Path | None, base_file: Path | None = None,
              repo: Path = REPO) -> BaseRender:
    """Render `stack` with the program at `ref`: the tree's own copy of the stack file at `stack_path` (a path
    relative to the repository), or `base_file` when given. BaseRefError when the ref or the render fails."""
    sha = resolve(ref, repo)
    with worktree(sha, repo) as tree:
        path = base_file.resolve() if base_file else tree / stack_path if stack_path else None
        if path is None or not path.is_file():
            return BaseRender(ref, sha, None, {"sections": {}, "warnings": []}, {}, "")
        out = tree.parent / "render"
        proc = subprocess.run([sys.executable, str(DRIVER), str(tree), str(path), stack, str(out)], cwd=tree,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise BaseRefError(f"the program at {ref} ({sha[:12]}) does not render {stack}: "
                               f"{tail or f'exit {proc.returncode}'}")
        data = json.loads((out / "recording.json").read_text())
        plan = json.loads((out / "plan" / "plan.json").read_text())
        rel = path.relative_to(tree) if path.is_relative_to(tree) else path
        return BaseRender(ref, sha, _recording(data), plan, data["settings"] or {}, str(rel))
