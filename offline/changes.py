"""Which resources a run would change against a state, and how: the diff the providers would compute.

`changes(base, state, new)` compares a new run (`new`, a Recording) with the state an earlier run left
(`state`, offline/readback.py) and the inputs that run sent (`base`), resource by resource:

- bridged alicloud resources, as the Terraform provider plans: new inputs against the stored outputs; a field
  the program leaves unset does not diff when the schema says Computed (Optional+Computed), and does when it
  is only Optional and the state holds a value (TF SDKv2: unset == zero value);
- Kubernetes objects, as pulumi-kubernetes' Diff: the live object pruned to the old inputs against the new
  inputs (pulumi/pulumi-kubernetes@94977969 provider/pkg/provider/provider.go:1481-1494, 1540); in the
  offline engine the live object is what was sent;
- `ignore_changes` drops a path (and everything under it), `replace_on_changes` makes it a replacement
  (pulumi/pulumi pkg/resource/deploy/step_generator.go: processIgnoreChanges, applyReplaceOnChanges).

Each change gets an action: `create`, `delete`, `replace` (a ForceNew field of the provider schema, a
pulumi-kubernetes force-new field, replace_on_changes, a replaced provider, a ForceNew input that depends
on a replaced resource, or initialisation errors under a replace_on_changes "*"), `update`, or `ignored` (what the
program changed will not reach the cloud: a path under ignore_changes, or a create-only field the provider sends
only at create that nothing replaces). The rules apply in the engine's order: ignore_changes, then the provider's
ForceNew, then replace_on_changes, then create-only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from offline.engine import RawState, Recording, Registration
from offline.readback import plain

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "alicloud_provider_schema.json"
K8S_PROVIDER = "pulumi:providers:kubernetes"
# The key applyReplaceOnChanges matches against replace_on_changes for a resource with initialisation errors
# (pulumi/pulumi pkg/resource/deploy/step_generator.go initErrorSpecialKey).
INIT_ERROR = "#initerror"
# pulumi-kubernetes' documented switch for a Job that failed: with this annotation the provider's Diff reads the live
# Job and replaces it when it is not ready (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go Diff,
# `metadata.ReplaceUnready`; the batch/v1 Job docs).
REPLACE_UNREADY = "pulumi.com/replaceUnready"
TF = "aliyun/terraform-provider-alicloud@ace5bcf8777e"

# Fields the provider sends only in Create: no Update path, not read back. A change "applies" and does nothing.
CREATE_ONLY = {
    "alicloud:cs/managedKubernetes:ManagedKubernetes": {
        "slbInternetEnabled": f"{TF} alicloud/resource_alicloud_cs_managed_kubernetes.go:180-184 (schema), :687-689 "
                              "(Create only), :1124-1125 (not in the Update's HasChanges)",
        "podVswitchIds": f"{TF} resource_alicloud_cs_managed_kubernetes.go:102-109 (no ForceNew), :719-721 (Create "
                         "only); pulumi_alicloud cs/managed_kubernetes.py: \"Only works for **Create** Operation\"",
        "newNatGateway": f"{TF} resource_alicloud_cs_managed_kubernetes.go:127-131, :683-685 (Create only)",
    },
    "alicloud:cs/nodePool:NodePool": {
        "efloNodeGroup": f"{TF} alicloud/resource_alicloud_cs_kubernetes_node_pool.go:163-179 (no ForceNew), "
                         ":1821-1833 (Create only), never read back",
    },
}

# pulumi-kubernetes replaces an object when one of these changes (pulumi/pulumi-kubernetes@94977969
# provider/pkg/provider/diff.go:23-251 forceNewProperties); a ConfigMap's or Secret's data too unless the
# provider sets enableConfigMapMutable / enableSecretMutable (:28-33). Keyed by apiVersion/kind.
_SELECTOR = ["spec.selector"]
K8S_FORCE_NEW = {
    "apps/v1/Deployment": _SELECTOR, "apps/v1/DaemonSet": _SELECTOR,
    "apps/v1/StatefulSet": ["spec.podManagementPolicy", "spec.revisionHistoryLimit", "spec.selector",
                            "spec.serviceName", "spec.volumeClaimTemplates"],
    "batch/v1/Job": ["spec.completions", "spec.parallelism", "spec.selector", "spec.template"],
    "v1/PersistentVolumeClaim": ["spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"],
    "v1/PersistentVolume": [f"spec.{s}" for s in (
        "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
        "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk",
        "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume")],
    "v1/Service": ["spec.clusterIP"],
    "v1/Secret": ["type"],
    "rbac.authorization.k8s.io/v1/RoleBinding": ["roleRef"],
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": ["roleRef"],
    "storage.k8s.io/v1/StorageClass": ["parameters", "provisioner"],
}
K8S_ALWAYS_FORCE_NEW = ["metadata.name", "metadata.namespace"]
# A Helm release is replaced when its name or namespace changes (pulumi/pulumi-kubernetes@94977969
# provider/pkg/provider/helm_release.go Diff: forceNewFields ".name", ".namespace"); it has no metadata.
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_RELEASE_FORCE_NEW = ["name", "namespace"]
# Fields the API server refuses to change that pulumi-kubernetes would try to update in place (the update fails):
# PVC spec except resources.requests (k8s pkg/apis/core/validation ValidatePersistentVolumeClaimUpdate).
K8S_API_IMMUTABLE = {"v1/PersistentVolumeClaim": (["spec"], ["spec.resources.requests"])}


@dataclass
class Change:
    name: str
    type: str
    action: str
    fields: list[str]
    notes: dict[str, str] = field(default_factory=dict)
    urn: str = ""

    def as_json(self) -> dict:
        out = {"name": self.name, "type": self.type, "action": self.action, "fields": self.fields}
        return {**out, "notes": self.notes} if self.notes else out


# ---- property paths (Pulumi's syntax: a.b, a[0], a["k.with.dots"], a[*]) ----

def format_path(parts: tuple) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", p):
            out += f".{p}" if out else p
        else:
            out += f"[{json.dumps(p)}]"
    return out


def parse_path(text: str) -> tuple:
    parts: list = []
    for m in re.finditer(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+|\*)\]|\.?([^.\[\]]+)', text):
        quoted, index, name = m.groups()
        if quoted is not None:
            parts.append(json.loads(f'"{quoted}"'))
        elif index is not None:
            parts.append("*" if index == "*" else int(index))
        else:
            parts.append(name)
    return tuple(parts)


def covers(prefix: tuple, path: tuple) -> bool:
    """`prefix` is `path` or one of its ancestors (`*` matches any key or index)."""
    return len(prefix) <= len(path) and all(p == "*" or p == q for p, q in zip(prefix, path, strict=False))


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {} or v is False or v == 0


def leaf_diff(old: Any, new: Any, path: tuple = (), zero_is_unset: bool = False) -> list[tuple]:
    """The paths where `new` differs from `old`, as deep as both sides are maps (lists compare item by item when
    their lengths agree). With `zero_is_unset` (Terraform) a missing key equals its zero value."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple] = []
        for k in sorted(set(old) | set(new), key=str):
            if zero_is_unset and _empty(old.get(k)) and _empty(new.get(k)):
                continue
            if k not in new or k not in old:
                if old.get(k) is not None or new.get(k) is not None:
                    out.append((*path, k))
                continue
            out += leaf_diff(old[k], new[k], (*path, k), zero_is_unset)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True))
                for p in leaf_diff(a, b, (*path, i), zero_is_unset)]
    if isinstance(old, float) and isinstance(new, (int, float)) or isinstance(new, float) and isinstance(old, int):
        return [] if float(old) == float(new) else [path]
    return [] if old == new else [path]


