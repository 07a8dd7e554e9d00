"""What the state holds after the first `pulumi up` (and a `pulumi refresh`): the read-back rules.

A real provider's Read stores what the cloud returns, not what the program sent; controllers and Kubernetes
change objects behind Pulumi. The offline engine echoes inputs, so without these rules a second offline
preview could never show the diffs a real one shows. Each rule names the resource type it applies to, what it
stores and its source (file:lines at the commits below); `readback(recording)` applies them all and returns the
state (urn -> RawState) a second run starts from (offline/day2.py). A rule returns None when the object is gone.

Sources: TF = aliyun/terraform-provider-alicloud@ace5bcf8777e (release/v2, docs/facts-provider.md);
ALBC = alibaba/alibaba-load-balancer-controller@c2771084ee48; K8S = Kubernetes documentation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime import rpc

from components.config.addons import DEFAULT_ADDONS
from offline.engine import RawState, Recording

ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
ALB = "alicloud:alb/loadBalancer:LoadBalancer"
ALBCONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"
BUCKET = "alicloud:oss/bucket:Bucket"
BUCKET_POLICY = "alicloud:oss/bucketPolicy:BucketPolicy"
BUCKET_LOGGING = "alicloud:oss/bucketLogging:BucketLogging"
CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
JOB = "kubernetes:batch/v1:Job"
NODE_POOL = "alicloud:cs/nodePool:NodePool"
# Values only the live account knows, written visibly (as UPGRADED is): what ACK returns for a field the program never
# sets. docs/uncertain-facts.md says which of these ACK is known to return; the model assumes the unsafe case, that it
# returns something, so the program must not diff on it whatever ACK does.
ACK_TIMEZONE = "[ACK's cluster timezone]"
ACK_LOG_COMPONENTS = ["[control-plane log component ACK enabled]"]
ACK_SCALING_GROUP_VSWITCH = "[vSwitch of ACK's scaling group]"
ACK_SCALING_GROUP_TYPE = "[instance type of ACK's scaling group]"
# ACK's own tag keys (TF alicloud/service_alicloud_cs.go:48-49 DefaultClusterTag, CsPlayerAccountIdTag).
ACK_CLUSTER_TAG = "ack.aliyun.com"
ACK_PLAYER_ACCOUNT_TAG = "ack.playeraccount"
# The taint ACK puts on Lingjun nodes (components/wiring.py LINGJUN_TAINT_KEY, docs/facts.md; value and effect as
# modelled here are not published).
LINGJUN_TAINT = {"key": "node-role.alibabacloud.com/lingjun", "value": "", "effect": "NoSchedule"}
UPGRADED = "+upgraded-by-ack"  # suffix of a pinned add-on version after ACK's managed upgrade (fake, visibly)


def plain(value: Any) -> Any:
    """The value with every Pulumi secret wrapper removed (diffs compare values, secret or not)."""
    if rpc.is_rpc_secret(value):
        return plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _like(original: Any, value: Any) -> Any:
    """`value` wrapped as a secret when `original` was one (a read-back secret stays secret)."""
    return rpc.wrap_rpc_secret(value) if rpc.is_rpc_secret(original) else value


def go_json(value: Any) -> str:
    """Go's `json.Marshal` of what `json.Unmarshal` into interface{} made of `value`: compact, map keys sorted,
    numbers as float64, `<`, `>`, `&`, U+2028 and U+2029 escaped (Go encoding/json encode.go, escapeHTML on)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _go_float(float(value))
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_string(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _go_float(f: float) -> str:
    # encoding/json floatEncoder: 'f' format unless |f| < 1e-6 or >= 1e21, shortest round-trip digits.
    if f != 0 and (abs(f) < 1e-6 or abs(f) >= 1e21):
        text = repr(f)
        return text.replace("e-0", "e-")  # Go writes 1e-07 as 1e-7
    if f.is_integer():
        return str(int(f))
    return format(Decimal(repr(f)), "f")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_string(s: str) -> str:
    return '"' + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 else c) for c in s) + '"'


