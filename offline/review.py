"""What a change means to a reviewer: the settings that changed, what each resource's change does, and what it costs.

offline/changes.py decides *which* resources change and how (the providers' diff); this module says it the way a
reviewer reads a PR, from the two offline plans (the base file's and the new file's):

1. the settings that changed, old -> new, in the stack file's own dotted names;
2. per resource the action with each changed field's old -> new value (long values shortened around the
   difference, secrets never shown: values are read from the recorded inputs, where a secret is `[secret]`) and
   a plain reason;
3. the deltas a reviewer weighs: cost per run and per month, GPU-hours, the modelled time to the first step, the
   per-GPU memory estimate against the GPU, and a warning for anything that moves the stack over a target.

`review(...)` returns plan.json's `review`; `markdown(review, base_name)` the "Changes against" section of plan.md,
which the PR workflow posts as the change-report comment (a fork's too, through pr-comment.yml).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from offline.changes import Change, parse_path
from offline.engine import SECRET, Recording
from offline.report.cost import run_and_month

# How much of a long value to show on either side of where old and new differ.
CONTEXT = 24
SHORT = 60  # values up to this length are shown whole
MAX_FIELDS_MD = 8  # field rows per resource in plan.md (plan.json holds all)
MAX_WORD_GROUPS = 8  # a command line that changed in more places than this is cut by characters instead


# ---------------------------------------------------------------------------------------------- values
def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _word_diff(old: str, new: str, groups: int = MAX_WORD_GROUPS) -> tuple[str, str] | None:
    """A command line (words of `key=value`) changed in a few words: only those words of each side, `…` between."""
    a, b = old.split(" "), new.split(" ")
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops or len(ops) > groups:
        return None
    def side(words: list[str], lo: int, hi: int) -> str:
        return " ".join(words[lo:hi]) or "(none)"
    old_text = " … ".join(side(a, i1, i2) for _, i1, i2, _, _ in ops)
    new_text = " … ".join(side(b, j1, j2) for _, _, _, j1, j2 in ops)
    return f"… {old_text} …", f"… {new_text} …"


def shorten(old: str, new: str, context: int = CONTEXT, short: int = SHORT) -> tuple[str, str]:
    """Both values cut to where they differ (`…` where cut): the changed words of a command line, else the part
    around the first and last differing character, so a 2 KB value that changed one word shows that word."""
    if len(old) <= short and len(new) <= short:
        return old, new
    if " " in old and " " in new and (words := _word_diff(old, new)):
        return words
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1

    def cut(v: str) -> str:
        start = max(0, head - context)
        end = min(len(v), len(v) - tail + context)
        return ("…" if start > 0 else "") + v[start:end] + ("…" if end < len(v) else "")

    return cut(old), cut(new)


def _get(obj: Any, path: tuple) -> tuple[bool, Any]:
    for p in path:
        if isinstance(obj, dict) and p in obj:
            obj = obj[p]
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return False, None
    return True, obj


def _is_secret_path(inputs: dict, path: tuple) -> bool:
    """A Kubernetes Secret's payload is a secret whatever the engine recorded."""
    return inputs.get("kind") == "Secret" and bool(path) and path[0] in ("data", "stringData")


def _shown(found: bool, value: Any, secret: bool) -> str:
    if not found:
        return "(unset)"
    if secret or SECRET in _text(value):
        return SECRET
    return _text(value)


def readable_path(inputs: dict, path: tuple) -> str:
    """`spec.template.spec.containers[0].env[10].value` -> `…containers[stage].env[HF_MODEL_ID].value`: a list item
    that carries a `name` is named by it (the raw path stays in plan.json)."""
    out, node = "", inputs
    for p in path:
        if isinstance(p, int):
            item = node[p] if isinstance(node, list) and p < len(node) else None
            label = item.get("name") if isinstance(item, dict) else None
            out += f"[{label}]" if isinstance(label, str) and label else f"[{p}]"
            node = item
        else:
            out += f".{p}" if out else str(p)
            node = node.get(p) if isinstance(node, dict) else None
    return out