# ---- the schema of the bridged provider (tests/data/alicloud_provider_schema.json, tools/provider_schema.py) ----

@cache
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())["resources"]


def _attr(type_: str, path: tuple) -> dict | None:
    """The schema entry of a Pulumi property path (nested blocks followed through list indexes)."""
    attrs = schema().get(type_, {}).get("attributes", {})
    node = None
    for p in path:
        if isinstance(p, int) or p == "*":
            continue
        node = next((a for a in attrs.values() if a.get("pulumi") == p), None)
        if node is None:
            return None
        attrs = ((node.get("elem") or {}).get("block")) or {}
    return node


def _k8s_key(inputs: dict) -> str:
    return f"{inputs.get('apiVersion', '')}/{inputs.get('kind', '')}"


def _k8s_force_new(reg: Registration, inputs: dict, providers: dict[str, dict]) -> list[tuple]:
    if reg.type == HELM_RELEASE:
        return [parse_path(f) for f in HELM_RELEASE_FORCE_NEW]
    fields = K8S_ALWAYS_FORCE_NEW + K8S_FORCE_NEW.get(_k8s_key(inputs), [])
    prov = providers.get(_provider_urn(reg.provider), {})
    if inputs.get("kind") == "ConfigMap" and not (str(prov.get("enableConfigMapMutable")) == "true"
                                                  and not inputs.get("immutable")):
        fields = fields + ["data", "binaryData"]
    if inputs.get("kind") == "Secret" and not (str(prov.get("enableSecretMutable")) == "true"
                                               and not inputs.get("immutable")):
        fields = fields + ["data", "stringData"]
    return [parse_path(f) for f in fields]


