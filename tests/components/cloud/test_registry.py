"""Which image the training job runs, where a built image lives, and the GPU-node pre-pull."""

from components.cloud.registry import image_tag, registry_repository, runtime_pip_packages, training_image
from components.config import Settings
from components.wiring import gpu_scheduling
from components.workloads.prepull import prepull_daemonset
from tests.conftest import OFFICIAL_IMAGE as OFFICIAL
from tests.conftest import deep_merge, stack_settings


def settings(overrides=None, stack="dev") -> Settings:
    return Settings.model_validate(deep_merge(stack_settings(stack, OFFICIAL), overrides or {}))


def official(overrides: dict | None = None) -> dict:
    """Overrides of the dev stack with the image section removed first (record() merges one dict)."""
    return deep_merge(OFFICIAL, overrides or {})


def test_official_image_installs_the_pinned_verl_mlflow_and_fastmcp_at_start():
    s = settings()
    assert training_image(s) == s.versions.verl_image_ref()
    assert runtime_pip_packages(s) == [f"verl=={s.versions.verl}", f"transformers=={s.versions.transformers}",
                                       f"mlflow=={s.versions.mlflow}", f"fastmcp=={s.versions.fastmcp}",
                                  f"mcp=={s.versions.mcp}"]


def test_built_image_comes_from_the_acr_vpc_endpoint_tagged_by_content_hash_with_no_runtime_install():
    s = settings({"image": {"source": "built"}})
    assert training_image(s) == f"registry-vpc.ap-southeast-1.aliyuncs.com/verl-ack/verl:{image_tag(s)}"
    assert runtime_pip_packages(s) == []


