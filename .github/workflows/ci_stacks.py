"""Which stacks a workflow run acts on, and what it posts about them.

    python .github/workflows/ci_stacks.py preview --base SHA --head SHA   # stacks a PR touches (JSON list)
    python .github/workflows/ci_stacks.py deploy --before SHA --after SHA # touched stacks marked deploy_on_merge
    python .github/workflows/ci_stacks.py expired [--stack NAME]          # stacks whose ttl_hours has run out
    python .github/workflows/ci_stacks.py cost --stack NAME --plan out/NAME/plan.md  # PR comment body

The workflows in this folder call it; the decisions are plain functions that tests/test_workflows.py
exercises. Stack settings are read from `verl-ack:settings` in stacks/Pulumi.<name>.yaml, the keys the
settings model (components/config/__init__.py) defines: `deploy_on_merge` and `ttl_hours`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO / "stacks"
SETTINGS_KEY = "verl-ack:settings"
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_STACK_FILE = re.compile(r"^stacks/Pulumi\.(?P<name>[^/]+)\.ya?ml$")

# Changes here cannot alter what `pulumi preview`/`up` does to a stack, so they need no preview.
# Anything else (components, __main__.py, Pulumi.yaml, requirements.txt, policy/, image/, a new folder)
# counts as program code and previews every stack: a missed preview is worse than an extra one.
NON_PROGRAM_PREFIXES = ("docs/", "tests/", ".github/", ".ci/", "offline/")
NON_PROGRAM_FILES = frozenset({
    "README.md", "Makefile", "plan.py", "teardown.py", "pyproject.toml", ".gitignore",
    "requirements-dev.txt", "requirements-verl.txt", "requirements-torch.txt", "stacks/stack.schema.json",
})
# `git diff` against this "commit" (GitHub's `before` for a new branch) has nothing to compare with.
NULL_SHA = "0" * 40
# History entries that (may) leave resources running.
DEPLOY_KINDS = ("update", "import", "resource-import")
# Heading of the plan.md section whose text the PR comment quotes.
COST_HEADING = re.compile(r"^##\s+.*\bcost", re.IGNORECASE)
COMMENT_MARKER = "<!-- verl-ack-cost:{stack} -->"


def stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Stacks with a stack file. Names outside Pulumi's stack-name alphabet are ignored: they cannot be
    stacks, and the names end up in shell commands and comment markers."""
    names = (p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
    return sorted(n for n in names if STACK_NAME.fullmatch(n))


def stacks_touched(changed: Iterable[str], stacks: Sequence[str]) -> list[str]:
    """Stacks a set of changed paths can affect: a stack file affects its stack, program code every stack."""
    touched: set[str] = set()
    for path in changed:
        if match := _STACK_FILE.match(path):
            if match["name"] in stacks:  # a deleted stack file leaves nothing to preview
                touched.add(match["name"])
        elif path.startswith(NON_PROGRAM_PREFIXES) or path in NON_PROGRAM_FILES or path.endswith(".md"):
            continue
        else:
            return sorted(stacks)
    return sorted(touched)


def stack_settings(stack: str, stacks_dir: Path = STACKS_DIR) -> Mapping[str, Any]:
    import yaml  # only the subcommands that read stack files need PyYAML

    doc = yaml.safe_load((stacks_dir / f"Pulumi.{stack}.yaml").read_text()) or {}
    return (doc.get("config") or {}).get(SETTINGS_KEY) or {}


def deploy_marked(stacks: Iterable[str], stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(s for s in stacks if stack_settings(s, stacks_dir).get("deploy_on_merge") is True)


def last_deployed_at(history: Sequence[Mapping[str, Any]]) -> Optional[datetime]:
    """When the stack was last brought up, or None when it is not up (never deployed, or destroyed since).

    `history` is `pulumi stack history --json`, newest first; `kind` is one of Pulumi's UpdateKinds (update,
    preview, refresh, rename, destroy, import, resource-import). Previews, refreshes and renames do not change
    what is running; a failed update may still have created resources, so it counts as a deploy.
    """
    for entry in history:
        kind = entry.get("kind")
        if kind == "destroy" and entry.get("result") == "succeeded":
            return None
        if kind in DEPLOY_KINDS:
            # UTC RFC 3339 with fractional seconds, e.g. 2026-11-30T04:40:15.000Z (pulumi/automation/_stack.py
            # parses it with "%Y-%m-%dT%H:%M:%S.%fZ"); fromisoformat also takes it without the fraction.
            stamp = entry.get("endTime") or entry.get("startTime")
            return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return None


def ttl_expired(history: Sequence[Mapping[str, Any]], ttl_hours: Optional[int], now: datetime) -> bool:
    if not ttl_hours:
        return False
    if history and history[0].get("result") == "in-progress":
        return False  # an update is running: its own concurrency group serialises us after it anyway
    deployed = last_deployed_at(history)
    return deployed is not None and now - deployed >= timedelta(hours=ttl_hours)


def cost_section(plan_markdown: str) -> Optional[str]:
    """The plan's cost section (its `## ...cost...` heading through the next `## `), or None."""
    lines = plan_markdown.splitlines()
    for i, line in enumerate(lines):
        if COST_HEADING.match(line):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
            return "\n".join(lines[i:end]).strip()
    return None


def cost_comment(stack: str, plan_markdown: str, image: Optional[str] = None) -> Optional[str]:
    section = cost_section(plan_markdown)
    if section is None:
        return None
    section = re.sub(r"^##\s+", "### ", section, count=1)
    # Reviewers should see which image (and so which verl build) the stack will run.
    image_line = f"Training image: `{image}`\n\n" if image else ""
    return (f"{COMMENT_MARKER.format(stack=stack)}\n"
            f"## Offline plan of stack `{stack}`: cost estimate\n\n{image_line}{section}\n\n"
            f"_From `plan.py --stack {stack}` (offline; the `plans` artifact has the full plan)._\n")


def plan_image(plan_json: Path) -> Optional[str]:
    """The `training_image` stack output recorded in the plan's plan.json, if any."""
    if not plan_json.exists():
        return None
    return json.loads(plan_json.read_text()).get("outputs", {}).get("training_image")


def _git_changed(base: str, head: str, merge_base: bool) -> list[str]:
    spec = f"{base}...{head}" if merge_base else f"{base}..{head}"
    out = subprocess.run(["git", "diff", "--name-only", spec], cwd=REPO, check=True, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line]


def _history(stack: str) -> Optional[list[dict]]:
    proc = subprocess.run(["pulumi", "stack", "history", "--stack", stack, "--json"],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{stack}: no history ({proc.stderr.strip() or 'pulumi stack history failed'}); skipped", file=sys.stderr)
        return None
    return json.loads(proc.stdout or "[]")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("preview", help="stacks a pull request touches")
    p.add_argument("--base", required=True)
    p.add_argument("--head", required=True)
    p = sub.add_parser("deploy", help="touched stacks marked deploy_on_merge")
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p = sub.add_parser("expired", help="stacks whose ttl_hours has run out since the last deploy")
    p.add_argument("--stack", default="", help="tear down this stack now, whatever its TTL")
    p = sub.add_parser("cost", help="PR comment body with the plan's cost section (empty when it has none)")
    p.add_argument("--stack", required=True)
    p.add_argument("--plan", type=Path, required=True)
    args = ap.parse_args(argv)
    stacks = stack_names()

    if args.command == "preview":
        print(json.dumps(stacks_touched(_git_changed(args.base, args.head, merge_base=True), stacks)))
    elif args.command == "deploy":
        touched = stacks if args.before == NULL_SHA else stacks_touched(
            _git_changed(args.before, args.after, merge_base=False), stacks)
        print(json.dumps(deploy_marked(touched)))
    elif args.command == "expired":
        if args.stack:
            if args.stack not in stacks:
                print(f"no stack file stacks/Pulumi.{args.stack}.yaml (stacks: {', '.join(stacks)})", file=sys.stderr)
                return 2
            print(json.dumps([args.stack]))
            return 0
        now = datetime.now(UTC)
        expired = []
        for stack in stacks:
            ttl = stack_settings(stack).get("ttl_hours")
            if ttl and (history := _history(stack)) is not None and ttl_expired(history, ttl, now):
                expired.append(stack)
        print(json.dumps(expired))
    elif args.command == "cost":
        image = plan_image(args.plan.with_name("plan.json"))
        body = cost_comment(args.stack, args.plan.read_text(), image) if args.plan.exists() else None
        sys.stdout.write(body or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