def _provider_urn(ref: str) -> str:
    return ref.rsplit("::", 1)[0] if ref else ""


@dataclass
class _Diff:
    """One resource's fields: what the provider would change, what would be ignored, why."""
    changed: list[tuple] = field(default_factory=list)
    replace: list[tuple] = field(default_factory=list)
    ignored: list[tuple] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)


def _is_bridged(type_: str) -> bool:
    return type_ in schema()


def _diff_resource(reg: Registration, old: RawState, base_inputs: dict | None, new: RawState,
                   providers: dict[str, dict], unknown: set[str]) -> _Diff:
    bridged = _is_bridged(reg.type)
    new_inputs = plain(new.inputs)
    old_side = plain(old.outputs) if bridged else {k: v for k, v in plain(old.outputs).items()
                                                    if k in plain(old.inputs)}
    provider_paths = leaf_diff(old_side, new_inputs, zero_is_unset=bridged)
    if bridged:
        # Optional+Computed fields the program leaves unset keep the stored value (no diff).
        provider_paths = [p for p in provider_paths
                          if not (_empty(_get(new_inputs, p)) and (_attr(reg.type, p[:1]) or {}).get("computed"))]
        provider_paths = [p for p in provider_paths if _attr(reg.type, p[:1]) is not None]
    intent = set(leaf_diff(plain(base_inputs), new_inputs, zero_is_unset=bridged)) if base_inputs is not None else set()
    for key in sorted(unknown):  # an input computed from a replaced resource: unknown until it is recreated
        provider_paths.append((key,))
        intent.add((key,))
    ignore = [parse_path(p) for p in reg.options.get("ignore_changes") or []]
    roc = [parse_path(p) for p in reg.options.get("replace_on_changes") or []]
    create_only = CREATE_ONLY.get(reg.type, {})
    force_new = _k8s_force_new(reg, new_inputs, providers) if reg.is_kubernetes else []
    d = _Diff()
    for p in intent:
        if any(covers(i, p) for i in ignore):
            d.ignored.append(p)
            d.notes[format_path(p)] = "ignore_changes: the program's change is not applied"
    # The engine's order (pulumi/pulumi pkg/resource/deploy/step_generator.go): processIgnoreChanges first (an
    # ignored path takes the old value, so nothing below sees it), then the provider's Diff (its ForceNew fields are
    # replace keys), then applyReplaceOnChanges (a changed path under replace_on_changes becomes a replace key). A
    # create-only field is a field the provider's Update does not send: it matters only when nothing above replaces.
    for p in sorted(set(provider_paths), key=str):
        name = format_path(p)
        if any(covers(i, p) for i in ignore):
            continue
        attr = _attr(reg.type, p) if bridged else None
        if (attr or {}).get("force_new") or (bridged and (_attr(reg.type, p[:1]) or {}).get("force_new")):
            why = "ForceNew in the provider schema"
        elif any(covers(r, p) or covers(p, r) for r in roc):
            why = "replace_on_changes"
        elif any(covers(f, p) or covers(p, f) for f in force_new):
            why = "pulumi-kubernetes replaces the object when this changes"
        else:
            why = ""
        if why:
            d.changed.append(p)
            d.replace.append(p)
            d.notes[name] = why + (" (the provider alone would send it only at create)" if p[0] in create_only else "")
        elif p and p[0] in create_only:
            if p in intent or (p[0],) in intent:
                d.ignored.append(p)
                d.notes[name] = f"create-only: the provider sends it only at create ({create_only[p[0]]})"
            continue
        else:
            d.changed.append(p)
            if reg.is_kubernetes:
                immutable, allowed = K8S_API_IMMUTABLE.get(_k8s_key(new_inputs), ([], []))
                if any(covers(parse_path(i), p) for i in immutable) and not any(covers(parse_path(a), p)
                                                                                for a in allowed):
                    d.notes[name] = "immutable in the Kubernetes API: the update fails"
        if p[0] in unknown:
            d.notes[name] = "; ".join(filter(None, [d.notes.get(name), "computed from a replaced resource"]))
    if old.init_errors:
        # applyReplaceOnChanges: a replace_on_changes path that contains the special key "#initerror" ("*" does)
        # replaces a resource the last `up` left uninitialised; without one, an unchanged resource with
        # initialisation errors gets an empty update, which only awaits the same object again.
        annotations = ((new_inputs.get("metadata") or {}).get("annotations") or {}) if reg.is_kubernetes else {}
        if new_inputs.get("kind") == "Job" and annotations.get(REPLACE_UNREADY) == "true":
            key = ("metadata", "annotations", REPLACE_UNREADY)
            d.changed.append(key)
            d.replace.append(key)
            d.notes[REPLACE_UNREADY] = ("the last `up` left the Job failed: its pulumi.com/replaceUnready annotation "
                                        "replaces it")
        elif any(covers(r, (INIT_ERROR,)) for r in roc):
            d.changed.append((INIT_ERROR,))
            d.replace.append((INIT_ERROR,))
            d.notes[INIT_ERROR] = "the last `up` left it failed to initialise; replace_on_changes replaces it"
        elif not d.changed:
            d.changed.append((INIT_ERROR,))
            d.notes[INIT_ERROR] = ("the last `up` left it failed to initialise: the empty update re-awaits the same "
                                   "object")
    return d


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return None
    return obj