def test_built_image_tag_follows_the_image_folder(tmp_path):
    s = settings({"image": {"source": "built"}})
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    first = image_tag(s, tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM y\n")
    assert image_tag(s, tmp_path) != first


def test_an_explicit_tag_and_an_existing_repository_win():
    s = settings({"image": {"source": "built", "registry": "existing", "tag": "v1",
                            "existing_repository": "registry.cn-hangzhou.aliyuncs.com/team/verl"}})
    assert registry_repository(s) == "registry.cn-hangzhou.aliyuncs.com/team/verl"
    assert training_image(s) == "registry.cn-hangzhou.aliyuncs.com/team/verl:v1"


def test_prepull_runs_only_on_gpu_nodes_pulls_the_training_image_and_then_idles():
    s = settings()
    sched = gpu_scheduling(s)
    ds = prepull_daemonset(s, "img:1", sched, "verl")
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == sched.node_selector and spec["tolerations"] == sched.tolerations
    assert spec["initContainers"][0]["image"] == "img:1"
    assert spec["initContainers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["containers"][0]["image"] == s.image.pause_image
    assert spec["automountServiceAccountToken"] is False
    assert ds["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_official_image_stacks_declare_no_registry():
    from tests.conftest import record

    rec = record("dev", OFFICIAL)
    assert [r for r in rec.resources if r.type.startswith("alicloud:cr/")] == []
    assert rec.outputs["training_image"] == settings().versions.verl_image_ref()


def test_a_built_image_gets_a_private_acr_repository_and_the_credential_helper():
    from tests.conftest import record

    enterprise = {"source": "built", "tag": "abc123", "registry": "enterprise", "enterprise_instance_id": "cri-abc",
                  "registry_host": "inst-registry-vpc.ap-southeast-1.cr.aliyuncs.com"}
    rec = record("dev", official({"image": enterprise}))
    ns = rec.get("alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace", "image-namespace")
    repo = rec.get("alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo", "image-repo")
    assert ns.inputs["defaultVisibility"] == "PRIVATE" and ns.inputs["autoCreate"] is False
    assert repo.inputs["repoType"] == "PRIVATE" and repo.inputs["name"] == "verl"
    assert repo.inputs["tagImmutability"] is True
    helper = rec.get("alicloud:cs/kubernetesAddon:KubernetesAddon", "image-acr-credential-helper")
    assert helper.inputs["name"] == "managed-aliyun-acr-credential-helper"
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert helper.urn in job.dependencies  # nodes can pull the private image before the job starts
    assert rec.outputs["training_image"].endswith("/verl-ack/verl:abc123")


def test_the_prepull_daemonset_pulls_the_image_the_rayjob_runs():
    from tests.conftest import record

    rec = record("dev", official({"image": {"source": "built", "tag": "abc123"}}))
    ds = rec.get("kubernetes:apps/v1:DaemonSet", "prepull-daemonset")
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    head = job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["image"] == head["image"]
    assert head["imagePullPolicy"] == "IfNotPresent"
    off = record("dev", official({"image": {"prepull": False}}))
    assert [r for r in off.by_type("kubernetes:apps/v1:DaemonSet") if "prepull" in r.name] == []


def test_the_official_image_is_pulled_by_tag_and_digest_by_the_rayjob_and_the_prepull_alike():
    from tests.conftest import record

    v = settings().versions
    ref = "verlai/verl:vllm024.dev2@sha256:b867883b0dd011363e69ab2ab344922a28c5bd0409e2a324e3ee70fb27ca7543"
    assert v.verl_image_ref() == ref
    for stack in ("dev", "multinode"):
        rec = record(stack, OFFICIAL)  # both stacks pull a built image by default
        ds = rec.get("kubernetes:apps/v1:DaemonSet", "prepull-daemonset")
        (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
        cluster = job.inputs["spec"]["rayClusterSpec"]
        pods = [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]
        images = {c["image"] for p in pods for c in p["template"]["spec"]["containers"]}
        assert images == {ref} == {ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["image"]}, stack


def test_a_stack_without_a_digest_pulls_by_tag():
    s = settings({"versions": {"verl_image": "verlai/verl:vllm024.dev1", "verl_image_digest": None}})
    assert training_image(s) == "verlai/verl:vllm024.dev1"


def test_changing_the_image_without_its_digest_is_refused_because_the_digest_would_win():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"verl_image_digest is still the default.*or to null"):
        settings({"versions": {"verl_image": "verlai/verl:vllm024.dev1"}})
    with pytest.raises(ValidationError, match="give the digest once"):
        settings({"versions": {"verl_image": "verlai/verl:vllm024.dev2@sha256:" + "0" * 64}})


def test_the_credential_helper_takes_its_config_from_settings_and_stays_in_a_cluster_we_do_not_own():
    import json

    from tests.conftest import record

    cfg = {"watchNamespace": "verl"}
    rec = record("existing-ecs", {"image": {"source": "built", "tag": "t1", "credential_helper_config": cfg}})
    helper = rec.get("alicloud:cs/kubernetesAddon:KubernetesAddon", "image-acr-credential-helper")
    assert json.loads(helper.inputs["config"]) == cfg
    assert helper.options["retain_on_delete"] is True


def test_the_offline_plan_of_a_built_image_stack_says_nothing_is_installed_at_start(tmp_path):
    import yaml

    import plan
    from components.config import STACKS_DIR

    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"]["verl-ack:settings"]["image"] = {"source": "built", "tag": "abc123"}
    path = tmp_path / "Pulumi.built.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "nothing (built image)" in md and "/verl-ack/verl:abc123" in md


def test_the_plan_warns_how_to_verify_ray_until_the_stack_sets_versions_ray():
    from tests.conftest import record

    warned = [m for _, m in record("dev", OFFICIAL).logs if m.startswith("versions.ray:")]
    assert len(warned) == 1 and "unverified" in warned[0]
    assert "docker run --rm verlai/verl:vllm024.dev2@sha256:" in warned[0]
    assert "python3 -c 'import ray; print(ray.__version__)'" in warned[0]
    logs = record("dev", official({"versions": {"ray": "2.55.1"}})).logs
    assert not [m for _, m in logs if m.startswith("versions.ray:")]


def test_the_credential_helper_config_is_derived_for_the_job_namespace_and_the_pulling_service_accounts():
    import json

    from components.cloud.registry import credential_helper_config
    from components.wiring import PREPULL_SERVICE_ACCOUNT, TRAINING_SERVICE_ACCOUNT
    from tests.conftest import record

    # The mirrored sandbox image adds the sandbox namespace (tests/components/workloads/test_sandbox_image.py).
    rec = record("dev", official({"image": {"source": "built", "tag": "abc123"}, "sandbox": {"image_mirror": False}}))
    helper = rec.get("alicloud:cs/kubernetesAddon:KubernetesAddon", "image-acr-credential-helper")
    expected = {"AcrInstanceInfo": [{"instanceId": "", "regionId": "ap-southeast-1"}], "enableRRSA": False,
                "expiringThreshold": "15m", "serviceAccount": "verl-train,default", "watchNamespace": "verl"}
    assert json.loads(helper.inputs["config"]) == expected
    assert (TRAINING_SERVICE_ACCOUNT, PREPULL_SERVICE_ACCOUNT) == ("verl-train", "default")
    # The service accounts named are the ones the pods that pull the image run as.
    ds = rec.get("kubernetes:apps/v1:DaemonSet", "prepull-daemonset")
    assert ds.inputs["spec"]["template"]["spec"]["serviceAccountName"] == PREPULL_SERVICE_ACCOUNT
    assert ds.inputs["metadata"]["namespace"] == expected["watchNamespace"]
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] == \
        TRAINING_SERVICE_ACCOUNT
    assert job.inputs["metadata"]["namespace"] == expected["watchNamespace"]
    # Enterprise: the instance id, and the region the registry host names.
    ent = settings({"image": {"source": "built", "registry": "enterprise", "enterprise_instance_id": "cri-abc",
                              "registry_host": "inst-registry-vpc.cn-beijing.cr.aliyuncs.com"},
                    "job": {"namespace": "team-a"}, "sandbox": {"image_mirror": False}})
    cfg = credential_helper_config(ent)
    assert cfg["AcrInstanceInfo"] == [{"instanceId": "cri-abc", "regionId": "cn-beijing"}]
    assert cfg["watchNamespace"] == "team-a"


def test_with_rdma_the_credential_helper_also_watches_the_ray_pods_namespace_where_the_rayjob_pulls():
    from components.cloud.registry import credential_helper_config
    from tests.conftest import record

    rec = record("multinode")
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    ds = rec.get("kubernetes:apps/v1:DaemonSet", "prepull-daemonset")
    watched = credential_helper_config(settings(stack="multinode"))["watchNamespace"].split(",")
    assert watched == [ds.inputs["metadata"]["namespace"], job.inputs["metadata"]["namespace"]] == ["verl", "verl-ray"]


def test_a_platform_stacks_credential_helper_watches_every_namespace_for_its_experiments():
    from components.cloud.registry import credential_helper_config

    cfg = credential_helper_config(settings(stack="dev-platform"))
    assert cfg["watchNamespace"] == "all" and cfg["serviceAccount"] == "verl-train,default"


def test_a_stacks_own_credential_helper_config_replaces_the_derived_one():
    from components.cloud.registry import credential_helper_config

    cfg = {"watchNamespace": "all", "serviceAccount": "*"}
    assert credential_helper_config(settings({"image": {"source": "built", "credential_helper_config": cfg}})) == cfg


def test_a_personal_registry_with_the_credential_helper_warns_about_the_2024_09_08_cutoff():
    from tests.conftest import record

    def warned(rec):
        return [m for _, m in rec.logs if m.startswith("image.registry:")]

    helper, by_hand = warned(record("dev", official({"image": {"source": "built", "tag": "abc123"}})))
    assert "created on or before 2024-09-08" in helper and "registry: enterprise" in helper
    assert "create once in the ACR console" in by_hand
    assert warned(record("dev", OFFICIAL)) == [], "the official image needs no credential helper"
    no_helper = official({"image": {"source": "built", "tag": "t", "credential_helper": False}})
    assert [m for m in warned(record("dev", no_helper))
            if "2024-09-08" in m] == []
    enterprise = {"source": "built", "tag": "t", "registry": "enterprise", "enterprise_instance_id": "cri-abc",
                  "registry_host": "inst-registry-vpc.ap-southeast-1.cr.aliyuncs.com"}
    assert warned(record("dev", official({"image": enterprise}))) == []


def test_a_personal_registry_is_used_not_created_because_the_bridged_provider_cannot_create_one():
    # cr.Namespace/cr.Repo drive ACR's retired 2016-06-07 Personal API (provider v2 changelog, docs/facts-provider.md):
    # the stack names the repository the user made in the console and declares no cr resource.
    from tests.conftest import record

    rec = record("dev", official({"image": {"source": "built", "tag": "t1"}}))
    assert [r for r in rec.resources if r.type.startswith("alicloud:cr/")] == []
    assert rec.outputs["training_image"] == "registry-vpc.ap-southeast-1.aliyuncs.com/verl-ack/verl:t1"
