"""The bill that outlives a teardown: what `teardown.py --destroy` deletes, what it keeps and why, and what still bills
per month afterwards, with where to release it.

Every plan.md carries it (section `teardown`) and `teardown.py` prints the same lines before it reads OSS, so a user
learns it before the teardown, also when OSS cannot be reached. What is destroyed or kept comes from the recorded
resources' options (protect, retain_on_delete, read) and the guard teardown.py lifts (keeper/destroy.py
GUARDED_TYPES: the cluster, VPC and vSwitches are unprotected first); what bills comes from the stack's prices
(`cost.prices`, the cost section's source). Lingjun machines are bought outside Pulumi (docs/facts.md): no destroy
releases them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from components.cloud.cluster import DELETE_WITH_CLUSTER
from components.config import STACKS_DIR, Settings, raw_settings
from components.config.loading import stack_name
from keeper.destroy import GUARDED_TYPES
from offline.report.cost import HOURS_PER_MONTH, storage_gib, training_steps
from offline.report.section import Section

BUCKET = "alicloud:oss/bucket:Bucket"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
LINGJUN_CONSOLE = ("the Lingjun console (PAI Lingjun intelligent computing) > the cluster > the node group > Nodes: "
                   "release the machines (or end their subscription)")


def _managed(recording) -> list:
    return [r for r in recording.resources if r.custom and not r.options.get("read")
            and r.type != "pulumi:pulumi:StackReference" and not r.type.startswith("pulumi:providers:")]


def _kept_by_destroy(r) -> bool:
    """`destroy --exclude-protected` keeps a protected resource teardown.py does not unprotect; retain_on_delete
    drops it from the state and leaves it in the cloud."""
    return bool(r.options.get("protect") and r.type not in GUARDED_TYPES or r.options.get("retain_on_delete"))


def _label(type_: str) -> str:
    return type_.rsplit(":", 1)[-1]


def dependent_experiments(platform: str, stacks_dir=STACKS_DIR) -> list[str]:
    """The experiment stack files in stacks/ whose platform_stack names `platform` (by its last part)."""
    out = []
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        try:
            raw = raw_settings(path)
        except Exception:  # noqa: BLE001 - another file's problem is reported by its own plan, not here
            continue
        ref = raw.get("platform_stack") if isinstance(raw, dict) else None
        if raw.get("kind") == "experiment" and isinstance(ref, str) and ref.rsplit("/", 1)[-1] == platform:
            out.append(stack_name(path))
    return out


def _price(s: Settings, key: str) -> float | None:
    return s.cost.prices.get(key)


def teardown_bill(s: Settings, recording, stack: str) -> dict[str, Any]:
    """plan.json's `sections.teardown`: destroyed (by kind), kept (what, why, per month, where to release)."""
    managed = _managed(recording)
    destroyed = [r for r in managed if not _kept_by_destroy(r)]
    k8s = sum(1 for r in destroyed if r.type.startswith("kubernetes:"))
    cloud = Counter(_label(r.type) for r in destroyed if not r.type.startswith("kubernetes:"))
    retained_inside = [r for r in managed if _kept_by_destroy(r) and r.type != BUCKET
                       and not r.type.startswith("alicloud:oss/")]
    cluster_deleted = any(r.type == CLUSTER for r in destroyed)
    kept: list[dict[str, Any]] = []
    st = s.storage
    bucket = next((r for r in managed if r.type == BUCKET), None)
    gib = sum(storage_gib(s, training_steps(s)).values())
    oss = _price(s, "oss_gib_month")
    storage_month = round(gib * oss, 2) if oss is not None else None
    if bucket is not None and _kept_by_destroy(bucket):
        kept.append({"what": f"OSS bucket `{st.bucket_name}`: datasets, the model, the checkpoints (the latest complete "
                             f"step copied under `{st.kept_prefix}` by teardown.py)",
                     "why": "storage.keep_on_destroy: true (protected and retained), so checkpoints outlive the stack",
                     "per_month": storage_month, "gib": round(gib, 2),
                     "release": "OSS console > the bucket: delete its objects and versions, then the bucket (or set "
                                "storage.keep_on_destroy: false before the teardown)"})
    elif bucket is None and st.mode == "existing":
        kept.append({"what": f"existing OSS bucket `{st.bucket_name}` with this stack's objects",
                     "why": "storage.mode: existing: the program never created it, so it never deletes it",
                     "per_month": storage_month, "gib": round(gib, 2),
                     "release": f"OSS console > `{st.bucket_name}`: delete the prefixes this stack wrote"})
    elif bucket is None:
        kept.append({"what": f"this run's objects in the platform's bucket `{st.bucket_name}` (the latest complete "
                             f"checkpoint copied under `{st.kept_prefix}` by teardown.py)",
                     "why": "the bucket is the platform's: it stays until the platform's own teardown",
                     "per_month": storage_month, "gib": round(gib, 2),
                     "release": f"OSS console > `{st.bucket_name}` > `{st.checkpoints_prefix}`: delete what you no "
                                "longer need"})
    g = s.gpu_pool
    if g.kind == "lingjun":
        price = _price(s, "lingjun_node_hour")
        per_month = round(price * g.nodes * HOURS_PER_MONTH, 2) if price is not None else None
        lj = g.lingjun
        group = f" of node group `{lj.eflo_node_group_id}`" if lj is not None else ""
        if s.owns_gpu_pool():
            kept.append({"what": f"{g.nodes} Lingjun machine(s){group}",
                         "why": "bought outside Pulumi: the destroy removes them from the node pool, the machines "
                                "keep billing", "per_month": per_month, "release": LINGJUN_CONSOLE})
        else:
            kept.append({"what": f"the platform's Lingjun GPU pool ({g.nodes} machine(s){group})",
                         "why": "gpu_pool.owner: platform: the pool is the platform's and bills while it lives",
                         "per_month": per_month, "release": "the platform's teardown, then " + LINGJUN_CONSOLE})
    elif s.kind == "experiment" and not s.owns_gpu_pool():
        kept.append({"what": "the platform's ECS GPU pool", "why": "gpu_pool.owner: platform: it is the platform's",
                     "per_month": None, "release": "the platform's teardown"})
    if s.logs.enabled:
        kept.append({"what": f"Ray logs in the Log Service logstore `{s.logs.logstore}`",
                     "why": f"Log Service keeps each entry {s.logs.retention_days} days (logs.retention_days); the "
                            "logstore belongs to the log controller, not to Pulumi",
                     "per_month": None, "release": f"they expire after {s.logs.retention_days} days; delete the "
                                                   "logstore in the Log Service console to drop them now"})
    if s.cluster.mode == "existing":
        kept.append({"what": f"the existing cluster `{s.cluster.existing_cluster_id}` and its VPC, with the add-ons and "
                             f"namespaces this stack installed ({len(retained_inside)} retained)",
                     "why": "cluster.mode: existing: only read, never deleted; add-ons are retained so the cluster's "
                            "other users keep them", "per_month": None,
                     "release": "not this stack's: it bills as before"})
    if s.kind == "experiment" and s.platform_stack:
        kept.append({"what": f"the platform `{s.platform_stack}` (cluster, system pool, add-ons, bucket)",
                     "why": "an experiment's teardown removes only the experiment", "per_month": None,
                     "release": "the platform's own plan shows its bill; `teardown.py --stack "
                                f"{s.platform_stack.rsplit('/', 1)[-1]}` after its last experiment"})
    known = [k["per_month"] for k in kept if k["per_month"] is not None]
    return {
        "stack": stack,
        "currency": s.cost.currency,
        "destroyed": {"resources": len(destroyed), "kubernetes_objects": k8s, "cloud": dict(sorted(cloud.items())),
                      # retained add-ons and namespaces of a new cluster go with it; ACK deletes what it made for it
                      "with_cluster": ([f"{len(retained_inside)} retained add-on(s) and namespace(s)"]
                                       if retained_inside and s.cluster.mode == "new" else [])
                                      + (list(DELETE_WITH_CLUSTER) if cluster_deleted else [])},
        "kept": kept,
        "still_billing_per_month": round(sum(known), 2),
        "not_estimated": [k["what"] for k in kept if k["per_month"] is None],
        "dependent_experiments": dependent_experiments(stack) if s.kind == "platform" else [],
    }