def _k8s_provider_replaced(reg: Registration, d: _Diff, unknown: set[str]) -> bool:
    """pulumi-kubernetes DiffConfig (provider/pkg/provider/provider.go:454-569): a changed clusterIdentifier
    replaces the provider, an unchanged one never does; without it, an unknown kubeconfig/context/cluster does."""
    keys = {p[0] for p in d.changed}
    if "clusterIdentifier" in reg.inputs:
        return "clusterIdentifier" in keys
    return bool(keys & unknown & {"kubeconfig", "context", "cluster"})


def changes(base: Recording | None, state: dict[str, RawState], new: Recording) -> list[Change]:
    """Every resource the new run would create, delete, replace, update or whose change would be ignored."""
    base_regs = {r.urn: r for r in base.resources} if base else {}
    base_raw = base.raw if base else {}
    providers = {r.urn: plain(new.raw[r.urn].inputs) for r in new.resources
                 if r.type.startswith("pulumi:providers:") and r.urn in new.raw}
    managed = [r for r in new.resources if r.custom and not r.options.get("read")
               and r.type != "pulumi:pulumi:StackReference"]
    out: dict[str, Change] = {}
    replaced: set[str] = set()
    unknown: dict[str, set[str]] = {}
    # A resource an alias moved (offline/engine.py Recording.moved) is diffed against its old URN's state, as the
    # engine does (pulumi/pulumi step_generator.go: an alias matching an old resource makes it the same resource).
    old_of = {r.urn: new.moved.get(r.urn, r.urn) for r in new.resources}
    while True:  # until no replacement cascades further
        for r in managed:
            old_urn = old_of[r.urn]
            if old_urn not in state:
                out[r.urn] = Change(r.name, r.type, "create", [], urn=r.urn)
                continue
            base_inputs = base_raw[old_urn].inputs if old_urn in base_raw else None
            d = _diff_resource(r, state[old_urn], base_inputs, new.raw[r.urn], providers, unknown.get(r.urn, set()))
            fields = [format_path(p) for p in d.changed] + [format_path(p) for p in d.ignored]
            if r.type == K8S_PROVIDER:
                action = "replace" if _k8s_provider_replaced(r, d, unknown.get(r.urn, set())) else (
                    "update" if d.changed else "ignored" if d.ignored else "")
            elif _provider_urn(r.provider) in replaced:
                action, fields = "replace", ["provider", *fields]
                d.notes["provider"] = f"its provider {_provider_urn(r.provider).split('::')[-1]} is replaced"
            else:
                action = "replace" if d.replace else "update" if d.changed else "ignored" if d.ignored else ""
            if action:
                out[r.urn] = Change(r.name, r.type, action, sorted(set(fields), key=fields.index), d.notes, r.urn)
            else:
                out.pop(r.urn, None)
        now = {u for u, c in out.items() if c.action == "replace"}
        grown = _cascade(managed, now, unknown, state, new)
        if now == replaced and not grown:
            break
        replaced = now
    for urn in state:
        if urn not in set(old_of.values()):
            reg = base_regs.get(urn)
            out[urn] = Change(reg.name if reg else urn.split("::")[-1], reg.type if reg else "", "delete", [], urn=urn)
    order = {r.urn: i for i, r in enumerate(new.resources)}
    for c in out.values():
        reg = base_regs.get(c.urn) or next((r for r in new.resources if r.urn == c.urn), None)
        if reg and c.action in ("replace", "delete") and reg.options.get("protect"):
            c.notes["protect"] = "protected: `pulumi up` fails until it is unprotected (docs/review-and-teardown.md)"
        if reg and c.action == "replace" and reg.options.get("delete_before_replace"):
            c.notes["delete_before_replace"] = "deleted before its replacement is created"
    return sorted(out.values(), key=lambda c: (order.get(c.urn, len(order)), c.name))


