"""The GPU node gate: a read-only, restricted Job that the RayJob waits for, expecting the run's nodes and
resources (components/workloads/training/gate.py; its code is pipeline/node_gate.py)."""

from __future__ import annotations

import dataclasses
import json

from components.model.layout import resolve_layout
from components.wiring import TRAINING_SERVICE_ACCOUNT, gpu_scheduling
from components.workloads.data import code_configmap_name, pipeline_code
from components.workloads.training import gate
from components.workloads.training.run_spec import pod_wiring, run_spec
from tests.components.workloads.training.test_rayjob import settings_for
from tests.conftest import record

JOB = "kubernetes:batch/v1:Job"


def spec_of(stack: str, overrides: dict | None = None):
    s = settings_for(stack, overrides)
    wiring = pod_wiring(s, namespace=s.job.namespace, service_account=TRAINING_SERVICE_ACCOUNT)
    return s, run_spec(s, resolve_layout(s), gpu_scheduling(s), wiring)


def env_of(job: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_multinode_waits_for_two_nodes_with_8_gpus_and_an_rdma_nic_each():
    s, spec = spec_of("multinode")
    env = env_of(gate.gate_job_manifest(s, spec, "code"))
    assert env["GATE_NODES"] == "2" and env["GATE_POOL"] == "verl-multi-gpu"
    assert json.loads(env["GATE_RESOURCES"]) == {"nvidia.com/gpu": "8", "rdma/hca": "1"}
    assert env["GATE_SELECTOR"] == "verl-ack/pool=gpu" and spec.scheduling.node_selector == {"verl-ack/pool": "gpu"}
    assert "Lingjun" in env["GATE_HINTS"]
    _, single = spec_of("dev")
    assert json.loads(env_of(gate.gate_job_manifest(settings_for("dev"), single, "c"))["GATE_RESOURCES"]) == {
        "nvidia.com/gpu": "8"}


def test_the_rayjob_is_created_only_after_the_gate_job_which_runs_the_pipeline_code():
    rec = record("multinode")
    by = rec.by_urn()
    rayjob = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob")
    gate_job = rec.get(JOB, "train-gate")
    assert gate_job.urn in rayjob.dependencies
    code = rec.get("kubernetes:core/v1:ConfigMap", "data-code")
    assert code.urn in gate_job.dependencies
    assert code.inputs["metadata"]["name"] == code_configmap_name(pipeline_code())
    volumes = gate_job.inputs["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "code", "configMap": {"name": code_configmap_name(pipeline_code()),
                                                      "defaultMode": 0o444}}]
    assert any(by[u].type == "alicloud:cs/nodePool:NodePool" for u in gate_job.dependencies if u in by)


def test_the_gate_may_only_read_nodes_and_runs_at_the_restricted_level():
    s, spec = spec_of("multinode")
    role = gate.cluster_role_manifest(s)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    binding = gate.cluster_role_binding_manifest(s, "verl")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "verl-multi-node-gate", "namespace": "verl"}]
    pod = gate.gate_job_manifest(s, spec, "c")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == gate.service_account_manifest(s, "verl")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == \
        "RuntimeDefault"
    (c,) = pod["containers"]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert c["command"] == ["python", "-m", "pipeline.node_gate"]
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"  # what `pulumi up` shows when it fails


def test_the_gate_is_bounded_and_pulumi_waits_longer_than_it():
    s, spec = spec_of("multinode", {"job": {"node_gate_timeout_seconds": 600}})
    job = gate.gate_job_manifest(s, spec, "c")
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 900
    assert env_of(job)["GATE_TIMEOUT_SECONDS"] == "600"


def test_a_new_run_gets_a_new_gate_job_and_the_same_run_the_same_one():
    s, spec = spec_of("multinode")
    a = gate.gate_job_manifest(s, spec, "c")["metadata"]["name"]
    assert a == gate.gate_job_manifest(s, spec, "c")["metadata"]["name"]
    other = dataclasses.replace(spec, entrypoint=spec.entrypoint + " trainer.save_freq=5")
    assert gate.gate_job_manifest(s, other, "c")["metadata"]["name"] != a
    # A change the entrypoint does not show (a pod's resources) replaces the RayJob too, so it gets a new gate.
    smaller = dataclasses.replace(spec, memory_gib=spec.memory_gib - 1)
    assert gate.gate_job_manifest(s, smaller, "c")["metadata"]["name"] != a
    assert len(a) <= 63


def test_no_gate_for_an_autoscaled_ecs_pool_or_when_switched_off():
    assert not gate.gate_needed(settings_for("existing-ecs"))  # min_nodes 0: nodes boot for the Ray pods
    assert not gate.gate_needed(settings_for("multinode", {"job": {"node_gate": False}}))
    assert gate.gate_needed(settings_for("dev"))
    assert not [r for r in record("existing-ecs").by_type(JOB) if r.name == "train-gate"]


def test_a_platform_owned_pool_is_named_by_its_platform_stack():
    s = settings_for("dev-grpo")
    assert gate.pool_name(s) == f"of platform stack {s.platform_stack} (gpu_pool.owner: platform)"


def test_a_failed_gate_says_the_next_up_checks_again_and_the_job_is_replaced_not_re_awaited():
    rec = record("multinode")
    gate_job = rec.get(JOB, "train-gate")
    assert json.loads(env_of(gate_job.inputs)["GATE_HINTS"])[-1].startswith("once fixed, run `pulumi up` again")
    # pulumi-kubernetes' documented switch replaces the Job the last `up` left failed; delete first: its name is fixed
    assert gate_job.inputs["metadata"]["annotations"] == {"pulumi.com/replaceUnready": "true"}
    assert not gate_job.options.get("replace_on_changes") and gate_job.options["delete_before_replace"]
