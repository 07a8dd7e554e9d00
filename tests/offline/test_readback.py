"""Each read-back rule catches the defect it exists for, and the diff follows the providers' rules: a rule's
defect on a one-resource state gives the diff a real second preview would show, the fix gives none."""

from __future__ import annotations

import json

from offline.changes import changes, leaf_diff, parse_path
from offline.engine import RawState, Recording, Registration
from offline.readback import go_json, readback

PROVIDER = "urn:pulumi:s::p::pulumi:providers:kubernetes::k8s::fake-1"


def _reg(type_: str, name: str, inputs: dict, res_id: str = "", **options) -> tuple[Registration, RawState]:
    urn = f"urn:pulumi:s::p::{type_}::{name}"
    reg = Registration(urn=urn, type=type_, name=name, custom=True, parent="", provider=PROVIDER,
                       dependencies=[], property_dependencies={}, inputs=inputs,
                       options={"ignore_changes": [], "replace_on_changes": [], **options}, id=res_id)
    return reg, RawState(res_id or f"id-{name}", inputs, dict(inputs))


def _recording(*items: tuple[Registration, RawState]) -> Recording:
    rec = Recording()
    for reg, raw in items:
        rec.resources.append(reg)
        rec.raw[reg.urn] = raw
    return rec


def _second_preview(rec: Recording) -> dict[str, tuple[str, list[str]]]:
    """Nothing changed in the program: the same registrations against the read-back state."""
    return {c.name: (c.action, c.fields) for c in changes(rec, readback(rec), rec) if c.action != "ignored"}


ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"


def test_go_json_is_compact_sorted_and_html_escaped_like_go():
    assert go_json(json.loads('{"b": "<a&b>", "a": 1.0, "c": [true, null, 0.5, 1e-7]}')) == \
        '{"a":1,"b":"\\u003ca\\u0026b\\u003e","c":[true,null,0.5,1e-7]}'


def test_an_add_on_config_written_by_json_dumps_with_spaces_diffs_on_every_preview():
    spaced = json.dumps({"albIngress": {"CreateDefaultALBConfig": False}})
    assert _second_preview(_recording(_reg(ADDON, "alb", {"clusterId": "c1", "config": spaced}))) == \
        {"alb": ("update", ["config"])}


def test_an_add_on_config_written_as_go_marshals_it_does_not_diff():
    compact = go_json({"albIngress": {"CreateDefaultALBConfig": False}})
    assert _second_preview(_recording(_reg(ADDON, "alb", {"clusterId": "c1", "config": compact}))) == {}


def test_a_pinned_add_on_version_diffs_after_ack_upgrades_it_and_an_unpinned_one_does_not():
    pinned = _recording(_reg(ADDON, "rdma", {"clusterId": "c1", "version": "v1.0.0"}))
    assert _second_preview(pinned) == {"rdma": ("update", ["version"])}
    assert _second_preview(_recording(_reg(ADDON, "rdma", {"clusterId": "c1"}))) == {}


def _alb_pair(**alb_options):
    alb = _reg("alicloud:alb/loadBalancer:LoadBalancer", "alb", {"tags": {"project": "verl-ack"}}, "alb-1",
               **alb_options)
    albconfig = _reg("kubernetes:alibabacloud.com/v1:AlbConfig", "albconfig",
                     {"apiVersion": "alibabacloud.com/v1", "kind": "AlbConfig", "metadata": {"name": "verl"},
                      "spec": {"config": {"id": "alb-1", "forceOverride": False}}})
    return _recording(alb, albconfig)


def test_the_alb_controllers_tags_on_a_reused_alb_diff_unless_ignore_changes_covers_tags():
    action, fields = _second_preview(_alb_pair())["alb"]
    assert action == "update"
    assert fields == ['tags["ack.aliyun.com"]', 'tags["ingress.k8s.alibaba/albconfig"]',
                      'tags["ingress.k8s.alibaba/resource"]']
    assert _second_preview(_alb_pair(ignore_changes=["tags"])) == {}


def _bucket(**options):
    bucket = _reg("alicloud:oss/bucket:Bucket", "bucket", {"bucket": "b1", "storageClass": "Standard"}, **options)
    policy = _reg("alicloud:oss/bucketPolicy:BucketPolicy", "policy", {"bucket": "b1", "policy": '{"Version":"1"}'})
    logging = _reg("alicloud:oss/bucketLogging:BucketLogging", "logging",
                   {"bucket": "b1", "targetBucket": "b1", "targetPrefix": "access-logs/"})
    return _recording(bucket, policy, logging)


def test_a_bucket_beside_its_policy_and_logging_resources_would_delete_both_unless_it_ignores_them():
    assert _second_preview(_bucket()) == {"bucket": ("update", ["logging", "policy"])}
    assert _second_preview(_bucket(ignore_changes=["policy", "logging"])) == {}


def test_a_job_with_a_ttl_is_gone_after_a_refresh_and_the_next_up_creates_it_again():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {}}}
    with_ttl = {**job, "spec": {"template": {}, "ttlSecondsAfterFinished": 86400}}
    assert _second_preview(_recording(_reg("kubernetes:batch/v1:Job", "j", with_ttl))) == {"j": ("create", [])}
    assert _second_preview(_recording(_reg("kubernetes:batch/v1:Job", "j", job))) == {}