def flatten_cluster_tags(tags: dict) -> dict:
    """TF resource_alicloud_cs_kubernetes.go:1692-1706 flattenTags, which the cluster's Read applies: ACK's own keys
    and the keys tagIgnored drops are not stored."""
    return {k: v for k, v in tags.items() if k not in (ACK_CLUSTER_TAG, ACK_PLAYER_ACCOUNT_TAG) and not _tag_ignored(k)}


def merge_config_values(local: dict, remote: dict) -> dict:
    """TF resource_alicloud_cs_kubernetes_addon.go:313-330 mergeConfigValues: the keys present in both, with the
    remote value; nested maps merged the same way (a map locally but not remotely is dropped)."""
    merged: dict = {}
    for key, new in remote.items():
        if key in local:
            if isinstance(local[key], dict):
                if isinstance(new, dict):
                    merged[key] = merge_config_values(local[key], new)
            else:
                merged[key] = new
    return merged


@dataclass(frozen=True)
class Rule:
    key: str
    type: str
    stores: str
    source: str
    apply: Callable[[str, RawState, Recording], RawState | None]


# What ACK stores of an add-on's config: the keys its config schema knows. Where the program has the add-on's own
# key list (the chart an ACK add-on is built on, kept verbatim in tests/data/charts), a sent key outside it is not
# stored (ACK's schema is the chart's values, the assumption docs/uncertain-facts.md names); elsewhere ACK is assumed
# to keep every key sent. add-on name -> the chart values file.
CHARTS_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "charts"
ADDON_CHARTS = {DEFAULT_ADDONS["sandbox_manager"]: "kruise-agents-sandbox-manager-0.2.0.values.yaml"}


@cache
def addon_schema(name: str) -> dict | None:
    """The default values of the chart the add-on `name` is built on, or None where the program has none."""
    file = ADDON_CHARTS.get(name)
    return (yaml.safe_load((CHARTS_DIR / file).read_text()) or {}) if file else None


def known_part(sent: dict, schema: dict) -> dict:
    """The part of `sent` whose keys `schema` (an add-on's default values) has; below a key whose default is not a
    non-empty map anything is kept (the chart takes any content there)."""
    out = {}
    for key, value in sent.items():
        if key not in schema:
            continue
        below = schema[key]
        out[key] = known_part(value, below) if isinstance(value, dict) and isinstance(below, dict) and below else value
    return out


def _addon_config(urn: str, res: RawState, rec: Recording) -> RawState:
    config = plain(res.inputs.get("config"))
    if not config:
        return res  # Read merges into "{}", finds "{}" and sets nothing (:104-124)
    local = json.loads(config)
    # The remote config is what ACK kept of what was sent: its values for the same keys are not knowable offline.
    schema = addon_schema(plain(res.inputs.get("name")) or "")
    remote = known_part(local, schema) if schema is not None else copy.deepcopy(local)
    result = go_json(merge_config_values(local, remote))
    if result == "{}":
        return res
    return replace(res, outputs={**res.outputs, "config": _like(res.inputs.get("config"), result)})


def _addon_version(urn: str, res: RawState, rec: Recording) -> RawState:
    pinned = plain(res.inputs.get("version"))
    live = f"{pinned}{UPGRADED}" if pinned else "[live version]"
    return replace(res, outputs={**res.outputs, "version": live})


def _cluster_id(rec: Recording) -> str:
    ids = [rec.raw[r.urn].id for r in rec.resources if r.type == CLUSTER and r.urn in rec.raw]
    return ids[0] if ids else "c-unknown"


def _tag_ignored(key: str) -> bool:
    # TF tags.go:165-176 tagIgnored, applied by tagsToMap (:107-118) when Read sets tags.
    return key.startswith(("aliyun", "acs:", "http://", "https://", "sae.do.not.delete"))


def _alb_controller_tags(urn: str, res: RawState, rec: Recording) -> RawState:
    tags = dict(plain(res.outputs.get("tags")) or {})
    for r in rec.resources:
        if r.type != ALBCONFIG or r.urn not in rec.raw:
            continue
        obj = plain(rec.raw[r.urn].inputs)
        config = (obj.get("spec") or {}).get("config") or {}
        if config.get("id") != res.id:
            continue
        meta = obj.get("metadata") or {}
        stack_id = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
        added = {"ack.aliyun.com": _cluster_id(rec), "ingress.k8s.alibaba/albconfig": stack_id,
                 "ingress.k8s.alibaba/resource": "ApplicationLoadBalancer",
                 **{t.get("key"): t.get("value") for t in config.get("tags") or []}}
        tags.update({k: v for k, v in added.items() if not _tag_ignored(k)})
    return replace(res, outputs={**res.outputs, "tags": tags})


