"""Which stacks a workflow run acts on, whether it may act on them now, and what it posts about them.

    python .github/workflows/ci_stacks.py preview --base SHA --head SHA   # stacks a PR touches (JSON list)
    python .github/workflows/ci_stacks.py deploy --before SHA --after SHA # touched stacks marked deploy_on_merge
    python .github/workflows/ci_stacks.py deploy-guard --stack NAME       # inside the lock: may HEAD be deployed?
    python .github/workflows/ci_stacks.py expired [--stack NAME]          # candidates for the TTL teardown
    python .github/workflows/ci_stacks.py teardown-guard --stack NAME [--requested]  # inside the lock: destroy?
    python .github/workflows/ci_stacks.py cost --stack NAME --plan out/NAME/plan.md  # PR comment body

The workflows in this folder call it; the decisions are plain functions that tests/test_workflows.py
exercises. Stack settings are read from `verl-ack:settings` in stacks/Pulumi.<name>.yaml, the keys the
settings model (components/config/__init__.py) defines: `deploy_on_merge`, `ttl_hours`, `kind` and
`platform_stack`.

The two guards run inside the per-stack concurrency group, right before `pulumi up` / the destroy: what a
`select` job saw minutes (or a reviewer's wait) earlier is only a pre-filter. Both fail closed: a history that
cannot be read, a deployed commit that is not an ancestor of the one to deploy, an owed deploy or a running
experiment stop the job with exit 1 and a message, never a silent skip.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
# The Makefile and every requirements file do count: `make runtime` builds the venv deploy and preview run the
# program from, and a moved pin can change what the program renders.
NON_PROGRAM_FILES = frozenset({
    "README.md", "plan.py", "teardown.py", "pyproject.toml", ".gitignore", "stacks/stack.schema.json",
})
# `git diff` against this "commit" (GitHub's `before` for a new branch) has nothing to compare with.
NULL_SHA = "0" * 40
# History entries that (may) leave resources running.
DEPLOY_KINDS = ("update", "import", "resource-import")
# `pulumi stack history` shows 10 entries unless told otherwise; read it in pages of this size until the
# entry that decides is found (or the history ends), never one page only.
HISTORY_PAGE_SIZE = 100
# More pages than this without a deploy or destroy in them: give up loudly rather than guess.
HISTORY_MAX_PAGES = 50
# The commit an update ran, as the CLI records it in UpdateInfo.Environment (pulumi/pulumi pkg/backend/updates.go,
# GitHead = "git.head"); deploy.yml also writes it into the update message.
GIT_HEAD_KEY = "git.head"
DEPLOY_MESSAGE = re.compile(r"\bdeploy\.yml: (?P<sha>[0-9a-f]{40})\b")
# The CLI's error for a stack the backend does not have (pulumi/automation/errors.py not_found_regex).
STACK_NOT_FOUND = re.compile(r"no stack named.*found")
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


class Refused(Exception):
    """A guard's reason to stop the job loudly (exit 1) instead of acting."""


class HistoryUnreadable(Refused):
    """`pulumi stack history` failed or printed something that is not its JSON."""


def history_entries(fetch_page: Callable[[int], list[dict]], page_size: int = HISTORY_PAGE_SIZE,
                    max_pages: int = HISTORY_MAX_PAGES) -> Iterator[dict]:
    """Every history entry, newest first, fetched a page at a time (pages count from 1) until a short page.

    A consumer that stops early fetches no further page; one that reads past `max_pages` pages is refused."""
    for page in range(1, max_pages + 1):
        entries = fetch_page(page)
        yield from entries
        if len(entries) < page_size:
            return
    raise HistoryUnreadable(f"more than {max_pages * page_size} history entries without the deploy or destroy "
                            "that decides; read `pulumi stack history` yourself")


def _stamp(entry: Mapping[str, Any]) -> datetime:
    # UTC RFC 3339 with fractional seconds, e.g. 2026-11-30T04:40:15.000Z (pulumi/automation/_stack.py
    # parses it with "%Y-%m-%dT%H:%M:%S.%fZ"); fromisoformat also takes it without the fraction.
    stamp = entry.get("endTime") or entry.get("startTime")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def last_deployed_at(history: Iterable[Mapping[str, Any]]) -> Optional[datetime]:
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
            return _stamp(entry)
    return None


def entry_commit(entry: Mapping[str, Any]) -> Optional[str]:
    head = (entry.get("environment") or {}).get(GIT_HEAD_KEY)
    if isinstance(head, str) and re.fullmatch(r"[0-9a-f]{40}", head):
        return head
    match = DEPLOY_MESSAGE.search(entry.get("message") or "")
    return match["sha"] if match else None