def test_an_optional_computed_field_the_program_leaves_unset_does_not_diff_but_an_optional_one_does():
    # `config` of an add-on is Optional+Computed: ACK's value in the state is no diff when the program sets none.
    reg, raw = _reg(ADDON, "a", {"clusterId": "c1"})
    raw.outputs["config"] = '{"x":1}'
    assert changes(_recording((reg, raw)), {reg.urn: raw}, _recording((reg, raw))) == []
    # `policy` of a bucket is only Optional: a stored value with none in the program is a removal.
    reg, raw = _reg("alicloud:oss/bucket:Bucket", "b", {"bucket": "b1"})
    raw.outputs["policy"] = '{"Version":"1"}'
    assert [c.fields for c in changes(_recording((reg, raw)), {reg.urn: raw}, _recording((reg, raw)))] == [["policy"]]


def test_a_configmap_data_change_replaces_it_as_pulumi_kubernetes_does_by_default():
    old = _reg("kubernetes:core/v1:ConfigMap", "cm", {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "cm"}, "data": {"a": "1"}})
    new = _reg("kubernetes:core/v1:ConfigMap", "cm", {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "cm"}, "data": {"a": "2"}})
    base = _recording(old)
    [c] = changes(base, readback(base), _recording(new))
    assert (c.action, c.fields) == ("replace", ["data.a"])


def test_ignore_changes_paths_cover_everything_under_them():
    assert parse_path('spec.resources') == ("spec", "resources")
    assert parse_path('tags["ack.aliyun.com"]') == ("tags", "ack.aliyun.com")
    assert leaf_diff({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1, 3]}}) == [("a", "b"), ("a", "c", 1)]


CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
POOL = "alicloud:cs/nodePool:NodePool"


def test_a_cluster_diffs_on_the_timezone_and_log_components_ack_reports_unless_it_ignores_them():
    inputs = {"name": "c", "tags": {"team": "rl"}}
    assert _second_preview(_recording(_reg(CLUSTER, "cluster", inputs, "c1"))) == \
        {"cluster": ("update", ["controlPlaneLogComponents", "timezone"])}
    ignoring = _reg(CLUSTER, "cluster", inputs, "c1", ignore_changes=["timezone", "controlPlaneLogComponents"])
    assert _second_preview(_recording(ignoring)) == {}


def test_the_cluster_read_drops_acks_own_tags_so_the_programs_tags_do_not_diff():
    reg, raw = _reg(CLUSTER, "cluster", {"tags": {"team": "rl"}}, "c1",
                    ignore_changes=["timezone", "controlPlaneLogComponents"])
    state = readback(_recording((reg, raw)))
    assert state[reg.urn].outputs["tags"] == {"team": "rl"}  # ack.aliyun.com, ack.playeraccount: flattenTags


def test_a_pool_diffs_on_acks_scaling_group_tag_unless_that_one_key_is_ignored():
    inputs = {"clusterId": "c1", "tags": {"team": "rl"}}
    assert _second_preview(_recording(_reg(POOL, "system", inputs))) == \
        {"system": ("update", ['tags["ack.aliyun.com"]'])}
    reg = _reg(POOL, "system", inputs, ignore_changes=['tags["ack.aliyun.com"]'])
    assert _second_preview(_recording(reg)) == {}
    # the program's own tags still reach the pool
    rec = _recording(reg)
    new = _recording(_reg(POOL, "system", {**inputs, "tags": {"team": "infra"}},
                          ignore_changes=['tags["ack.aliyun.com"]']))
    assert {c.name: (c.action, c.fields) for c in changes(rec, readback(rec), new)} == \
        {"system": ("update", ["tags.team"])}


def test_a_lingjun_pool_diffs_on_what_ack_returns_for_its_scaling_group_and_taints_unless_it_ignores_them():
    taint = {"key": "verl-ack/gpu", "value": "true", "effect": "NoSchedule"}
    inputs = {"clusterId": "c1", "type": "lingjun", "taints": [taint], "updateNodes": True}
    # the taints update would go out with update_nodes and strip ACK's Lingjun taint from the machines
    assert _second_preview(_recording(_reg(POOL, "gpu", inputs))) == \
        {"gpu": ("update", ["instanceTypes", "tags", "taints", "vswitchIds"])}
    assert _second_preview(_recording(_reg(POOL, "gpu", inputs, ignore_changes=[
        "instanceTypes", "tags", "taints", "vswitchIds"]))) == {}


def test_an_add_on_config_key_its_chart_lacks_is_dropped_by_the_read_and_diffs_forever():
    # mergeConfigValues keeps only the keys the remote config has: a misspelt key never comes back
    good = go_json({"e2b": {"domain": "sb.example.com"}, "ingress": {"className": "alb"}})
    typo = go_json({"e2b": {"domian": "sb.example.com"}, "ingress": {"className": "alb"}})
    assert _second_preview(_recording(_reg(ADDON, "mgr", {"name": "ack-sandbox-manager", "config": good}))) == {}
    assert _second_preview(_recording(_reg(ADDON, "mgr", {"name": "ack-sandbox-manager", "config": typo}))) == \
        {"mgr": ("update", ["config"])}