def field_values(change: Change, base: Recording, new: Recording) -> list[dict]:
    """Each changed field of `change` with its old and new value as the recorded inputs hold them (redacted)."""
    old_reg = next((r for r in base.resources if r.urn == change.urn), None)
    new_reg = next((r for r in new.resources if r.urn == change.urn), None)
    old_in = old_reg.inputs if old_reg else {}
    new_in = new_reg.inputs if new_reg else {}
    out = []
    for name in change.fields:
        if name == "provider":
            continue  # the reason says which provider is replaced
        path = parse_path(name)
        secret = _is_secret_path(new_in or old_in, path)
        o_found, o = _get(old_in, path)
        n_found, n = _get(new_in, path)
        old_text, new_text = shorten(_shown(o_found, o, secret), _shown(n_found, n, secret))
        out.append({"field": name, "readable": readable_path(new_in if n_found else old_in, path),
                    "old": old_text, "new": new_text})
    return out


# ---------------------------------------------------------------------------------------------- reasons
_KIND_REASONS = {
    # Why each kind of replacement happens, in a reviewer's words (the rule itself is offline/changes.py's).
    "ForceNew in the provider schema": "the cloud API cannot change {fields} of an existing {what}: the provider "
                                       "creates a new one and deletes the old",
    "pulumi-kubernetes replaces the object when this changes": "Kubernetes does not let {fields} of a {what} change "
                                                               "after creation: the object is deleted and created anew",
    "replace_on_changes": "the program replaces the {what} when {fields} changes (replace_on_changes)",
}
_DBR = {
    "kubernetes:ray.io/v1:RayJob": "the RayJob is deleted first, then created: KubeRay does not resubmit a job whose "
                                   "spec changes, and the new one takes the same name",
    "alicloud:cs/nodePool:NodePool": "the pool is deleted first, then created: a Lingjun node sits in one node pool "
                                     "only, so the old pool must release it",
}


def _what(type_: str) -> str:
    return type_.rsplit(":", 1)[-1] or "resource"


def reason(change: Change) -> str:
    """One plain sentence (or two) saying why the resource changes the way it does."""
    what = _what(change.type)
    if change.action == "create":
        return f"new in this program run: a {what} is created"
    if change.action == "delete":
        base = f"no longer in the program: the {what} is deleted"
        return base + ("; it is protected, so `pulumi up` fails until it is unprotected" if "protect" in change.notes
                       else "")
    if change.action == "ignored":
        return ("the program's change does not reach the cloud: " +
                "; ".join(sorted({n.split(" (")[0] for n in change.notes.values()})))
    if change.action == "update":
        return f"updated in place: the {what} keeps its identity"
    parts = []
    if "provider" in change.notes:
        parts.append(f"{change.notes['provider']}, and every object it manages is recreated with it")
    by_kind: dict[str, list[str]] = {}
    for f, note in change.notes.items():
        for kind in _KIND_REASONS:
            if note.startswith(kind):
                by_kind.setdefault(kind, []).append(f"`{f}`")
    for kind, fields in by_kind.items():
        shown = ", ".join(fields[:3]) + (f" and {len(fields) - 3} more" if len(fields) > 3 else "")
        parts.append(_KIND_REASONS[kind].format(fields=shown, what=what))
    if any("computed from a replaced resource" in n for n in change.notes.values()):
        parts.append("an input is computed from a replaced resource, unknown until that one exists again")
    if "delete_before_replace" in change.notes:
        parts.append(_DBR.get(change.type, "deleted before its replacement is created (delete_before_replace)"))
    if "protect" in change.notes:
        parts.append("it is protected: `pulumi up` fails until it is unprotected")
    return "; ".join(parts) or f"the {what} is replaced"


# ---------------------------------------------------------------------------------------------- settings
def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def setting_changes(old: dict, new: dict) -> list[dict]:
    """Every setting whose value differs, in the stack file's dotted names (a list counts as one value)."""
    a, b = _flatten(old or {}), _flatten(new or {})
    out = []
    for name in [*a, *(k for k in b if k not in a)]:
        if a.get(name, _MISSING) == b.get(name, _MISSING):
            continue
        # a section added or removed whole shows its leaves, not `{}` -> `{...}`
        old_v = _text(a[name]) if name in a else "(unset)"
        new_v = _text(b[name]) if name in b else "(unset)"
        old_v, new_v = shorten(old_v, new_v)
        out.append({"setting": name, "old": old_v, "new": new_v})
    return out


_MISSING = object()