def _bucket_policy_logging(urn: str, res: RawState, rec: Recording) -> RawState:
    name = plain(res.outputs.get("bucket"))
    outputs = dict(res.outputs)
    for r in rec.resources:
        if r.urn not in rec.raw or plain(rec.raw[r.urn].inputs.get("bucket")) != name:
            continue
        inputs = plain(rec.raw[r.urn].inputs)
        if r.type == BUCKET_POLICY:
            outputs["policy"] = inputs.get("policy", "")  # GET ?policy returns the document the BucketPolicy put
        elif r.type == BUCKET_LOGGING:
            outputs["logging"] = {"targetBucket": inputs.get("targetBucket", ""),
                                  "targetPrefix": inputs.get("targetPrefix", "")}
    return replace(res, outputs=outputs)


def _cluster_read(urn: str, res: RawState, rec: Recording) -> RawState:
    inputs = plain(res.inputs)
    outputs = dict(res.outputs)
    if not inputs.get("timezone"):
        outputs["timezone"] = ACK_TIMEZONE  # Read: `if object.Timezone != nil { d.Set("timezone", ...) }`
    if not inputs.get("controlPlaneLogComponents"):
        outputs["controlPlaneLogComponents"] = list(ACK_LOG_COMPONENTS)  # checkControlPlaneLogEnable sets them
    live = {**(plain(res.outputs.get("tags")) or {}), ACK_CLUSTER_TAG: res.id, ACK_PLAYER_ACCOUNT_TAG: "[account]"}
    outputs["tags"] = flatten_cluster_tags(live)
    return replace(res, outputs=outputs)


def _node_pool_read(urn: str, res: RawState, rec: Recording) -> RawState:
    inputs = plain(res.inputs)
    outputs = dict(res.outputs)
    tags = dict(plain(res.outputs.get("tags")) or {})
    tags[ACK_CLUSTER_TAG] = plain(inputs.get("clusterId")) or _cluster_id(rec)  # tagsToMap keeps it
    outputs["tags"] = {k: v for k, v in tags.items() if not _tag_ignored(k)}
    if inputs.get("type") == "lingjun":
        # Its machines are EFLO nodes, not ECS instances of a scaling group: what ACK returns under scaling_group for
        # such a pool is not knowable offline; Read sets whatever it is (and an empty list when there is none).
        outputs["vswitchIds"] = inputs.get("vswitchIds") or [ACK_SCALING_GROUP_VSWITCH]
        outputs["instanceTypes"] = inputs.get("instanceTypes") or [ACK_SCALING_GROUP_TYPE]
        taints = [dict(t) for t in plain(res.outputs.get("taints")) or []]
        if not any(t.get("key") == LINGJUN_TAINT["key"] for t in taints):
            taints.append(dict(LINGJUN_TAINT))  # if ACK keeps its Lingjun taint in the pool's kubernetes_config
        outputs["taints"] = taints
    return replace(res, outputs=outputs)


def _job_ttl(urn: str, res: RawState, rec: Recording) -> RawState | None:
    ttl = (plain(res.inputs).get("spec") or {}).get("ttlSecondsAfterFinished")
    return None if ttl is not None else res


