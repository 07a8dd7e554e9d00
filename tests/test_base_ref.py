"""`plan.py --base-ref REF`: the review renders the base with the program as it was at REF, so a change to the code
(not only to a stack file) shows as `pulumi preview --diff` would show it; the temporary worktree never outlives a
run, and an unknown ref or a base that does not render exits 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import plan
from tests.conftest import REPO

# A one-line code change: a label on the training ConfigMap (components/workloads/training/component.py).
COMPONENT = "components/workloads/training/component.py"
CONFIG_MAP_LABELS = '''metadata={"name": wiring.config_map, "namespace": ns,
                      "labels": {"app.kubernetes.io/part-of": "verl-ack"}},'''
CONFIG_MAP_LABELS_NEW = CONFIG_MAP_LABELS.replace('"verl-ack"}', '"verl-ack", "tier": "config"}')
# A one-line stack-file change.
STACK_LINE = "    ttl_hours: 24 "
STACK_LINE_NEW = "    ttl_hours: 12 "


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false",
                           *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: the line this test edits moved; update the test's {old!r}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A repository of this working tree's files (committed or not), with the history the tests write on top:
    HEAD~2 a program that fails to render, HEAD~1 this tree, HEAD a one-line component change, a one-line stack
    change and a new stack file."""
    root = tmp_path_factory.mktemp("base-ref") / "repo"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    _git(root, "init", "-q")
    main = (root / "__main__.py").read_text()
    (root / "__main__.py").write_text('raise RuntimeError("this commit does not render")\n')
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "broken")
    (root / "__main__.py").write_text(main)
    _git(root, "commit", "-qam", "base")
    _edit(root / COMPONENT, CONFIG_MAP_LABELS, CONFIG_MAP_LABELS_NEW)
    _edit(root / "stacks/Pulumi.dev.yaml", STACK_LINE, STACK_LINE_NEW)
    shutil.copy2(root / "stacks/Pulumi.dev.yaml", root / "stacks/Pulumi.devnew.yaml")
    _edit(root / "stacks/Pulumi.devnew.yaml", "name: verl-dev", "name: verl-devnew")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "change")
    return root


def _plan(repo: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """The repository's own plan.py, with a TMPDIR of its own so the test sees what it leaves behind."""
    scratch = tmp / "tmpdir"
    scratch.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "plan.py", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(scratch)})


def _nothing_left(repo: Path, tmp: Path) -> None:
    assert _git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1, "a temporary worktree was left"
    assert not [p.name for p in (tmp / "tmpdir").iterdir() if p.name.startswith("verl-ack-base-ref-")]


def test_a_one_line_component_change_and_a_stack_file_change_both_show_against_the_previous_commit(repo, tmp_path):
    proc = _plan(repo, tmp_path, "--stack", "dev", "--base-ref", "HEAD~1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    by_name = {c["name"]: c for c in doc["changes"]}
    assert by_name["train-config"]["action"] == "update"
    assert "metadata.labels.tier" in by_name["train-config"]["fields"], by_name["train-config"]
    assert {"setting": "ttl_hours", "old": "24", "new": "12"} in doc["review"]["settings"]
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "## Changes against `HEAD~1`" in md and "metadata.labels.tier" in md
    assert "No changes" not in md
    _nothing_left(repo, tmp_path)


def test_a_stack_without_a_file_at_the_base_is_all_creates(repo, tmp_path):
    proc = _plan(repo, tmp_path, "--stack", "devnew", "--base-ref", "HEAD~1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["changes"] and {c["action"] for c in doc["changes"]} == {"create"}
    managed = {r["urn"].rsplit("::", 1)[-1] for r in doc["resources"] if r["custom"] and not r["options"].get("read")}
    assert {c["name"] for c in doc["changes"]} == managed
    _nothing_left(repo, tmp_path)


def test_a_base_the_program_at_ref_cannot_render_exits_2_and_leaves_no_worktree(repo, tmp_path):
    proc = _plan(repo, tmp_path, "--stack", "dev", "--base-ref", "HEAD~2", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "does not render dev" in proc.stderr and "this commit does not render" in proc.stderr
    assert not (tmp_path / "out").exists()
    _nothing_left(repo, tmp_path)


def test_an_unknown_ref_exits_2_with_a_clear_message_and_writes_nothing(tmp_path, capsys):
    assert plan.main(["--stack", "dev", "--base-ref", "no-such-ref-anywhere", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--base-ref no-such-ref-anywhere: no such commit" in err and "fetch-depth" in err
    assert not (tmp_path / "out").exists()
