#!/usr/bin/env python3
"""Generate docs/ram-policy.json: the RAM actions the deploying identity needs, derived from the resource types
and invokes the shipped stacks record and the provider's call graph, each action with the provider source line
that calls it, the call path that reaches it, and whether every run takes it or only some branch.

    python tools/ram_policy.py

tests/data/alicloud_provider_calls.json (tools/provider_calls.py, a walk of terraform-provider-alicloud at the
commit docs/facts-provider.md names) holds, per Pulumi type, the actions its Create/Read/Update/Delete reach. A
type the stacks manage needs the actions of all four (the create -> read -> update -> destroy cycle); a type they
only read (Resource.get) and an invoke need their Read's. The generator also rewrites the branch-only table of
docs/real-cloud.md. tests/test_ram_policy.py holds both files equal to what this renders.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "ram-policy.json"
SCHEMA = REPO / "tests" / "data" / "alicloud_provider_schema.json"
# Every shipped stack (derived from the stacks folder: a new stack's resources join the policy without a list to edit).
STACKS = tuple(sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml")))
# What the program creates that no shipped stack does: the VPC, NAT, EIP and SNAT entries of a stack on an ECS GPU
# pool (Lingjun stacks use their machines' VPC). Rendered as dev with these settings.
NEW_VPC_VARIANT = {"gpu_pool": {"kind": "ecs", "lingjun": None,
                                "ecs": {"instance_types": ["ecs.gn7i-c16g1.4xlarge"], "min_nodes": 0}},
                   "cluster": {"network": {"vpc_id": None, "node_vswitch_ids": [], "pod_vswitch_ids": [],
                                           "nat_bandwidth_mbps": 100}}}
# dev with real-looking Lingjun ids: the shipped placeholders skip the Lingjun reads (components/cloud/account_checks.py
# check_lingjun), which a real preview performs, so their read permissions come from this variant.
LINGJUN_READ_VARIANT = {"gpu_pool": {"lingjun": {"eflo_cluster_id": "i118191731733789436",
                                                 "eflo_node_group_id": "i127062918265143",
                                                 "node_ids": ["e01-cn-fw7a2b3c4d5"],
                                                 "security_group_id": "sg-t4n6b2k9m3q7w1e5r8y"}}}
CALLS = REPO / "tests" / "data" / "alicloud_provider_calls.json"
DOC = REPO / "docs" / "real-cloud.md"
TABLE = re.compile(r"(<!-- generated:ram-branch-actions -->\n)(.*?)(<!-- /generated -->)", re.S)
PHASES = ("create", "read", "update", "delete")


def recorded() -> tuple[set[str], set[str], set[str]]:
    """(managed types, types only read with Resource.get, invokes): the alicloud ones of the shipped stacks'
    offline plans and of the variants above."""
    import tempfile

    import yaml

    from offline import plan

    managed: set[str] = set()
    reads: set[str] = set()
    invokes: set[str] = set()

    def merged(base: dict, over: dict) -> dict:
        return {**base, **{k: merged(base.get(k) or {}, v) if isinstance(v, dict) and v else v for k, v in over.items()}}

    with tempfile.TemporaryDirectory() as tmp:
        doc = yaml.safe_load(plan.stack_file("dev").read_text())
        key = "verl-ack:settings"
        doc["config"][key] = merged(doc["config"][key], NEW_VPC_VARIANT)
        variant = Path(tmp) / "Pulumi.dev-new-vpc.yaml"
        variant.write_text(yaml.safe_dump(doc, sort_keys=False))
        doc = yaml.safe_load(plan.stack_file("dev").read_text())
        doc["config"][key] = merged(doc["config"][key], LINGJUN_READ_VARIANT)
        lingjun = Path(tmp) / "Pulumi.dev-lingjun-reads.yaml"
        lingjun.write_text(yaml.safe_dump(doc, sort_keys=False))
        for stack, path in [*((s, plan.stack_file(s)) for s in STACKS), ("dev-new-vpc", variant),
                            ("dev-lingjun-reads", lingjun)]:
            result = plan.build_plan(path, stack, Path(tmp) / stack)
            for r in result["resources"]:
                if r["type"].startswith("alicloud:"):
                    (reads if (r["options"] or {}).get("read") else managed).add(r["type"])
            invokes |= {i["token"] for i in result["invokes"] if i["token"].startswith("alicloud:")}
    return managed, reads - managed, invokes


def derive(calls: dict, managed: set[str], reads: set[str], invokes: set[str]) -> dict:
    """The policy: for each type its phases' actions from the recorded call graph, merged over phases. An action is
    `always` when some phase reaches it on a path no condition guards; its `path`/`when`/`source` are those of the
    first phase (create, read, update, delete) that reaches it unguarded, else of the first that reaches it."""
    by_type: dict[str, list[dict]] = {}
    for t in sorted(managed | reads | invokes):
        if t not in calls["types"]:
            raise SystemExit(f"{t}: not in {CALLS.relative_to(REPO)}; add it to tools/provider_calls.py and rerun it")
        phases = PHASES if t in managed else ("read",)
        merged: dict[str, dict] = {}
        for phase in phases:
            for action, hit in calls["types"][t].get(phase, {}).get("actions", {}).items():
                e = merged.setdefault(action, {"action": action, "phases": [], "always": False})
                e["phases"].append(phase)
                if hit["always"] and not e["always"] or "source" not in e:
                    e.update(always=hit["always"], source=_cite(calls, hit["source"]), path=" > ".join(hit["path"]),
                             when=hit["when"])
        if not merged:
            raise SystemExit(f"{t}: the provider's walk reached no API action")
        by_type[t] = [merged[a] for a in sorted(merged)]
    actions = sorted({e["action"] for es in by_type.values() for e in es})
    return {
        "about": "RAM policy of the identity that runs `pulumi preview`/`up`/`destroy` for the shipped stacks; "
                 "generated by tools/ram_policy.py from the resource types and invokes they record and the "
                 "provider's call graph (tests/data/alicloud_provider_calls.json; docs/real-cloud.md).",
        "provider_commit": calls["provider_commit"],
        "policy": {"Version": "1", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]},
        "by_type": by_type,
    }


def _cite(calls: dict, source: str) -> str:
    return f"aliyun/terraform-provider-alicloud@{calls['provider_commit'][:7]}:{source}"


def purpose(conds: list[str]) -> str:
    """What a branch is for, in words, from the provider's conditions on its path: the inputs whose change leads
    there (`d.HasChange("x")`, or a flag the Update sets under such tests), an input's value (`d.Get("x")`), a
    destroy forced through a non-empty
    bucket or attached policy, a per-item loop of a data source, a resource the API does not have yet."""
    text = " ".join(conds)
    fields = list(dict.fromkeys(re.findall(r'"([a-z][\w.]*)"', " ".join(
        re.findall(r"HasChanges?\([^)]*\)|set by a change of [^)]*", text)))))
    fields += [f for f in re.findall(r"set by a change of ([\w, .]+)", text) for f in f.split(", ")
               if f and f not in fields and not f.startswith(".")]
    said = []
    if fields:
        shown = ", ".join(f"`{f}`" for f in fields[:4]) + (f" and {len(fields) - 4} more" if len(fields) > 4 else "")
        said.append(f"a change of {shown}")
    if 'd.Get("force_destroy")' in text:
        said.append("destroying a non-empty bucket with `force_destroy`")
    elif 'd.Get("force")' in text:
        said.append("destroying with `force` (detach and delete versions first)")
    read = [f for f in dict.fromkeys(re.findall(r'd\.Get(?:Ok|OkExists)?\("([a-z]\w*)"\)', text))
            if f not in ("force_destroy", "force")]
    if read:
        said.append("the value of " + ", ".join(f"`{f}`" for f in read))
    if "NotFoundError(err)" in text:
        said.append("when the API does not have it yet")
    if re.search(r"(^| )for [^;]*range", text) and not said:
        said.append("once per item the data source lists")
    return "; ".join(said) or "a provider-side condition (see the conditions)"


def branch_table(policy: dict) -> str:
    """Markdown rows of the actions no run of their type takes on every path, each with what it is for and the
    conditions (Go, as the provider spells them) on the path that leads to it."""
    rows = ["| action | type | phases | for | provider conditions on the path |", "|---|---|---|---|---|"]
    for t, entries in policy["by_type"].items():
        for e in entries:
            if e["always"]:
                continue
            conds = list(dict.fromkeys(c.split(": ", 1)[1] for c in e["when"]))  # the same test in two functions
            when = " and ".join(f"`{c}`" for c in conds).replace("|", "\\|")
            rows.append(f"| `{e['action']}` | `{t.split(':')[-1]}` ({t.split(':')[1].split('/')[0]}) | "
                        f"{', '.join(e['phases'])} | {purpose(conds)} | {when} |")
    return "\n".join(rows) + "\n"


def render_doc(text: str, policy: dict) -> str:
    if not TABLE.search(text):
        raise SystemExit(f"{DOC.relative_to(REPO)} has no <!-- generated:ram-branch-actions --> block")
    return TABLE.sub(lambda m: m.group(1) + branch_table(policy) + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    policy = derive(json.loads(CALLS.read_text()), *recorded())
    OUT.write_text(json.dumps(policy, indent=2) + "\n")
    DOC.write_text(render_doc(DOC.read_text(), policy))
    print(f"wrote {OUT.relative_to(REPO)}, {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
