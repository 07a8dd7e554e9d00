"""The TrainingJob component inside the real program (every stack, under the recording engine): its children,
their parents/providers/dependencies, valid core objects, the RayJob exactly as the pure builder renders it,
secrets only inside the Secret, and the exported verl command line."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest

from components.model.layout import resolve_layout
from components.workloads.training.verl_config import MCP_FILE, entrypoint
from tests.components.workloads.training.test_rayjob import build, settings_for
from tests.conftest import record

COMPONENT = "verl-ack:training:TrainingJob"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
PV, PVC = "kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"
CONFIG_MAP, SECRET = "kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:Secret"
KINDS = ("datasets", "models", "checkpoints")


def children(rec) -> dict[str, object]:
    component = rec.get(COMPONENT, "train")
    return {r.name: r for r in rec.resources if r.parent == component.urn}


def manifest(reg) -> dict:
    return {k: v for k, v in reg.inputs.items() if not k.startswith("__")}


def names_of(rec, urns) -> set[tuple[str, str]]:
    by = rec.by_urn()
    return {(by[u].type, by[u].name) for u in urns if u in by}


def test_the_training_job_creates_volumes_configs_secret_and_rayjob_under_one_component(stack_name):
    rec = record(stack_name)
    kids = children(rec)
    expected = {f"train-{k}-{t}" for k in KINDS for t in ("pv", "pvc")} | {"train-config", "train-mcp", "train-rayjob",
                                                                          "train-ray-ingress"}
    s = settings_for(stack_name)
    ecs = s.gpu_pool.ecs
    if not (ecs is not None and ecs.min_nodes < s.gpu_pool.nodes):  # the node gate (test_gate.py)
        expected |= {"train-gate", "train-gate-sa", "train-gate-role", "train-gate-binding"}
    if s.image.source == "built":  # nothing installed at start: the Ray pods' egress is closed (test_network_policies)
        expected |= {"train-ray-egress"}
    assert set(kids) == expected, f"stack {stack_name}"
    for reg in kids.values():
        assert "pulumi:providers:kubernetes" in reg.provider, f"{reg.urn} does not use the cluster's provider"


def test_the_recorded_rayjob_is_the_pure_manifest(stack_name):
    rec = record(stack_name)
    _, expected = build(stack_name)
    assert manifest(children(rec)["train-rayjob"]) == expected


def test_every_core_object_is_valid_for_the_stacks_kubernetes_version(stack_name):
    rec = record(stack_name)
    s = settings_for(stack_name)
    for reg in children(rec).values():
        if reg.type == RAYJOB:
            continue  # checked against KubeRay's CRD in test_training_rayjob.py
        obj = copy.deepcopy(manifest(reg))
        if reg.type == SECRET:
            assert obj["stringData"] == {MCP_FILE: "[secret]"}  # the file name shows, its content never does
        kubernetes_validate.validate(obj, s.cluster.schema_version, strict=True)


def test_the_sandbox_key_reaches_the_cluster_only_inside_the_secret(stack_name):
    rec = record(stack_name)
    for reg in children(rec).values():
        text = json.dumps(reg.inputs)
        assert "offline-placeholder" not in text, reg.urn
        if reg.type != SECRET:
            assert "[secret]" not in text, f"{reg.urn} carries a secret value outside a Secret"
    assert "offline-placeholder" not in json.dumps(rec.outputs)


def test_claims_wait_for_their_volumes_and_the_namespace(stack_name):
    rec = record(stack_name)
    kids = children(rec)
    for kind in KINDS:
        deps = names_of(rec, kids[f"train-{kind}-pvc"].dependencies)
        assert (PV, f"train-{kind}-pv") in deps
        assert ("kubernetes:core/v1:Namespace", "identity-namespace") in deps


def test_the_rayjob_waits_for_everything_its_pods_and_data_need(stack_name):
    rec = record(stack_name)
    kids = children(rec)
    deps = names_of(rec, kids["train-rayjob"].dependencies)
    for kind in KINDS:
        assert (PVC, f"train-{kind}-pvc") in deps
    assert (CONFIG_MAP, "train-config") in deps and (SECRET, "train-mcp") in deps
    # No Ray pod runs before the policy that guards its unauthenticated job API exists.
    assert ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "train-ray-ingress") in deps
    assert ("kubernetes:core/v1:ServiceAccount", "identity-sa-train") in deps
    assert ("alicloud:cs/nodePool:NodePool", "pools-gpu") in deps
    assert ("kubernetes:batch/v1:Job", "data-model") in deps
    # The task's rows: the dataset Job's, or the researcher's own files uploaded by the program (TaskFiles).
    assert ("kubernetes:batch/v1:Job", "data-dataset") in deps or \
        ("alicloud:oss/bucketObject:BucketObject", "task-files-train") in deps
    assert ("kubernetes:core/v1:Service", "tracking-service") in deps
    assert ("kubernetes:core/v1:Service", "sandbox-mcp") in deps
    kuberay = [r for r in rec.resources if r.name in ("addons-kuberay",)]
    assert kuberay and names_of(rec, [kuberay[0].urn]) <= deps  # the RayJob CRD and its operator


def test_a_changed_rayjob_is_replaced_because_kuberay_runs_a_job_once(stack_name):
    options = children(record(stack_name))["train-rayjob"].options
    assert options["replace_on_changes"] == ["spec"] and options["delete_before_replace"] is True


def test_the_verl_command_line_is_exported(stack_name):
    rec = record(stack_name)
    s = settings_for(stack_name)
    assert rec.outputs["training_entrypoint"] == entrypoint(s, resolve_layout(s))


def test_the_access_key_fallback_mounts_through_the_storage_secret():
    rec = record("dev", {"storage": {"auth": "access_key"}})
    for kind in KINDS:
        csi = manifest(children(rec)[f"train-{kind}-pv"])["spec"]["csi"]
        assert csi["nodePublishSecretRef"]["namespace"] == "verl"
        ref = csi["nodePublishSecretRef"]["name"]
        secrets = [r for r in rec.by_type(SECRET) if r.inputs["metadata"]["name"] == ref]
        assert secrets, "the PV names a Secret the storage component does not create"
        assert "authType" not in csi["volumeAttributes"]


@pytest.mark.parametrize("stack", ["existing-ecs"])
def test_without_sandboxes_there_is_no_mcp_secret_and_no_code_tool(stack):
    rec = record(stack, {"sandbox": {"enabled": False}})
    kids = children(rec)
    assert "train-mcp" not in kids
    assert "run_code_once" not in kids["train-config"].inputs["data"]["tool_config.yaml"]


def test_the_plan_shows_the_training_job(stack_name):
    from offline.report import plan_sections

    s = settings_for(stack_name)
    (section,) = [sec for sec in plan_sections(s, record(stack_name)) if sec.key == "training"]
    assert section.data["gpu_pods"] == s.gpu_pool.nodes
    assert section.data["checkpoint_key_prefix"] == f"{s.storage.checkpoints_prefix}{s.training.project_name}/" \
                                                     f"{s.training.experiment_name}/"
    assert "GPU head (trains)" in section.markdown
