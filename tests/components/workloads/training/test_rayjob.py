"""The RayJob: KubeRay's CRD schema (v1.7.0), KubeRay's controller rules, the Ray cluster shape, lifecycle,
and snapshots of the dev stack's command line and manifest (UPDATE_SNAPSHOTS=1 rewrites them)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from components.config import Settings, SettingsError
from components.model import parse_settings
from components.model.layout import resolve_layout
from components.wiring import TRAINING_SERVICE_ACCOUNT, gpu_scheduling, ray_namespace
from components.workloads.training.rayjob import (
    GPU_RESOURCE,
    RDMA_RESOURCE,
    RayJobError,
    check_rayjob,
    pod_wiring,
    rayjob_manifest,
    runtime_env_yaml,
)
from tests.conftest import OFFICIAL_IMAGE, STACKS, record, stack_settings
from tests.crd import RAYJOB_CRD
from tests.crd import crd_errors as shared_crd_errors
from tests.snapshot import assert_text_snapshot

REPO = Path(__file__).resolve().parents[4]
# site-packages of the interpreter running the tests (any virtualenv): verl is installed there --no-deps.
SITE = Path(importlib.util.find_spec("verl").origin).resolve().parent.parent


# --------------------------------------------------------------------------------------------- helpers
def settings_for(stack: str = "dev", overrides: dict | None = None) -> Settings:
    return parse_settings(stack_settings(stack, overrides))


def build(stack: str = "dev", overrides: dict | None = None) -> tuple[Settings, dict]:
    """The RayJob exactly as the TrainingJob component renders it for a stack."""
    s = settings_for(stack, overrides)
    wiring = pod_wiring(s, namespace=ray_namespace(s), service_account=TRAINING_SERVICE_ACCOUNT)
    return s, rayjob_manifest(s, resolve_layout(s), gpu_scheduling(s), wiring)


def checkpoint_claim(s: Settings) -> str:
    return f"{s.name}-checkpoints"


def crd_errors(manifest: dict) -> list[str]:
    return shared_crd_errors(manifest, RAYJOB_CRD, "v1")


def pod_templates(manifest: dict) -> list[dict]:
    cluster = manifest["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster.get("workerGroupSpecs", [])]


def overrides_of(manifest: dict) -> dict[str, str]:
    words = shlex.split(manifest["spec"]["entrypoint"])
    return dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("--"))


# --------------------------------------------------------------------------------------------- conformance
def test_every_stacks_rayjob_validates_against_the_kuberay_1_7_crd(stack_name):
    _, manifest = build(stack_name)
    assert crd_errors(manifest) == [], f"stack {stack_name}"


def test_the_crd_check_rejects_unknown_fields_so_it_can_fail():
    _, manifest = build("dev")
    manifest["spec"]["shutdownAfterJobFinish"] = True  # typo of shutdownAfterJobFinishes
    manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] = 8  # not a string
    errors = crd_errors(manifest)
    assert any("shutdownAfterJobFinish" in e for e in errors)
    assert any("num-gpus" in e for e in errors)


def test_every_stacks_rayjob_passes_kuberays_controller_rules(stack_name):
    s, manifest = build(stack_name)
    check_rayjob(manifest, s.versions.kuberay, checkpoint_claim=checkpoint_claim(s))


def test_lifecycle_deletes_the_ray_cluster_after_the_job_and_bounds_its_time(stack_name):
    s, manifest = build(stack_name)
    spec = manifest["spec"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] == s.job.ttl_seconds_after_finished
    assert spec["activeDeadlineSeconds"] == s.job.active_deadline_seconds > 0
    from components.workloads.training.run_spec import backoff_limit

    assert spec["backoffLimit"] == backoff_limit(s, resolve_layout(s))
    assert spec["preRunningDeadlineSeconds"] > 0  # derived from the modelled wait (test_pre_running_deadline.py)
    assert spec["submissionMode"] == s.job.submission_mode
    assert spec["rayClusterSpec"]["rayVersion"] == s.versions.ray
    assert "deletionStrategy" not in spec  # exclusive with shutdownAfterJobFinishes


# --------------------------------------------------------------------------------------------- cluster shape
def test_a_single_node_trains_on_a_gpu_head_with_no_worker_group():
    s, manifest = build("dev")
    cluster = manifest["spec"]["rayClusterSpec"]
    assert s.gpu_pool.nodes == 1
    assert "workerGroupSpecs" not in cluster
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "8"


def test_multinode_uses_a_gpu_head_plus_pinned_gpu_workers_for_the_other_nodes():
    s, manifest = build("multinode")
    cluster = manifest["spec"]["rayClusterSpec"]
    (group,) = cluster["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == s.gpu_pool.nodes - 1
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == str(s.gpu_pool.gpus_per_node)
    assert group["rayStartParams"]["num-gpus"] == str(s.gpu_pool.gpus_per_node)
    assert overrides_of(manifest)["trainer.nnodes"] == str(s.gpu_pool.nodes)


def test_every_gpu_pod_takes_a_whole_node_with_three_ray_cpus_per_gpu(stack_name):
    s, manifest = build(stack_name)
    L = resolve_layout(s)
    assert L.ray_cpus_per_gpu_pod >= 3 * L.gpus_per_node
    cluster = manifest["spec"]["rayClusterSpec"]
    groups = [("head", cluster["headGroupSpec"])] + [("worker", g) for g in cluster.get("workerGroupSpecs", [])]
    for role, group in groups:
        cpus, memory = ((L.head_ray_cpus, L.head_memory_gib) if role == "head"
                        else (L.ray_cpus_per_gpu_pod, L.memory_gib_per_gpu_pod))
        params = group["rayStartParams"]
        assert all(isinstance(v, str) for v in params.values())
        assert params["num-cpus"] == str(cpus)
        assert "resources" not in group and "resources" not in params  # KubeRay: not with num-cpus
        container, *others = group["template"]["spec"]["containers"]
        assert [c["name"] for c in others] == (["model-prefetch"] if L.model_copy_gib else [])
        res = container["resources"]
        assert res["requests"] == res["limits"]  # the Ray container never bursts into the node daemons' share
        assert res["limits"][GPU_RESOURCE] == str(L.gpus_per_node)
        assert res["limits"]["cpu"] == str(cpus)
        assert res["limits"]["memory"] == f"{memory}Gi"


def test_the_head_pod_with_kuberays_submitter_sidecar_fits_the_node_like_a_worker(stack_name):
    # KubeRay v1.7.0 GetDefaultSubmitterContainer: limits 1 CPU / 1Gi, appended to the head in SidecarMode.
    s, manifest = build(stack_name)
    L = resolve_layout(s)
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    cpu, memory = int(head["resources"]["limits"]["cpu"]), int(head["resources"]["limits"]["memory"][:-2])
    sidecar = (1, 1) if s.job.submission_mode == "SidecarMode" else (0, 0)
    assert cpu + sidecar[0] <= L.ray_cpus_per_gpu_pod, stack_name
    assert memory + sidecar[1] <= L.memory_gib_per_gpu_pod, stack_name
    assert (cpu + sidecar[0], memory + sidecar[1]) == (L.ray_cpus_per_gpu_pod, L.memory_gib_per_gpu_pod)


def test_the_tutorials_100_cpu_head_is_lowered_beside_the_submitter_and_the_model_prefetch():
    s, manifest = build("dev")
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert s.gpu_pool.cpus_per_node == 104 and s.job.submission_mode == "SidecarMode"
    # 104 less 4 for the node's daemons, 1 for the model prefetch and 1 for KubeRay's submitter.
    assert head["rayStartParams"]["num-cpus"] == "98"
    assert head["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "98"
    _, k8s_mode = build("dev", {"job": {"submission_mode": "K8sJobMode"}})
    assert k8s_mode["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "99"
    _, neither = build("dev", {"job": {"submission_mode": "K8sJobMode", "model_prefetch": False}})
    assert neither["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "100"


def test_gpu_pods_land_on_the_gpu_pool_and_tolerate_its_taints(stack_name):
    s, manifest = build(stack_name)
    sched = gpu_scheduling(s)
    for template in pod_templates(manifest):
        spec = template["spec"]
        assert spec["nodeSelector"] == sched.node_selector
        assert spec["tolerations"] == sched.tolerations
        assert spec["serviceAccountName"] == TRAINING_SERVICE_ACCOUNT


def test_every_pod_mounts_shm_the_three_volumes_and_the_configs(stack_name):
    s, manifest = build(stack_name)
    for template in pod_templates(manifest):
        spec = template["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert volumes["dshm"]["emptyDir"]["medium"] == "Memory" and mounts["dshm"]["mountPath"] == "/dev/shm"
        assert volumes["datasets"]["persistentVolumeClaim"] == {"claimName": f"{s.name}-datasets", "readOnly": True}
        assert volumes["models"]["persistentVolumeClaim"] == {"claimName": f"{s.name}-models", "readOnly": True}
        assert volumes["checkpoints"]["persistentVolumeClaim"] == {"claimName": f"{s.name}-checkpoints",
                                                                   "readOnly": False}
        assert mounts["datasets"]["readOnly"] and mounts["models"]["readOnly"] and not mounts["checkpoints"]["readOnly"]
        assert volumes["verl-config"]["configMap"]["name"] == f"{s.job.name}-config"
        assert volumes["mcp-servers"]["secret"]["secretName"] == f"{s.job.name}-mcp"
        assert volumes["mcp-servers"]["secret"]["defaultMode"] == 0o440


def test_the_sandbox_secret_is_not_mounted_when_sandboxes_are_off():
    _, manifest = build("existing-ecs", {"sandbox": {"enabled": False}})
    for template in pod_templates(manifest):
        assert "mcp-servers" not in {v["name"] for v in template["spec"]["volumes"]}


def test_pod_env_points_at_tracking_and_the_tool_module_and_carries_no_secret(stack_name):
    s, manifest = build(stack_name)
    for template in pod_templates(manifest):
        env = template["spec"]["containers"][0]["env"]
        values = {e["name"]: e["value"] for e in env}
        assert values["MLFLOW_TRACKING_URI"] == f"http://mlflow.{s.job.namespace}.svc.cluster.local:5000"
        assert "PYTHONPATH" not in values  # it would replace the image's own; the runtime env extends it instead
        assert values["NCCL_DEBUG"] == "WARN"
        assert not [e for e in env if "valueFrom" in e]  # no token is needed: model and data come from OSS
        assert not re.search(r"(?i)token|secret|api.?key|password", " ".join(values))


def test_job_env_and_rdma_resources_reach_every_gpu_pod():
    _, manifest = build("multinode", {"job": {"env": {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"},
                                              "gpu_pod_resources": {"rdma/hca": "1"}}})
    for template in pod_templates(manifest):
        container = template["spec"]["containers"][0]
        values = {e["name"]: e["value"] for e in container["env"]}
        assert values["NCCL_DEBUG"] == "INFO" and values["NCCL_SOCKET_IFNAME"] == "eth0"
        assert container["resources"]["limits"]["rdma/hca"] == "1"


def test_multinode_lingjun_pods_request_rdma_and_get_the_capabilities_rdma_needs():
    _, manifest = build("multinode")
    assert len(pod_templates(manifest)) == 2, "a GPU head that trains plus the worker group"
    for template in pod_templates(manifest):
        container = template["spec"]["containers"][0]
        assert RDMA_RESOURCE == "rdma/hca"
        assert container["resources"]["requests"]["rdma/hca"] == container["resources"]["limits"]["rdma/hca"] == "1"
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK", "SYS_RESOURCE"]
        assert {v["name"]: v for v in template["spec"]["volumes"]}["dshm"]["emptyDir"]["medium"] == "Memory"
    assert crd_errors(manifest) == []


@pytest.mark.parametrize("stack,overrides", [
    ("dev", None),  # Lingjun, one node: no traffic between nodes
    ("existing-ecs", None),  # ECS GPU nodes have no RDMA NICs
])
def test_single_node_or_ecs_pods_request_no_rdma_and_add_no_capabilities(stack, overrides):
    _, manifest = build(stack, overrides)
    for template in pod_templates(manifest):
        container = template["spec"]["containers"][0]
        assert RDMA_RESOURCE not in container["resources"]["limits"]
        assert "add" not in container["securityContext"].get("capabilities", {})


def test_shm_defaults_to_a_quarter_of_the_pod_capped_at_64_gib():
    # existing-ecs: 60 GiB less 16 for the node's daemons and 4 for the model prefetch (3 GiB copy + 1) = 40 GiB.
    for stack, expected in (("dev", "64Gi"), ("existing-ecs", "10Gi")):
        _, manifest = build(stack)
        dshm = next(v for v in pod_templates(manifest)[0]["spec"]["volumes"] if v["name"] == "dshm")
        assert dshm["emptyDir"]["sizeLimit"] == expected, stack


def test_shm_larger_than_the_pod_memory_is_refused_at_preview_as_a_settings_problem():
    with pytest.raises(SettingsError, match=r"job.shm_gib 60: /dev/shm is memory-backed"):
        build("existing-ecs", {"job": {"shm_gib": 60}})


def test_the_official_image_installs_the_pinned_packages_at_start_and_a_built_image_does_not():
    s, manifest = build("dev", OFFICIAL_IMAGE)
    assert manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == \
        s.versions.verl_image_ref()
    runtime_env = yaml.safe_load(manifest["spec"]["runtimeEnvYAML"])
    assert runtime_env["pip"] == [f"verl=={s.versions.verl}", f"transformers=={s.versions.transformers}",
                                  f"mlflow=={s.versions.mlflow}", f"fastmcp=={s.versions.fastmcp}",
                                  f"mcp=={s.versions.mcp}"]
    built = settings_for("dev", {"image": {"source": "built", "tag": "abc123"}})
    assert "pip" not in yaml.safe_load(runtime_env_yaml(built))
    _, built_manifest = build("dev", {"image": {"source": "built", "tag": "abc123"}})
    assert "pip" not in yaml.safe_load(built_manifest["spec"]["runtimeEnvYAML"])
    image = built_manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":abc123")


def test_an_engine_the_image_does_not_ship_is_refused_at_preview_as_a_settings_problem():
    with pytest.raises(SettingsError, match=r"rollout_engine sglang does not run on versions.verl_image "
                                            r"verlai/verl:vllm024\.dev2"):
        build("dev", {"training": {"rollout_engine": "sglang"}, **OFFICIAL_IMAGE})
    _, manifest = build("dev", {"training": {"rollout_engine": "sglang"},
                                "versions": {"verl_image": "verlai/verl:sgl0512.latest", "verl_image_digest": None}})
    assert overrides_of(manifest)["actor_rollout_ref.rollout.name"] == "sglang"


def test_the_tool_module_is_put_in_front_of_the_images_pythonpath_for_every_ray_process(stack_name, monkeypatch):
    _, manifest = build(stack_name)
    env_vars = yaml.safe_load(manifest["spec"]["runtimeEnvYAML"])["env_vars"]
    assert env_vars == {"PYTHONPATH": "/etc/verl-ack/config:${PYTHONPATH}"}
    # Ray expands runtime_env env_vars with os.path.expandvars against the worker's environment.
    monkeypatch.setenv("PYTHONPATH", "/image/path")
    assert os.path.expandvars(env_vars["PYTHONPATH"]) == "/etc/verl-ack/config:/image/path"


def test_the_default_image_carries_the_vllm_release_verl_pins():
    """verl 0.9.1's [vllm] extra pins the vLLM it was built against; the default verlai/verl:vllmNNN image must
    carry that vLLM (the tutorial's vllm012 image cannot run verl 0.9)."""
    s = settings_for("dev")
    metadata = (SITE / f"verl-{s.versions.verl}.dist-info" / "METADATA").read_text()
    pin = re.search(r'^Requires-Dist: vllm==(\d+)\.(\d+)\.\d+; extra == "vllm"$', metadata, re.M)
    assert pin, "verl's METADATA no longer pins vllm in its [vllm] extra"
    tag = re.fullmatch(r"verlai/verl:vllm(\d)(\d+)\.\w+", s.versions.verl_image)
    assert tag, s.versions.verl_image
    assert (tag.group(1), tag.group(2)) == (pin.group(1), pin.group(2).zfill(2)), \
        f"{s.versions.verl_image} does not carry vLLM {pin.group(1)}.{pin.group(2)}"


# --------------------------------------------------------------------------------------------- controller rules
def _refused(manifest: dict, match: str, kuberay: str = "1.7.0", claim: str = "verl-dev-checkpoints") -> None:
    with pytest.raises(RayJobError, match=match):
        check_rayjob(manifest, kuberay, checkpoint_claim=claim)


def test_a_rayjob_name_kuberay_would_reject_is_refused():
    _, manifest = build("dev")
    manifest["metadata"]["name"] = "v" * 48
    _refused(manifest, r"metadata.name .*at most 47")
    manifest["metadata"]["name"] = "9-starts-with-digit"
    _refused(manifest, r"DNS-1035")


def test_the_settings_refuse_a_bad_job_name_before_any_manifest_exists():
    with pytest.raises(SettingsError, match=r"job.name"):
        settings_for("dev", {"job": {"name": "Verl_GRPO"}})


def test_ttl_without_shutdown_is_refused():
    _, manifest = build("dev")
    manifest["spec"]["shutdownAfterJobFinishes"] = False
    _refused(manifest, r"ttlSecondsAfterFinished > 0 needs spec.shutdownAfterJobFinishes")


def test_sidecar_mode_is_refused_for_a_kuberay_that_lacks_it():
    _, manifest = build("dev")
    assert manifest["spec"]["submissionMode"] == "SidecarMode"
    _refused(manifest, r"SidecarMode needs KubeRay >= 1.5.0 but versions.kuberay is 1.4.0", kuberay="1.4.0")
    with pytest.raises(SettingsError, match=r"SidecarMode needs KubeRay >= 1.5.0"):
        settings_for("dev", {"versions": {"kuberay": "1.4.0"}, "job": {"pre_running_deadline_seconds": None}})


def test_a_rayjob_without_token_authentication_is_refused():
    _, manifest = build("dev")
    del manifest["spec"]["rayClusterSpec"]["authOptions"]
    _refused(manifest, r"authOptions.mode must be token")
    _, manifest = build("dev")
    manifest["spec"]["rayClusterSpec"]["authOptions"]["mode"] = "disabled"
    _refused(manifest, r"authOptions.mode must be token")


def test_token_authentication_is_refused_below_kuberay_1_5_1_and_ray_2_52():
    _, manifest = build("dev", {"job": {"submission_mode": "K8sJobMode"}})
    manifest["spec"].pop("preRunningDeadlineSeconds", None)  # a KubeRay 1.6 field, refused first
    _refused(manifest, r"authOptions needs KubeRay >= 1.5.1 but versions.kuberay is 1.5.0", kuberay="1.5.0")
    manifest["spec"]["rayClusterSpec"]["rayVersion"] = "2.51.1"
    _refused(manifest, r"needs Ray >= 2.52.0 .*versions.ray is 2.51.1")
    with pytest.raises(SettingsError, match=r"versions.ray 2.51.1: every RayJob sets authOptions.mode token"):
        settings_for("dev", {"versions": {"ray": "2.51.1"}})
    with pytest.raises(SettingsError, match=r"versions.kuberay 1.5.0: every RayJob sets authOptions.mode token"):
        settings_for("dev", {"versions": {"kuberay": "1.5.0"}, "job": {"pre_running_deadline_seconds": None}})


def test_the_rayjob_names_no_token_secret_so_kuberay_makes_one_no_one_else_knows(stack_name):
    _, manifest = build(stack_name)
    assert manifest["spec"]["rayClusterSpec"]["authOptions"] == {"mode": "token"}
    text = yaml.safe_dump(manifest)
    assert "RAY_AUTH_TOKEN" not in text and "auth_token" not in text, "KubeRay injects the token from its Secret"


def test_pre_running_deadline_is_refused_before_kuberay_1_6():
    _, manifest = build("dev", {"job": {"submission_mode": "K8sJobMode"}})
    _refused(manifest, r"preRunningDeadlineSeconds needs KubeRay >= 1.6.0", kuberay="1.5.1")


def test_sidecar_mode_refuses_a_restarting_head_and_a_submitter_config():
    _, manifest = build("dev")
    manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["restartPolicy"] = "Always"
    _refused(manifest, r"restartPolicy 'Always': SidecarMode needs Never or unset")
    _, manifest = build("dev")
    manifest["spec"]["submitterConfig"] = {"backoffLimit": 1}
    _refused(manifest, r"submitterConfig cannot be combined with submissionMode SidecarMode")


def test_interactive_mode_refuses_retries():
    _, manifest = build("dev", {"job": {"submission_mode": "InteractiveMode", "backoff_limit": 1}})
    _refused(manifest, r"backoffLimit > 0 is not allowed with InteractiveMode")


def test_worker_replicas_outside_min_and_max_are_refused():
    s, manifest = build("multinode")
    group = manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["minReplicas"] = 3
    _refused(manifest, r"minReplicas 3 must be <= maxReplicas 1", claim=checkpoint_claim(s))
    group["minReplicas"], group["replicas"] = 0, 2
    _refused(manifest, r"replicas 2 must lie between", claim=checkpoint_claim(s))
    del group["maxReplicas"]
    _refused(manifest, r"minReplicas and maxReplicas must both be set", claim=checkpoint_claim(s))


def test_a_template_without_containers_is_refused():
    s, manifest = build("multinode")
    manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"] = []
    _refused(manifest, r"workerGroupSpecs\[0\].template needs at least one container", claim=checkpoint_claim(s))


def test_ray_start_params_conflicting_with_group_resources_are_refused():
    _, manifest = build("dev")
    manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["resources"] = {"CPU": "8"}
    _refused(manifest, r"cannot be combined with the group's `resources`")


def test_runtime_env_yaml_that_does_not_parse_is_refused():
    _, manifest = build("dev")
    manifest["spec"]["runtimeEnvYAML"] = "pip: [verl==0.9.1\n  - : :"
    _refused(manifest, r"runtimeEnvYAML is not valid YAML")


def test_non_positive_deadlines_are_refused():
    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        _, manifest = build("dev")
        manifest["spec"][key] = 0
        _refused(manifest, rf"spec.{key} 0 must be > 0")


def test_a_checkpoint_path_off_the_shared_volume_is_refused():
    _, manifest = build("dev")
    entry = manifest["spec"]["entrypoint"]
    for bad, match in (("/tmp/ckpt", r"not on the shared checkpoint volume"),
                       ("checkpoints/x", r"absolute, normalised"),
                       ("/mnt/oss/checkpoints/../models/x", r"absolute, normalised"),
                       ("/mnt/oss/models/x", r"not on the shared checkpoint volume")):
        manifest["spec"]["entrypoint"] = re.sub(r"trainer\.default_local_dir=\S+", f"trainer.default_local_dir={bad}",
                                                entry)
        _refused(manifest, match)
    manifest["spec"]["entrypoint"] = re.sub(r" trainer\.default_local_dir=\S+", "", entry)
    _refused(manifest, r"trainer.default_local_dir is missing")


def test_a_read_only_checkpoint_mount_is_refused():
    _, manifest = build("dev")
    for m in manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["volumeMounts"]:
        if m["name"] == "checkpoints":
            m["readOnly"] = True
    _refused(manifest, r"not on the shared checkpoint volume")


def test_a_layout_verl_would_reject_is_refused_by_the_settings_and_by_the_builder():
    bad = {"model": {"preset": "qwen2.5-7b-instruct", "rollout_tp": 8}}  # 28 heads / 4 KV heads: TP 8 is invalid
    with pytest.raises(SettingsError, match=r"model.rollout_tp"):
        settings_for("multinode", bad)
    s = Settings.model_validate(stack_settings("multinode", bad))  # skips the layout rules on purpose
    wiring = pod_wiring(s, namespace=s.job.namespace, service_account=TRAINING_SERVICE_ACCOUNT)
    with pytest.raises(RayJobError, match=r"model.rollout_tp"):
        rayjob_manifest(s, resolve_layout(s), gpu_scheduling(s), wiring)


# --------------------------------------------------------------------------------------------- snapshots
def test_dev_entrypoint_matches_itsassert_text_snapshot():
    _, manifest = build("dev")
    # One override per line, then each command after verl (the tool runs' close-up) on a line of its own.
    verl, *after = manifest["spec"]["entrypoint"].split(" ';' ")
    words = verl.split(" ")
    assert_text_snapshot("dev.entrypoint.txt", " \\\n  ".join([" ".join(words[:3]), *words[3:],
                                                                *(f"';' {a}" for a in after)]) + "\n")


def test_dev_rayjob_manifest_matches_itsassert_text_snapshot():
    _, manifest = build("dev")
    assert_text_snapshot("dev.rayjob.yaml", yaml.safe_dump(manifest, sort_keys=False, width=120))


@pytest.mark.parametrize("stack", STACKS)
def test_every_recorded_rayjob_of_every_stack_authenticates_with_a_token_and_fits_the_crd(stack):
    """Over what the program hands the engine (experiments and every sweep variant included), not the builder."""
    for job in record(stack).by_type("kubernetes:ray.io/v1:RayJob"):
        manifest = {k: job.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert manifest["spec"]["rayClusterSpec"]["authOptions"] == {"mode": "token"}, job.urn
        assert crd_errors(manifest) == [], job.urn


def _token_literals(value, where: str = "") -> list[str]:
    """Where a rendered value could carry a Ray token: an env var RAY_AUTH_TOKEN with a literal value, or an
    `auth_token` key (KubeRay's Secret key) with one, anywhere (pod env, ConfigMaps, Secrets, chart values)."""
    out: list[str] = []
    if isinstance(value, dict):
        if value.get("name") == "RAY_AUTH_TOKEN" and "value" in value:
            out.append(f"{where}: env RAY_AUTH_TOKEN")
        if "auth_token" in value:
            out.append(f"{where}.auth_token")
        for k, v in value.items():
            out += _token_literals(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _token_literals(v, f"{where}[{i}]")
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_no_ray_token_is_rendered_anywhere_in_any_stack(stack):
    """The token lives in KubeRay's Secret only: no resource input and no stack output carries one."""
    rec = record(stack)
    for r in rec.resources:
        assert _token_literals(r.inputs) == [], r.urn
    assert _token_literals(rec.outputs) == []
    if "ray_auth_env" in rec.outputs:  # the command reads the Secret at run time
        assert 'RAY_AUTH_TOKEN="$(' in rec.outputs["ray_auth_env"]
    assert _token_literals({"env": [{"name": "RAY_AUTH_TOKEN", "value": "x"}]}) == [".env[0]: env RAY_AUTH_TOKEN"]


def test_the_entrypoints_node_wait_names_the_worker_group_the_rayjob_renders():
    from components.workloads.training.rayjob import WORKER_GROUP
    from components.workloads.training.runs import RAY_WORKER_GROUP, node_wait_seconds

    assert RAY_WORKER_GROUP == WORKER_GROUP
    s, manifest = build("multinode")
    assert manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] == RAY_WORKER_GROUP
    words = manifest["spec"]["entrypoint"].split()
    # Bounded by the pre-running deadline KubeRay enforces on the same Ray cluster.
    assert f"--node-wait-seconds={manifest['spec']['preRunningDeadlineSeconds']}" in words
    assert node_wait_seconds(s) == manifest["spec"]["preRunningDeadlineSeconds"]


def test_the_multinode_run_retries_a_lost_node_and_a_single_node_or_an_evaluation_does_not(stack_name):
    from components.workloads.training.run_spec import backoff_limit

    s, manifest = build(stack_name)
    L = resolve_layout(s)
    t = s.training
    midway = t.save_freq > 0 and (t.total_training_steps is None or t.total_training_steps > t.save_freq)
    assert manifest["spec"]["backoffLimit"] == (1 if L.nodes > 1 and midway and s.job.backoff_limit is None
                                                else (s.job.backoff_limit or 0))
    if stack_name == "multinode":
        assert manifest["spec"]["backoffLimit"] >= 1
        # ...resuming from the run's newest checkpoint: resume_mode auto on its own folder.
        assert "trainer.resume_mode=resume_path" not in manifest["spec"]["entrypoint"]
        evaluation = settings_for("multinode", {"training": {"val_only": True}})
        assert backoff_limit(evaluation, resolve_layout(evaluation)) == 0
        off = settings_for("multinode", {"job": {"backoff_limit": 0}})
        assert backoff_limit(off, resolve_layout(off)) == 0