def _with_cluster(d: dict[str, Any]) -> str:
    return f"; with the cluster also {', '.join(d['with_cluster'])}" if d["with_cluster"] else ""


def summary_lines(bill: dict[str, Any]) -> list[str]:
    """The same summary as plain lines (teardown.py prints them)."""
    d, cur = bill["destroyed"], bill["currency"]
    cloud = ", ".join(f"{k} x{v}" for k, v in d["cloud"].items())
    out = [f"teardown of `{bill['stack']}`: destroys {d['resources']} resources ({d['kubernetes_objects']} Kubernetes "
           f"objects; {cloud}){_with_cluster(d)}"]
    if bill["dependent_experiments"]:
        out.append("experiment stacks on this platform, to tear down first: "
                   + ", ".join(f"`{n}`" for n in bill["dependent_experiments"]))
    for k in bill["kept"]:
        bills = f"{k['per_month']:,.2f} {cur}/month" if k["per_month"] is not None else "not estimated"
        out.append(f"kept: {k['what']}; why: {k['why']}; still bills: {bills}; release: {k['release']}")
    more = " (+ what is not estimated)" if bill["not_estimated"] else ""
    out.append(f"still billing after the teardown: {bill['still_billing_per_month']:,.2f} {cur}/month{more} (ESTIMATE)")
    return out


def markdown(bill: dict[str, Any]) -> str:
    d, cur = bill["destroyed"], bill["currency"]
    cloud = ", ".join(f"{k} x{v}" for k, v in d["cloud"].items())
    lines = [f"What `teardown.py --stack {bill['stack']} --destroy` leaves behind (ESTIMATE from `cost.prices`; "
             "teardown.py prints the same before it reads OSS).", "",
             f"**Destroyed**: {d['resources']} resources: {d['kubernetes_objects']} Kubernetes objects; {cloud}"
             f"{_with_cluster(d)}."]
    if bill["dependent_experiments"]:
        lines += ["", "**Experiment stacks on this platform** (tear them down first): "
                  + ", ".join(f"`{n}`" for n in bill["dependent_experiments"]) + "."]
    lines += ["", "| kept | why | still bills per month | where to release it |", "|---|---|---|---|"]
    for k in bill["kept"]:
        bills = f"{k['per_month']:,.2f} {cur}" if k["per_month"] is not None else "not estimated"
        lines.append(f"| {k['what']} | {k['why']} | {bills} | {k['release']} |")
    more = " (+ what is not estimated)" if bill["not_estimated"] else ""
    lines += ["", f"**Still billing after the teardown: {bill['still_billing_per_month']:,.2f} {cur}/month**{more}."]
    return "\n".join(lines)


def stack_of(recording) -> str:
    """The stack a recording ran as: the second part of any URN (urn:pulumi:<stack>::<project>::...)."""
    return recording.resources[0].urn.split("::")[0].split(":", 2)[2]


def teardown_section(s: Settings, recording) -> Section:
    bill = teardown_bill(s, recording, stack_of(recording))
    return Section("teardown", "After a teardown: what still bills", markdown(bill), bill)