# ---------------------------------------------------------------------------------------------- deltas
def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def figures(plan: dict) -> dict[str, float | None]:
    """The figures a reviewer compares, from one plan.json (None where the stack has no such figure)."""
    sec = plan["sections"]
    cost, lat = sec.get("cost") or {}, sec.get("latency") or {}
    layout = ((sec.get("layout") or {}).get("layout")) or {}
    memory = layout.get("memory") or {}
    per_run, per_month = (_num(x) for x in run_and_month(cost)) if cost else (None, None)
    gpu_node_hours = _num(cost.get("gpu_node_hours"))
    gpus = _num(layout.get("gpus_per_node"))
    use = cost.get("platform_gpu_use") or {}
    split = lat.get("split") or {}
    return {
        "cost_per_run": per_run,
        "cost_per_month": per_month,
        # on a platform's pool the GPU time is the platform's bill, but the run uses it all the same
        "gpu_hours_per_run": (_num(use.get("gpu_hours")) if use else
                              round(gpu_node_hours * gpus, 2) if gpu_node_hours is not None and gpus else None),
        "first_step_minutes": _num(lat.get("first_step_minutes")),
        "fresh_first_step_minutes": _num(split.get("fresh_first_step_minutes")),
        "platform_up_minutes": _num(lat.get("graph_minutes")) if "first_step_minutes" not in lat else None,
        "memory_peak_gib": _num(memory.get("peak_gib")),
        "gpu_gib": _num(memory.get("gpu_gib")),
    }


# label, unit, decimals
FIGURES = {
    "cost_per_run": ("cost per run (ESTIMATE; with the GPU time it uses of a platform's pool)", "{currency}", 2),
    "cost_per_month": ("cost per month left up (ESTIMATE)", "{currency}", 2),
    "gpu_hours_per_run": ("GPU-hours per run", "GPU-h", 2),
    "first_step_minutes": ("modelled time to the first training step", "min", 1),
    "fresh_first_step_minutes": ("first step with a new platform + this experiment", "min", 1),
    "platform_up_minutes": ("platform `pulumi up` (modelled)", "min", 1),
    "memory_peak_gib": ("per-GPU memory estimate (peak)", "GiB", 1),
}


def _fmt(v: float | None, unit: str, decimals: int) -> str:
    return "—" if v is None else f"{v:,.{decimals}f} {unit}"


def deltas(base_plan: dict, plan: dict) -> list[dict]:
    old, new = figures(base_plan), figures(plan)
    currency = (plan["sections"].get("cost") or {}).get("currency", "USD")
    out = []
    for key, (label, unit, decimals) in FIGURES.items():
        a, b = old[key], new[key]
        if a is None and b is None:
            continue
        unit = unit.format(currency=currency)
        row = {"figure": key, "label": label, "old": a, "new": b,
               "old_text": _fmt(a, unit, decimals), "new_text": _fmt(b, unit, decimals)}
        if key == "memory_peak_gib":
            row["old_text"] += f" of {old['gpu_gib']:g} GiB" if old["gpu_gib"] else ""
            row["new_text"] += f" of {new['gpu_gib']:g} GiB" if new["gpu_gib"] else ""
        if a is not None and b is not None:
            d = round(b - a, decimals)
            row["delta"] = d
            pct = f" ({d / a * 100:+.0f}%)" if a and abs(d / a) >= 0.005 else ""
            row["delta_text"] = f"{d:+,.{decimals}f} {unit}{pct}" if d else "no change"
        else:
            row["delta_text"] = "new" if a is None else "gone"
        out.append(row)
    return out


def target_warnings(base_plan: dict, plan: dict) -> list[str]:
    """What moves the stack over a target: memory over the GPU, a latency target no longer met, a new warning of
    the program or a new layout finding."""
    out = []
    old, new = figures(base_plan), figures(plan)
    if new["memory_peak_gib"] and new["gpu_gib"] and new["memory_peak_gib"] > new["gpu_gib"]:
        out.append(f"the per-GPU memory estimate {new['memory_peak_gib']:.1f} GiB exceeds the GPU's "
                   f"{new['gpu_gib']:g} GiB (was {old['memory_peak_gib'] or 0:.1f} GiB): the job is expected to run "
                   "out of memory (GPU layout section)")

    def targets(p: dict) -> dict[str, bool]:
        return (((p["sections"].get("latency") or {}).get("split")) or {}).get("targets") or {}

    for name, met in targets(plan).items():
        if not met and targets(base_plan).get(name, True):
            out.append(f"latency target no longer met: {name} (docs/latency.md)")
    findings = {(f.get("field"), f.get("message")) for f in (base_plan["sections"].get("layout") or {}).get("findings", [])}
    for f in (plan["sections"].get("layout") or {}).get("findings", []):
        if (f.get("field"), f.get("message")) not in findings:
            out.append(f"new GPU layout finding ({f.get('severity')}) `{f.get('field')}`: {f.get('message')}")
    def over(p: dict) -> list[str]:
        return ((p["sections"].get("cost") or {}).get("budget") or {}).get("over") or []

    out += [f"over budget: {o} (cost section)" for o in over(plan) if o not in over(base_plan)]
    for w in plan.get("warnings", []):
        if w not in base_plan.get("warnings", []):
            out.append(f"new warning: {w}")
    return out