RULES = [
    Rule("addon-config", ADDON, "config = Go json.Marshal of the merged local and remote config; a sent key the "
         "add-on's config (its chart's values, where the program has them) lacks is dropped",
         "TF alicloud/resource_alicloud_cs_kubernetes_addon.go:62-66 (config Optional+Computed, no "
         "DiffSuppressFunc), :102-124 (Read: mergeConfigValues, json.Marshal, d.Set), :313-330", _addon_config),
    Rule("addon-version", ADDON, "version = the live add-on version (after ACK's managed upgrade, the newer one)",
         "TF resource_alicloud_cs_kubernetes_addon.go:43-47 (version Optional+Computed), :98 (Read sets it), "
         ":261-266 (needUpgrade: a pinned version that differs from the live one is an upgrade call)",
         _addon_version),
    Rule("alb-controller-tags", ALB, "tags += ack.aliyun.com, ingress.k8s.alibaba/albconfig, "
         "ingress.k8s.alibaba/resource (and the AlbConfig's spec.config.tags) when an AlbConfig reuses the ALB",
         "ALBC pkg/provider/alibaba/alb/alb.go:597-613 (ReuseALB tags the ALB), :502-521 (Tag), "
         "pkg/controller/ingress/reconcile/tracking/tracking.go:59-77; TF resource_alicloud_alb_load_balancer.go:"
         "468-469 (Read sets every tag), alicloud/tags.go:107-118, 165-176 (only aliyun/acs:/http(s):// keys dropped)",
         _alb_controller_tags),
    Rule("bucket-policy-logging", BUCKET, "policy = the bucket's policy document, logging = its logging target "
         "(both Optional, not Computed) when a BucketPolicy / BucketLogging sets them",
         "TF alicloud/resource_alicloud_oss_bucket.go:98-114 (logging), :350-353 (policy), :712-732 (Read sets "
         "logging), :910-933 (Read sets policy from GET ?policy)", _bucket_policy_logging),
    Rule("cluster-read", CLUSTER, "timezone = ACK's when the program sets none; control_plane_log_components = the "
         "components ACK collects; tags = the sent tags plus ACK's own keys, less those flattenTags drops",
         "TF alicloud/resource_alicloud_cs_managed_kubernetes.go:201-204 (timezone Optional, not Computed), :931-933 "
         "(Read sets it when the API returns one), :1124-1125 (timezone in ModifyCluster's HasChanges), :422-429 "
         "(control_plane_log_components Optional, not Computed), :1108, 1386-1420 (checkControlPlaneLogEnable sets "
         "ttl, project, components), :1140-1144 (an update calls UpdateControlPlaneLog), :944 and "
         "resource_alicloud_cs_kubernetes.go:1692-1706 (flattenTags drops ack.aliyun.com, ack.playeraccount and "
         "tagIgnored keys)", _cluster_read),
    Rule("node-pool-read", NODE_POOL, "tags = tagsToMap($.scaling_group.tags), ACK's ack.aliyun.com kept; a Lingjun "
         "pool: vswitch_ids, instance_types from $.scaling_group and taints from $.kubernetes_config.taints, ACK's "
         "Lingjun taint included",
         "TF alicloud/resource_alicloud_cs_kubernetes_node_pool.go:285-289, 930-950, 1020-1024 (instance_types, "
         "taints, vswitch_ids Optional, not Computed), :2108-2109, 2411-2412, 2413-2428, 2443-2444 (Read sets "
         "them), :2978-2997 and :3114-3115 (a taints update is sent with update_nodes), :3683-3694 "
         "(flattenTagsConfig drops ack.aliyun.com from pool tags: ACK returns it there; Read uses tagsToMap, which "
         "keeps it)", _node_pool_read),
    Rule("job-ttl", JOB, "gone: the TTL-after-finished controller deletes a finished Job with "
         "spec.ttlSecondsAfterFinished; refresh drops it from the state and the next up creates it again",
         "K8S https://kubernetes.io/docs/concepts/workloads/controllers/ttlafterfinished/; pulumi-kubernetes "
         "provider/pkg/provider/provider.go Read (a 404 returns an empty id: deleted)", _job_ttl),
]


def readback(recording: Recording, rules: list[Rule] | None = None) -> dict[str, RawState]:
    """The state after the first up and a refresh: every custom resource's raw state with the rules applied."""
    state: dict[str, RawState] = {}
    for r in recording.resources:
        if not r.custom or r.urn not in recording.raw or r.options.get("read"):
            continue
        res: RawState | None = recording.raw[r.urn]
        for rule in rules if rules is not None else RULES:
            if res is not None and rule.type == r.type:
                res = rule.apply(r.urn, res, recording)
        if res is not None:
            state[r.urn] = res
    return state