def _computed_values(res: RawState) -> set[str]:
    """What a replaced resource's preview does not know yet: its id and the outputs it did not echo from inputs
    (a replacement's planned state holds its inputs; the provider computes the rest at create)."""
    inputs = plain(res.inputs)
    vals = {str(v) for k, v in plain(res.outputs).items() if k not in inputs and isinstance(v, (str, int)) and v != ""}
    return {v for v in vals | {res.id} if len(v) > 3}


def _cascade(managed: list[Registration], replaced: set[str], unknown: dict[str, set[str]],
             state: dict[str, RawState], new: Recording) -> bool:
    """Mark the inputs computed from a replaced resource's unknown outputs (its id, its computed outputs) unknown,
    as Pulumi's preview does, so a ForceNew input that reads them replaces its resource too (pulumi/pulumi
    step_generator.go calculateDependentReplacements). True when a new input became unknown."""
    grown = False
    for r in managed:
        if r.urn not in new.raw:
            continue
        inputs = plain(new.raw[r.urn].inputs)
        for key, urns in r.property_dependencies.items():
            hidden = set().union(*(_computed_values(state[u]) for u in set(urns) & replaced if u in state))
            text = json.dumps(inputs.get(key), default=str)
            if any(v in text for v in hidden) and key not in unknown.setdefault(r.urn, set()):
                unknown[r.urn].add(key)
                grown = True
    return grown