def last_deployed_commit(history: Iterable[Mapping[str, Any]]) -> tuple[bool, Optional[str]]:
    """(whether any update ran, the commit the newest one ran or None when it recorded none)."""
    for entry in history:
        if entry.get("kind") in DEPLOY_KINDS:
            return True, entry_commit(entry)
    return False, None


def ttl_started_at(versions: Sequence[tuple[datetime, Optional[int]]]) -> Optional[datetime]:
    """When the stack file's current ttl_hours was set: `versions` are (commit time, ttl_hours) of the commits
    that changed the file, newest first; the answer is the oldest commit of the newest run with today's value."""
    if not versions:
        return None
    current, started = versions[0][1], versions[0][0]
    for when, ttl in versions:
        if ttl != current:
            break
        started = when
    return started


def ttl_expired(history: Iterable[Mapping[str, Any]], ttl_hours: Optional[int], now: datetime,
                ttl_set_at: Optional[datetime] = None) -> bool:
    """Whether ttl_hours have passed since the later of the last deploy and the moment the TTL was set: a TTL
    added to a month-old stack counts from the commit that added it, not from that month-old deploy."""
    if not ttl_hours:
        return False
    entries = list(_until_decided(history))  # later pages stay unread
    if entries and entries[0].get("result") == "in-progress":
        return False  # an update is running: its own concurrency group serialises us after it anyway
    deployed = last_deployed_at(entries)
    if deployed is None:
        return False
    start = max(deployed, ttl_set_at) if ttl_set_at else deployed
    return now - start >= timedelta(hours=ttl_hours)


def deploy_decision(history: Iterable[Mapping[str, Any]], head: str,
                    is_ancestor: Callable[[str, str], bool]) -> tuple[bool, str]:
    """Inside the lock: (deploy?, why). Never a commit older than the one deployed: a run whose commit the stack
    has already moved past is skipped; a deployed commit that is not an ancestor of HEAD (a force-push, an `up`
    from another branch, an update that recorded no commit) stops the job for a human to look at."""
    updated, deployed = last_deployed_commit(history)
    if not updated:
        return True, "the stack has never been updated"
    if deployed is None:
        raise Refused("the stack's newest update recorded no commit (an `up` from outside deploy.yml, not in a git "
                      "checkout): check what it runs, then deploy by hand or re-run this job")
    if deployed == head:
        return True, f"re-deploying {head[:12]}, the commit the stack runs"
    if is_ancestor(deployed, head):
        return True, f"{head[:12]} descends from the deployed {deployed[:12]}"
    if is_ancestor(head, deployed):
        return False, f"the stack already runs {deployed[:12]}, newer than {head[:12]}: nothing older is deployed"
    raise Refused(f"the stack runs {deployed[:12]}, which is not an ancestor of {head[:12]} (a force-push to main, or "
                  "an `up` from another branch): check the stack, then deploy by hand")


def teardown_decision(*, requested: bool, ttl_hours: Optional[int], history: Iterable[Mapping[str, Any]],
                      now: datetime, ttl_set_at: Optional[datetime] = None, owed: Optional[str] = None,
                      dependents_up: Sequence[str] = ()) -> tuple[bool, str]:
    """Inside the lock, right before destroying: (destroy?, why), or Refused (exit 1, nothing destroyed)."""
    if dependents_up:
        raise Refused(f"experiment stack(s) {', '.join(dependents_up)} run on this platform (their history shows "
                      "them up): tear them down first, or their GPU pools and RayJobs lose the cluster under them")
    if requested:
        return True, "requested by workflow_dispatch (the TTL is not consulted)"
    if not ttl_hours:
        return False, "no ttl_hours in the stack file (any more)"
    history = list(_until_decided(history))
    if history and history[0].get("result") == "in-progress":
        raise Refused("the newest update is still in progress although this job holds the stack's lock: an update "
                      "outside these workflows, or a run killed mid-flight (then `pulumi cancel`); nothing destroyed")
    if not ttl_expired(history, ttl_hours, now, ttl_set_at):
        return False, "not expired: deployed (or given its TTL) less than ttl_hours ago, or not up"
    if owed:
        raise Refused(f"{owed}: a deploy of this stack is owed (pending for a reviewer, or cancelled by a later run "
                      "of the same concurrency group); destroying now would undo a merge. Deploy it (re-run "
                      "deploy.yml) or dispatch the teardown by hand")
    return True, f"ttl_hours {ttl_hours} passed"


