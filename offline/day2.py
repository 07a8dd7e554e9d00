"""Day 2 offline: the second preview of a stack, and the change-impact report of an edit.

- **Second preview**: run the program once (the first `pulumi up`), turn what it registered into the state a
  real stack would then hold (offline/readback.py: what each provider's Read stores, what controllers and
  Kubernetes change), run the program again over that state with the first run's outputs as its own stack
  outputs, and diff (offline/changes.py). Nothing changed, so every stack's second preview must be empty.
- **Change report**: the same with two stack files: the base (the file at the PR's merge base) makes the state,
  the new file makes the second run. Its changes (create, update, replace, delete, ignored) go into plan.json
  and first into plan.md.

A program may refuse a change it cannot make safely (it reads its previous outputs through a StackReference to
its own stack and raises "refused change: ..."); that surfaces here as `ChangeRefused`.
"""

from __future__ import annotations

from collections.abc import Callable

from offline.changes import Change, changes
from offline.engine import RawState, Recording, StackOutputs
from offline.readback import readback

REFUSED = "refused change:"
# run(settings/config chosen by the caller, own_outputs, prior) -> Recording
Runner = Callable[[StackOutputs | None, dict[str, RawState] | None], Recording]


class ChangeRefused(Exception):
    """The program refused the change (its message starts with "refused change:" and names the setting)."""


def _refusal(err: BaseException) -> str | None:
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        if REFUSED in text:
            return text[text.index(REFUSED):].strip()
        seen = seen.__cause__ or seen.__context__
    return None


def _run(run: Runner, own: StackOutputs | None, prior: dict[str, RawState] | None) -> Recording:
    try:
        return run(own, prior)
    except Exception as err:
        message = _refusal(err)
        if message:
            raise ChangeRefused(message) from None
        raise


def second_run(first: Recording, run: Runner) -> tuple[dict[str, RawState], Recording]:
    """The state after `first` and the run of `run` over it."""
    state = readback(first)
    return state, _run(run, StackOutputs.of(first), state)


def second_preview(first: Recording, run: Runner) -> list[Change]:
    """What `pulumi preview` would show right after the first `up` (and a refresh) with nothing changed: only the
    changes the providers would make (an ignored change is not a diff)."""
    state, again = second_run(first, run)
    return [c for c in changes(first, state, again) if c.action != "ignored"]


def change_report(base: Recording, run_new: Runner) -> list[Change]:
    """The changes a new stack file makes against the stack the base file built."""
    state, new = second_run(base, run_new)
    return changes(base, state, new)


def markdown(changes_: list[Change], base_name: str) -> str:
    """The "Changes against <base>" section of plan.md."""
    head = [f"## Changes against {base_name}", ""]
    if not changes_:
        return "\n".join(head + ["No changes: `pulumi preview` would show nothing to do.", ""])
    counts = {}
    for c in changes_:
        counts[c.action] = counts.get(c.action, 0) + 1
    order = ["replace", "delete", "create", "update", "ignored"]
    summary = ", ".join(f"{counts[a]} {a}" for a in order if a in counts)
    lines = head + [f"{summary}. `ignored`: the program changed it but the provider will not apply it "
                    "(a create-only field or ignore_changes).", "",
                    "| action | resource | type | fields | why |", "|---|---|---|---|---|"]
    for c in sorted(changes_, key=lambda c: order.index(c.action)):
        why = "; ".join(f"`{k}`: {v}" for k, v in c.notes.items())
        fields = ", ".join(f"`{f}`" for f in c.fields[:8]) + (f" (+{len(c.fields) - 8})" if len(c.fields) > 8 else "")
        lines.append(f"| **{c.action}** | {c.name} | `{c.type}` | {fields} | {why} |")
    return "\n".join(lines + [""])
