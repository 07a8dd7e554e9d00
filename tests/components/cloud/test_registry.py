"""Which image the training job runs, where a built image lives, and the GPU-node pre-pull."""

from components.cloud.registry import image_tag, registry_repository, runtime_pip_packages, training_image
from components.config import Settings
from components.wiring import gpu_scheduling
from components.workloads.prepull import prepull_daemonset
from tests.conftest import stack_settings


def settings(overrides=None, stack="dev") -> Settings:
    return Settings.model_validate(stack_settings(stack, overrides))


def test_official_image_installs_the_pinned_verl_mlflow_and_fastmcp_at_start():
    s = settings()
    assert training_image(s) == s.versions.verl_image
    assert runtime_pip_packages(s) == [f"verl=={s.versions.verl}", f"transformers=={s.versions.transformers}",
                                       f"mlflow=={s.versions.mlflow}", f"fastmcp=={s.versions.fastmcp}"]


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

    rec = record("dev")
    assert [r for r in rec.resources if r.type.startswith("alicloud:cr/")] == []
    assert rec.outputs["training_image"] == settings().versions.verl_image


def test_a_built_image_gets_a_private_acr_repository_and_the_credential_helper():
    from tests.conftest import record

    rec = record("dev", {"image": {"source": "built", "tag": "abc123"}})
    ns = rec.get("alicloud:cr/namespace:Namespace", "image-namespace")
    repo = rec.get("alicloud:cr/repo:Repo", "image-repo")
    assert ns.inputs["defaultVisibility"] == "PRIVATE" and ns.inputs["autoCreate"] is False
    assert repo.inputs["repoType"] == "PRIVATE" and repo.inputs["name"] == "verl"
    helper = rec.get("alicloud:cs/kubernetesAddon:KubernetesAddon", "image-acr-credential-helper")
    assert helper.inputs["name"] == "managed-aliyun-acr-credential-helper"
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert helper.urn in job.dependencies  # nodes can pull the private image before the job starts
    assert rec.outputs["training_image"].endswith("/verl-ack/verl:abc123")


def test_the_prepull_daemonset_pulls_the_image_the_rayjob_runs():
    from tests.conftest import record

    rec = record("dev", {"image": {"source": "built", "tag": "abc123"}})
    ds = rec.get("kubernetes:apps/v1:DaemonSet", "prepull-daemonset")
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    head = job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["image"] == head["image"]
    assert head["imagePullPolicy"] == "IfNotPresent"
    off = record("dev", {"image": {"prepull": False}})
    assert off.by_type("kubernetes:apps/v1:DaemonSet") == []


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