def _until_decided(history: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The entries up to and including the first that decides last_deployed_at (so later pages stay unread)."""
    for entry in history:
        yield entry
        if entry.get("kind") in DEPLOY_KINDS or (entry.get("kind") == "destroy" and entry.get("result") == "succeeded"):
            return


def is_up(history: Iterable[Mapping[str, Any]]) -> bool:
    return last_deployed_at(history) is not None


def dependent_experiments(platform: str, stacks: Iterable[str], stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Experiment stacks whose platform_stack names this stack (its last part is the stack name)."""
    out = []
    for stack in stacks:
        settings = stack_settings(stack, stacks_dir)
        ref = settings.get("platform_stack")
        if settings.get("kind") == "experiment" and isinstance(ref, str) and ref.rsplit("/", 1)[-1] == platform:
            out.append(stack)
    return sorted(out)


def owed_deploy(stack: str, deployed: Optional[str], head: str, changed: Callable[[str, str], list[str]],
                stacks: Sequence[str], stacks_dir: Path = STACKS_DIR) -> Optional[str]:
    """Why a deploy of `stack` is owed (commits after the deployed one touch it and it deploys on merge), or None."""
    if not deployed or deployed == head or stack_settings(stack, stacks_dir).get("deploy_on_merge") is not True:
        return None
    if stack in stacks_touched(changed(deployed, head), stacks):
        return f"main ({head[:12]}) changes stack {stack} since the deployed {deployed[:12]}"
    return None


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


def _history_page(stack: str, page: int) -> list[dict]:
    proc = subprocess.run(["pulumi", "stack", "history", "--stack", stack, "--json",
                           "--page-size", str(HISTORY_PAGE_SIZE), "--page", str(page)],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        if STACK_NOT_FOUND.search(proc.stderr):
            return []  # a stack the backend never created: nothing is up
        raise HistoryUnreadable(f"`pulumi stack history` failed for {stack}: {proc.stderr.strip()[-500:]}")
    try:
        entries = json.loads(proc.stdout or "[]")
    except ValueError as err:
        raise HistoryUnreadable(f"`pulumi stack history --json` printed no JSON for {stack} ({err})") from None
    if not isinstance(entries, list):
        raise HistoryUnreadable(f"`pulumi stack history --json` printed a {type(entries).__name__} for {stack}")
    return entries


def _history(stack: str) -> Iterator[dict]:
    return history_entries(lambda page: _history_page(stack, page))


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


def _is_ancestor(older: str, newer: str) -> bool:
    # exit 0: ancestor; 1: not; anything else (a commit this clone lacks): not known to be, so not.
    return _git("merge-base", "--is-ancestor", older, newer).returncode == 0


def _head() -> str:
    return _git("rev-parse", "HEAD").stdout.strip()


def _ttl_versions(stack: str) -> list[tuple[datetime, Optional[int]]]:
    """(commit time, ttl_hours) of each commit that changed the stack file, newest first, stopping at the first
    whose value differs from today's. A shallow clone sees fewer commits and so a later start: the TTL errs late."""
    import yaml

    path = f"stacks/Pulumi.{stack}.yaml"
    log = _git("log", "--format=%H %cI", "--", path)
    versions: list[tuple[datetime, Optional[int]]] = []
    for line in log.stdout.splitlines():
        sha, when = line.split(" ", 1)
        shown = _git("show", f"{sha}:{path}")
        try:
            doc = yaml.safe_load(shown.stdout) if shown.returncode == 0 else None
        except yaml.YAMLError:
            doc = None
        settings = ((doc or {}).get("config") or {}).get(SETTINGS_KEY) or {} if isinstance(doc, dict) else {}
        ttl = settings.get("ttl_hours") if isinstance(settings, dict) else None
        versions.append((datetime.fromisoformat(when), ttl))
        if ttl != versions[0][1]:
            break
    return versions


def _now() -> datetime:
    return datetime.now(UTC)


def _outputs(**values: Any) -> str:
    """GITHUB_OUTPUT lines."""
    return "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in values.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("preview", help="stacks a pull request touches")
    p.add_argument("--base", required=True)
    p.add_argument("--head", required=True)
    p = sub.add_parser("deploy", help="touched stacks marked deploy_on_merge")
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p = sub.add_parser("deploy-guard", help="inside the lock: may the checked-out commit be deployed (GITHUB_OUTPUT)")
    p.add_argument("--stack", required=True)
    p = sub.add_parser("expired", help="candidates for the TTL teardown: expired, or undecidable from here")
    p.add_argument("--stack", default="", help="tear down this stack now, whatever its TTL")
    p = sub.add_parser("teardown-guard", help="inside the lock: destroy the stack now? (GITHUB_OUTPUT)")
    p.add_argument("--stack", required=True)
    p.add_argument("--requested", action="store_true", help="a dispatched teardown: the TTL is not consulted")
    p = sub.add_parser("cost", help="PR comment body with the plan's cost section (empty when it has none)")
    p.add_argument("--stack", required=True)
    p.add_argument("--plan", type=Path, required=True)
    args = ap.parse_args(argv)
    stacks = stack_names()

    try:
        return _run(args, stacks)
    except Refused as err:
        # ::error:: makes it an annotation on the run; the job fails, nothing was changed.
        print(f"::error::{getattr(args, 'stack', '') or 'ci_stacks'}: {err}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, stacks: list[str]) -> int:
    if args.command in ("deploy-guard", "teardown-guard") and args.stack not in stacks:
        if args.command == "deploy-guard":  # main no longer has the stack file: nothing to deploy
            sys.stdout.write(_outputs(deploy=False, sha=_head()))
            print(f"{args.stack}: no stack file on main any more; nothing deployed", file=sys.stderr)
            return 0
        print(f"no stack file stacks/Pulumi.{args.stack}.yaml (stacks: {', '.join(stacks)})", file=sys.stderr)
        return 2
    if args.command == "preview":
        print(json.dumps(stacks_touched(_git_changed(args.base, args.head, merge_base=True), stacks)))
    elif args.command == "deploy":
        touched = stacks if args.before == NULL_SHA else stacks_touched(
            _git_changed(args.before, args.after, merge_base=False), stacks)
        print(json.dumps(deploy_marked(touched)))
    elif args.command == "deploy-guard":
        head = _head()
        if stack_settings(args.stack).get("deploy_on_merge") is not True:
            ok, why = False, "main's stack file no longer says deploy_on_merge: true"
        else:
            ok, why = deploy_decision(_history(args.stack), head, _is_ancestor)
        print(f"{args.stack}: {'deploying' if ok else 'not deploying'}: {why}", file=sys.stderr)
        sys.stdout.write(_outputs(deploy=ok, sha=head))
    elif args.command == "expired":
        if args.stack:
            if args.stack not in stacks:
                print(f"no stack file stacks/Pulumi.{args.stack}.yaml (stacks: {', '.join(stacks)})", file=sys.stderr)
                return 2
            print(json.dumps([args.stack]))
            return 0
        now = _now()
        candidates = []
        for stack in stacks:
            ttl = stack_settings(stack).get("ttl_hours")
            if not ttl:
                continue
            try:
                if ttl_expired(_until_decided(_history(stack)), ttl, now, ttl_started_at(_ttl_versions(stack))):
                    candidates.append(stack)
            except Refused as err:
                # Fail closed: the teardown job reads it again inside the lock and fails loudly if it still cannot.
                print(f"::warning::{stack}: {err}; handed to the teardown job, which decides inside the lock",
                      file=sys.stderr)
                candidates.append(stack)
        print(json.dumps(candidates))
    elif args.command == "teardown-guard":
        settings = stack_settings(args.stack)
        dependents = [s for s in dependent_experiments(args.stack, stacks) if is_up(_history(s))] \
            if settings.get("kind") == "platform" else []
        head = _head()
        history = list(_until_decided(_history(args.stack))) if not args.requested else []
        _, deployed = last_deployed_commit(history)
        # A deployed commit main does not descend from (an `up` from another branch) owes nothing to main.
        owed = None if args.requested or not deployed or not _is_ancestor(deployed, head) else owed_deploy(
            args.stack, deployed, head, lambda a, b: _git_changed(a, b, merge_base=False), stacks)
        destroy, why = teardown_decision(
            requested=args.requested, ttl_hours=settings.get("ttl_hours"), history=history, now=_now(),
            ttl_set_at=ttl_started_at(_ttl_versions(args.stack)), owed=owed, dependents_up=dependents)
        print(f"{args.stack}: {'destroying' if destroy else 'not destroying'}: {why}", file=sys.stderr)
        sys.stdout.write(_outputs(destroy=destroy))
    elif args.command == "cost":
        image = plan_image(args.plan.with_name("plan.json"))
        body = cost_comment(args.stack, args.plan.read_text(), image) if args.plan.exists() else None
        sys.stdout.write(body or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
