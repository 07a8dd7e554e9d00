"""Every shipped stack's URNs are held by a committed snapshot (tests/snapshots/urns/<stack>.txt): a URN is a
resource's identity in the state (its type, its ancestors' types and its logical name), so a changed URN makes
`pulumi up` delete the old resource and create a new one, a cluster or a GPU pool included. A URN may leave the
snapshot only when a resource carries an `aliases` entry that names it (the engine then moves the state to the new
URN, no replacement), or when the snapshot is regenerated on purpose:

    make urns VENV=...        # VERL_ACK_ACCEPT_URN_CHANGES=1 pytest tests/test_urns.py; say so in the PR

(docs/review-and-teardown.md, "URN snapshot"). `plan.py --base-ref` shows such a change as deletes and creates.
"""

from __future__ import annotations

import os

import pytest

from offline.engine import Recording
from tests.conftest import STACKS, record
from tests.snapshot import SNAPSHOTS

ACCEPT = "VERL_ACK_ACCEPT_URN_CHANGES"
STACK_TYPE = "pulumi:pulumi:Stack"


def _chain(reg, by_urn) -> list:
    """The resource and its ancestors below the Stack, outermost first."""
    chain = []
    while reg is not None and reg.type != STACK_TYPE:
        chain.append(reg)
        reg = by_urn.get(reg.parent)
    return chain[::-1]


def _identity(urn: str) -> str:
    """An engine URN without its stack and project: `qualified$type::name`."""
    return urn.split("::", 2)[2]


def identities(rec: Recording) -> set[str]:
    """What makes each managed resource's URN (reads are not in the state as owned)."""
    by_urn = rec.by_urn()
    return {"$".join(r.type for r in _chain(reg, by_urn)) + "::" + reg.name
            for reg in rec.resources if not reg.options.get("read") and reg.type != STACK_TYPE}


def aliased(rec: Recording) -> set[str]:
    """Every URN an `aliases` entry names: a resource's own, and its children's under each of its old URNs (the
    engine derives a child's old URN from its parent's alias)."""
    by_urn = rec.by_urn()
    out = set()
    for reg in rec.resources:
        chain = _chain(reg, by_urn)
        for i, ancestor in enumerate(chain):
            below = "".join(f"${r.type}" for r in chain[i + 1:])
            for alias in ancestor.options.get("aliases") or []:
                old_type, old_name = _identity(alias).rsplit("::", 1)
                out.add(f"{old_type}{below}::{reg.name}" if below else f"{old_type}::{old_name}")
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_a_shipped_stack_changes_no_urn_without_an_alias_or_a_deliberate_snapshot(stack):
    rec = record(stack)
    now = identities(rec)
    path = SNAPSHOTS / "urns" / f"{stack}.txt"
    if os.environ.get(ACCEPT) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{u}\n" for u in sorted(now)))
    assert path.exists(), f"no URN snapshot {path}; run `make urns` to create it"
    held = set(path.read_text().splitlines())
    moved = (held - now) & aliased(rec)
    vanished = sorted(held - now - moved)
    assert not vanished, (
        f"{stack}: these URNs are gone, so `pulumi up` deletes each and creates its successor (a renamed name, type "
        "or parent): add `aliases=[pulumi.Alias(name=<old name>)]` (or type/parent) to the resource, or, if the "
        "replacement is intended, run `make urns` and say so in the PR:\n  " + "\n  ".join(vanished))
    new = sorted(now - held)
    assert not new or moved, (
        f"{stack}: new URNs not in the snapshot; run `make urns` to hold them:\n  " + "\n  ".join(new))


def test_an_alias_covers_its_own_old_urn_and_its_childrens():
    from offline.engine import Registration

    def reg(urn, type_, name, parent="", aliases=()):
        return Registration(urn, type_, name, False, parent, "", [], {}, {}, {"aliases": list(aliases)})

    stack = reg("s", STACK_TYPE, "p-dev")
    comp = reg("c", "verl-ack:x:New", "new", "s", ["urn:pulumi:dev::p::verl-ack:x:Old::old"])
    child = reg("k", "kubernetes:core/v1:Namespace", "ns", "c")
    rec = Recording(resources=[stack, comp, child])
    assert identities(rec) == {"verl-ack:x:New::new", "verl-ack:x:New$kubernetes:core/v1:Namespace::ns"}
    assert aliased(rec) == {"verl-ack:x:Old::old", "verl-ack:x:Old$kubernetes:core/v1:Namespace::ns"}



PROGRAM = '''
import pulumi

NAME, OLD = {name!r}, {old!r}


def aliases(name):
    return [pulumi.Alias(name=name)] if OLD else []


class Box(pulumi.ComponentResource):
    def __init__(self, name, opts=None):
        super().__init__("verl-ack:test:Box", name, None, opts)
        pulumi.CustomResource("verl-ack:test:Thing", f"{{name}}-thing", {{"size": {size}}},
                              opts=pulumi.ResourceOptions(parent=self, aliases=aliases(f"{{OLD}}-thing")))
        self.register_outputs({{}})


Box(NAME, pulumi.ResourceOptions(aliases=aliases(OLD)))
'''


def _run(tmp_path, name: str, old: str = "", size: int = 1, prior=None, own=None) -> Recording:
    from offline.engine import run_program

    program = tmp_path / f"{name}-{old}-{size}.py"
    program.write_text(PROGRAM.format(name=name, old=old, size=size))
    return run_program(program, {}, [], project="p", stack="s", prior=prior, own_outputs=own, offline_plan=False)


def _review(tmp_path, base: Recording, **new) -> set[tuple[str, str]]:
    from offline import day2
    from offline.changes import changes

    state, again = day2.second_run(base, lambda own, prior: _run(tmp_path, prior=prior, own=own, **new))
    return {(c.name, c.action) for c in changes(base, state, again)}


def test_a_rename_without_aliases_moves_every_urn_and_the_review_deletes_and_creates(tmp_path):
    old = _run(tmp_path, "old")
    held = identities(old)
    assert held == {"verl-ack:test:Box::old", "verl-ack:test:Box$verl-ack:test:Thing::old-thing"}
    renamed = _run(tmp_path, "new")
    assert held - identities(renamed) - aliased(renamed) == held  # the snapshot test would fail on both
    assert _review(tmp_path, old, name="new") == {("new-thing", "create"), ("old-thing", "delete")}
    # the review says so, naming both
    from offline import day2
    from offline.review import renamed_warnings

    [warning] = renamed_warnings(day2.change_report(old, lambda own, prior: _run(tmp_path, "new", prior=prior, own=own)))
    assert "URNs changed" in warning and "old-thing deleted and new-thing created" in warning and "aliases" in warning


def test_a_rename_with_aliases_keeps_the_state_and_the_review_shows_only_real_changes(tmp_path):
    old = _run(tmp_path, "old")
    renamed = _run(tmp_path, "new", old="old")
    assert identities(old) <= aliased(renamed)  # the snapshot test passes: every vanished URN is named
    assert _review(tmp_path, old, name="new", old="old") == set()
    from offline import day2
    from offline.review import renamed_warnings

    assert renamed_warnings(day2.change_report(old, lambda own, prior: _run(tmp_path, "new", "old", prior=prior,
                                                                               own=own))) == []
    assert _review(tmp_path, old, name="new", old="old", size=2) == {("new-thing", "update")}