def renamed_warnings(changes: list[Change]) -> list[str]:
    """A delete and a create of the same type: most often a rename (a new logical name, type or parent) without an
    `aliases` entry, which replaces the resource; the URN snapshot (tests/test_urns.py) fails on it too."""
    out = []
    for type_ in sorted({c.type for c in changes if c.action == "delete"} & {c.type for c in changes if c.action == "create"}):
        gone = ", ".join(sorted(c.name for c in changes if c.action == "delete" and c.type == type_))
        new = ", ".join(sorted(c.name for c in changes if c.action == "create" and c.type == type_))
        out.append(f"URNs changed: `{type_}` {gone} deleted and {new} created; if it is a rename, add an `aliases` "
                   "entry naming the old one, else `make urns` (docs/review-and-teardown.md, \"URN snapshot\")")
    return out


# ---------------------------------------------------------------------------------------------- the report
def review(base_settings: dict, settings: dict, changes: list[Change], base: Recording, new: Recording,
           base_plan: dict, plan: dict) -> dict:
    """plan.json's `review`: settings, resources (action, reason, fields old -> new), deltas, warnings."""
    return {
        "settings": setting_changes(base_settings, settings),
        "resources": [{"name": c.name, "type": c.type, "action": c.action, "reason": reason(c),
                       "fields": field_values(c, base, new)} for c in changes],
        "deltas": deltas(base_plan, plan),
        "warnings": renamed_warnings(changes) + target_warnings(base_plan, plan),
    }


ORDER = ["replace", "delete", "create", "update", "ignored"]


def _cell(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def markdown(r: dict, base_name: str) -> str:
    """The "Changes against <base>" section of plan.md (and of the PR's change-report comment)."""
    lines = [f"## Changes against {base_name}", ""]
    settings = r["settings"]
    lines += ["### Settings changed (old → new)", ""]
    if settings:
        lines += ["| setting | old | new |", "|---|---|---|"]
        lines += [f"| `{s['setting']}` | {_cell(s['old'])} | {_cell(s['new'])} |" for s in settings]
    else:
        lines.append("No setting changed.")
    lines += ["", "### What they do", ""]
    res = sorted(r["resources"], key=lambda c: ORDER.index(c["action"]) if c["action"] in ORDER else len(ORDER))
    if not res:
        lines.append("No changes: `pulumi preview` would show nothing to do.")
    else:
        counts: dict[str, int] = {}
        for c in res:
            counts[c["action"]] = counts.get(c["action"], 0) + 1
        lines += [", ".join(f"{counts[a]} {a}" for a in ORDER if a in counts) + ". `ignored`: the program changed it "
                  "but the provider will not apply it (a create-only field or ignore_changes).", "",
                  "| action | resource | type | why |", "|---|---|---|---|"]
        lines += [f"| **{c['action']}** | {c['name']} | `{c['type']}` | {c['reason']} |" for c in res]
        fields = [(c, f) for c in res for f in c["fields"][:MAX_FIELDS_MD]]
        if fields:
            lines += ["", "| resource | field | old | new |", "|---|---|---|---|"]
            lines += [f"| {c['name']} | `{f['readable']}` | {_cell(f['old'])} | {_cell(f['new'])} |" for c, f in fields]
            more = [(c["name"], len(c["fields"]) - MAX_FIELDS_MD) for c in res if len(c["fields"]) > MAX_FIELDS_MD]
            if more:
                lines += ["", "More fields in plan.json (`review.resources`): "
                          + ", ".join(f"{n} +{k}" for n, k in more) + "."]
    if r["deltas"]:
        lines += ["", "### What it costs and how long it takes (ESTIMATE, each plan by its own program's model)", "",
                  "| figure | old | new | change |", "|---|---|---|---|"]
        lines += [f"| {d['label']} | {d['old_text']} | {d['new_text']} | {d['delta_text']} |" for d in r["deltas"]]
    if r["warnings"]:
        lines += [""] + [f"- **warning**: {w}" for w in r["warnings"]]
    return "\n".join(lines + [""])
