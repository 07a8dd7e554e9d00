"""Snapshot files under tests/snapshots/: a diff in review is a diff in the cluster.
`UPDATE_SNAPSHOTS=1 pytest ...` rewrites them; review the git diff before committing it."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def assert_text_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}; run UPDATE_SNAPSHOTS=1 pytest to create it"
    assert text == path.read_text(), f"{name} changed; review the diff and run UPDATE_SNAPSHOTS=1 to accept it"


def assert_snapshot(name: str, objs: list[dict]) -> None:
    """Kubernetes manifests as a multi-document YAML snapshot."""
    assert_text_snapshot(name, yaml.safe_dump_all(objs, sort_keys=False, width=120))
