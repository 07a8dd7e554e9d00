"""Platform and experiment stacks (docs/stacks.md): the platform builds everything long-lived and exports
`PlatformRefs`; an experiment builds only what one run needs and reads every platform value through a
StackReference. These tests run the real program on stacks/Pulumi.dev-platform.yaml and Pulumi.dev-grpo.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import plan
from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR
from components.model import parse_settings
from components.wiring import GPU_TAINT_KEY, LINGJUN_TAINT_KEY, POOL_LABEL, PlatformRefs
from offline import plan as offline_plan
from offline.engine import STACK_REFERENCE_TYPE, StackOutputs, run_program
from offline.report.latency import RAYJOB_TYPE, critical_path, is_gpu_pool, is_prepull
from tests.conftest import REPO, SPLIT_STACKS, record, stack_settings

PLATFORM, EXPERIMENT = "dev-platform", "dev-grpo"
NODE_POOL = "alicloud:cs/nodePool:NodePool"
# What only a platform may create: the network, the cluster, add-ons, the bucket, the ALB and its certificate,
# DNS, the registry, Helm releases (KubeRay, sandbox charts) and the shared services' workloads.
PLATFORM_TYPE_PREFIXES = ("alicloud:vpc/", "alicloud:cs/managedKubernetes", "alicloud:cs/kubernetesAddon",
                          "alicloud:cs/autoscalingConfig", "alicloud:oss/", "alicloud:alb/", "alicloud:cas/",
                          "alicloud:alidns/", "alicloud:dns/", "alicloud:cr/", "alicloud:cs/registryEnterprise",
                          "alicloud:ecs/", "kubernetes:helm.sh/", "kubernetes:apps/v1:Deployment",
                          "kubernetes:apps/v1:StatefulSet")


def _custom(rec):
    return [r for r in rec.resources if r.custom]


def test_the_split_stacks_are_a_platform_and_an_experiment_on_it():
    assert sorted(SPLIT_STACKS) == sorted([PLATFORM, EXPERIMENT, "dev-sweep"])  # dev-sweep: test_sharing.py
    exp = parse_settings(stack_settings(EXPERIMENT))
    assert exp.kind == "experiment" and exp.platform_stack.endswith(f"/{PROJECT}/{PLATFORM}")
    assert parse_settings(stack_settings(PLATFORM)).kind == "platform"


def test_the_platform_creates_no_training_and_no_experiment_data():
    rec = record(PLATFORM)
    assert rec.by_type(RAYJOB_TYPE) == []
    assert rec.by_type("kubernetes:batch/v1:Job") == [], "data staging belongs to the experiment"
    roles = sorted(r.name for r in rec.by_type("alicloud:ram/role:Role"))
    assert roles == ["identity-role-csi", "identity-role-mlflow"], "the data and training roles are per experiment"


def test_a_platform_that_owns_the_lingjun_pool_keeps_it_joined_with_the_image_pre_pulled_and_exports_it():
    """dev-platform says gpu_pool.owner: platform (Lingjun bills in a pool or not): the pool and the pre-pull of the
    platform's image live here, in the platform's namespace, and the two hand-over keys name the pool."""
    rec = record(PLATFORM)
    assert sorted(r.name for r in rec.by_type(NODE_POOL)) == ["pools-gpu", "pools-sandbox", "pools-system"]
    pool = rec.get(NODE_POOL, "pools-gpu")
    assert is_gpu_pool(pool) and pool.inputs["type"] == "lingjun", pool.urn
    assert pool.parent.endswith("NodePools::pools"), pool.urn
    [prepull] = [r for r in rec.resources if is_prepull(r)]
    spec = prepull.inputs["spec"]["template"]["spec"]
    assert prepull.inputs["metadata"]["namespace"] == parse_settings(stack_settings(PLATFORM)).job.namespace
    assert spec["initContainers"][0]["image"] == rec.outputs["training_image"], "it pulls the platform's image"
    assert spec["nodeSelector"] == {POOL_LABEL: "gpu"}, prepull.urn
    assert {t["key"] for t in spec["tolerations"]} == {GPU_TAINT_KEY, LINGJUN_TAINT_KEY}, prepull.urn
    assert rec.outputs["gpu_pool_owner"] == "platform"
    assert rec.outputs["gpu_pool_id"] and rec.outputs["gpu_pool_id"] != "[unknown]"


def test_a_platform_that_leaves_the_pool_to_its_experiments_creates_no_gpu_pool_and_exports_that():
    rec = record(PLATFORM, {"gpu_pool": {"owner": "experiment"}})
    assert [r.name for r in rec.resources if is_gpu_pool(r)] == []
    assert [r.name for r in rec.resources if is_prepull(r)] == [], "GPU nodes, and their pre-pull, are the experiment's"
    assert sorted(r.name for r in rec.by_type(NODE_POOL)) == ["pools-sandbox", "pools-system"]
    assert (rec.outputs["gpu_pool_owner"], rec.outputs["gpu_pool_id"]) == ("experiment", "")


def test_the_platform_exports_every_value_an_experiment_reads_and_no_kubeconfig():
    rec = record(PLATFORM)
    missing = sorted(set(PlatformRefs.KEYS) - set(rec.outputs))
    assert not missing, f"platform outputs lack {missing}"
    assert "kubeconfig" not in rec.outputs and rec.secret_outputs == [], "a platform exports no credential"
    assert "@sha256:" in rec.outputs["training_image"], "experiments run the image pinned by digest"
    assert ".aliyuncs.com/" in rec.outputs["training_image"], "the image comes from the in-region registry"


def test_the_experiment_creates_no_platform_resource():
    rec = record(EXPERIMENT)
    owned = [f"{r.type}::{r.name}" for r in _custom(rec) if r.type.startswith(PLATFORM_TYPE_PREFIXES)]
    assert owned == [], f"an experiment must not create platform resources: {owned}"


def test_an_experiment_on_a_platform_owned_pool_creates_no_pool_and_no_pre_pull_and_schedules_on_the_platforms():
    rec = record(EXPERIMENT)
    assert rec.by_type(NODE_POOL) == [], "the GPU pool is the platform's (gpu_pool.owner: platform)"
    assert [r.name for r in rec.resources if is_prepull(r)] == [], "the platform's pre-pull already put the image there"
    [rayjob] = rec.by_type(RAYJOB_TYPE)
    pod = rayjob.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert pod["nodeSelector"] == {POOL_LABEL: "gpu"}, rayjob.urn
    assert {t["key"] for t in pod["tolerations"]} >= {GPU_TAINT_KEY, LINGJUN_TAINT_KEY}, rayjob.urn
    platform = record(PLATFORM)
    labels = {x["key"]: x["value"] for x in platform.get(NODE_POOL, "pools-gpu").inputs["labels"]}
    assert labels[POOL_LABEL] == "gpu", "the RayJob selects the label the platform's pool carries"
    assert rec.outputs["gpu_pool_id"] == platform.outputs["gpu_pool_id"]
    assert rec.outputs["gpu_pool_owner"] == "platform"


def test_an_experiment_that_disagrees_with_its_platform_on_the_pool_owner_fails_the_preview():
    """The runtime check (an Output that raises, exported so `pulumi preview` evaluates it), run in a process of its
    own: a program that failed in an apply leaves the Pulumi runtime unusable for the next run in the same process."""
    script = ("import sys; from tests.conftest import record; "
              f"record({EXPERIMENT!r}, {{'gpu_pool': {{'owner': 'experiment'}}}})")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode != 0
    assert ("gpu_pool.owner is 'experiment' but the platform organization/verl-ack/dev-platform exports "
            "gpu_pool_owner 'platform'") in done.stderr, done.stderr[-2000:]


def test_plan_refuses_an_experiment_that_disagrees_with_its_platform_on_the_pool_owner(tmp_path, capsys):
    raw = stack_settings(EXPERIMENT, {"gpu_pool": {"owner": "experiment"}})
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "must agree on who owns the GPU pool" in capsys.readouterr().err
    raw = stack_settings(EXPERIMENT, {"gpu_pool": {"nodes": 2}})
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "copy the platform's gpu_pool section" in capsys.readouterr().err


def test_destroying_an_experiment_leaves_nothing_of_it_billing():
    """Everything it owns is the GPU pool (bills while it exists), Kubernetes objects and its RAM roles (free):
    `pulumi destroy -s dev-grpo` removes all of it and leaves the platform, its bucket and checkpoints alone."""
    rec = record(EXPERIMENT)
    allowed = ("kubernetes:", "alicloud:ram/", "pulumi:providers:", NODE_POOL, STACK_REFERENCE_TYPE)
    other = [f"{r.type}::{r.name}" for r in _custom(rec) if not r.type.startswith(allowed)]
    assert other == []
    [ref] = rec.by_type(STACK_REFERENCE_TYPE)
    assert ref.options["read"] is True, "the reference is a read: destroying the experiment deletes nothing of it"
    kept = [r.name for r in _custom(rec) if r.options.get("retain_on_delete") or r.options.get("protect")]
    assert kept == [], f"an experiment keeps nothing after destroy: {kept}"


def test_the_platforms_bucket_is_protected_so_checkpoints_outlive_every_experiment():
    rec = record(PLATFORM)
    bucket = rec.get("alicloud:oss/bucket:Bucket", "storage-bucket")
    assert bucket.options["protect"] and bucket.options["retain_on_delete"]


@pytest.mark.parametrize("stack", ["dev-grpo", "dev-sweep"])
def test_each_experiment_logs_in_with_a_short_lived_credential_it_fetches_itself_for_the_platforms_cluster(stack):
    """The platform exports its cluster id, not a kubeconfig: the experiment asks ACK for a credential of its own on
    every run (an invoke reruns at every preview, up and destroy --run-program), with its own alicloud provider, and
    its Kubernetes provider is built from that secret, so nothing it needs expires with the platform's last `up`."""
    rec = record(stack)
    platform = record(PLATFORM)
    [provider] = rec.by_type("pulumi:providers:kubernetes")
    assert provider.name == "platform-k8s" and provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["clusterIdentifier"] == platform.outputs["cluster_id"]
    [ref] = rec.by_type(STACK_REFERENCE_TYPE)
    assert ref.urn in provider.property_dependencies["kubeconfig"]
    assert ref.urn in provider.property_dependencies["clusterIdentifier"]
    [alicloud] = rec.by_type("pulumi:providers:alicloud")
    [cred] = [i for i in rec.invokes if i["token"] == "alicloud:cs/getClusterCredential:getClusterCredential"]
    assert cred["args"]["clusterId"] == platform.outputs["cluster_id"]
    assert cred["provider"].startswith(alicloud.urn + "::"), "fetched with the experiment's own provider"
    ttl = parse_settings(stack_settings(stack)).cluster.kubeconfig_ttl_minutes
    assert cred["args"].get("temporaryDurationMinutes") == ttl
    for r in rec.resources:
        if r.is_kubernetes:
            assert r.provider.split("::")[-2] == "platform-k8s", r.urn


def _distinct_platform_outputs() -> StackOutputs:
    """The dev-platform outputs with every value made distinctive, so a value found in the experiment can only
    have come through the StackReference (the experiment's settings name none of these)."""
    real = record(PLATFORM)
    outputs = dict(real.outputs)
    outputs.update({
        "region": "ap-southeast-1", "cluster_id": "c-from-reference", "bucket_name": "bucket-from-reference",
        "oss_endpoint": "oss-from-reference-internal.aliyuncs.com", "csi_role_name": "csi-role-from-reference",
        "oidc_provider_arn": "acs:ram::1:oidc-provider/from-reference", "oidc_issuer_url": "https://issuer-from-reference",
        "training_image": "reg-vpc.ap-southeast-1.cr.aliyuncs.com/ns/from-reference:t@sha256:" + "1" * 64,
        "namespace": "platform-ns", "mcp_url": "http://mcp-from-reference:1/mcp",
        "tracking_uri": "http://mlflow-from-reference:5000",
        "node_vswitch_ids": {"ap-southeast-1a": "vsw-from-reference-a", "ap-southeast-1b": "vsw-from-reference-b"},
        "gpu_pool_id": "np-from-reference",
    })
    return StackOutputs(outputs, list(real.secret_outputs))


@pytest.fixture(scope="module")
def referenced():
    config, secret_keys, _ = offline_plan.stack_config(STACKS_DIR / f"Pulumi.{EXPERIMENT}.yaml")
    settings = parse_settings(stack_settings(EXPERIMENT))
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=EXPERIMENT,
                       stack_references={settings.platform_stack: _distinct_platform_outputs()})


def test_every_input_that_names_a_platform_thing_derives_from_the_reference(referenced):
    rec = referenced
    [ref] = rec.by_type(STACK_REFERENCE_TYPE)

    def from_ref(r, prop):
        assert ref.urn in r.property_dependencies.get(prop, []), f"{r.urn}: {prop} does not come from the reference"

    assert rec.outputs["gpu_pool_id"] == "np-from-reference", "the platform's pool"
    [alicloud] = rec.by_type("pulumi:providers:alicloud")
    from_ref(alicloud, "region")
    for role in rec.by_type("alicloud:ram/role:Role"):
        trust = json.loads(role.inputs["assumeRolePolicyDocument"])
        principal = trust["Statement"][0]["Principal"]["Federated"]
        assert principal == ["acs:ram::1:oidc-provider/from-reference"], role.urn
        assert trust["Statement"][0]["Condition"]["StringEquals"]["oidc:iss"] == "https://issuer-from-reference"
        from_ref(role, "assumeRolePolicyDocument")
    for policy in rec.by_type("alicloud:ram/policy:Policy"):
        assert "acs:oss:*:*:bucket-from-reference" in policy.inputs["policyDocument"], policy.urn
        from_ref(policy, "policyDocument")
    for pv in rec.by_type("kubernetes:core/v1:PersistentVolume"):
        attrs = pv.inputs["spec"]["csi"]["volumeAttributes"]
        assert attrs["bucket"] == "bucket-from-reference" and "oss-from-reference" in attrs["url"], pv.urn
        assert attrs.get("roleName") in (None, "csi-role-from-reference"), pv.urn
        from_ref(pv, "spec")
    for job in rec.by_type("kubernetes:batch/v1:Job"):
        if job.name in ("train-gate", "train-admission"):
            continue  # the node gate and the queue admission check read no bucket, only the cluster
        env = {e["name"]: e.get("value") for c in job.inputs["spec"]["template"]["spec"]["containers"]
               for e in c.get("env", [])}
        assert env["OSS_BUCKET"] == "bucket-from-reference", job.urn
        assert env["OSS_ENDPOINT"] == "oss-from-reference-internal.aliyuncs.com", job.urn
    [rayjob] = rec.by_type(RAYJOB_TYPE)
    head = rayjob.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == _distinct_platform_outputs().outputs["training_image"]
    assert {"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow-from-reference:5000"} in head["env"]
    from_ref(rayjob, "spec")
    assert rec.outputs["training_image"] == head["image"]
    # The MCP servers file (a secret) names the platform's MCP URL; it stays a secret in the recording.
    assert rec.get("kubernetes:core/v1:Secret", "train-mcp").inputs["stringData"] == {"mcp_servers.json": "[secret]"}
    from_ref(rec.get("kubernetes:core/v1:Secret", "train-mcp"), "stringData")


def test_an_experiment_without_its_platform_rendered_fails_loudly():
    # In a process of its own, like the owner-mismatch test above: a program that failed mid-run leaves the Pulumi
    # runtime unusable for the next run in the same process (a later test's fixture then failed in CI).
    script = ("import sys; from pathlib import Path; from offline import plan as offline_plan; "
              "from offline.engine import run_program; "
              f"config, keys, _ = offline_plan.stack_config(Path('stacks/Pulumi.{EXPERIMENT}.yaml')); "
              f"run_program(Path('__main__.py'), config, keys, project={PROJECT!r}, stack={EXPERIMENT!r})")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode != 0
    assert "was not rendered first" in done.stderr, done.stderr[-2000:]


@pytest.fixture(scope="module")
def pair_plan(tmp_path_factory):
    return offline_plan.build_plan(STACKS_DIR / f"Pulumi.{EXPERIMENT}.yaml", EXPERIMENT, tmp_path_factory.mktemp("p") / "out")


def test_the_warm_platform_critical_path_excludes_everything_the_platform_owns(pair_plan):
    """The platform owns the GPU pool with the image pre-pulled: no join and no pull on the warm path."""
    latency = pair_plan["sections"]["latency"]
    steps = [st["type"] for st in latency["path"]]
    kinds = [st["kind"] for st in latency["path"]]
    assert not [t for t in steps if t.startswith(PLATFORM_TYPE_PREFIXES)], steps
    assert steps[0] == STACK_REFERENCE_TYPE, steps
    assert not {"gpu_node_pool", "gpu_scale_up", "image_pull"} & set(kinds), kinds
    assert NODE_POOL not in steps, steps
    assert latency["image_pull"]["prepulled"] and not latency["image_pull"]["on_critical_path"]
    assert latency["phases"]["image pull"] == 0.0, "the image is on the platform's nodes"
    assert latency["image_pull"]["via_nat"] is False, "the image never crosses the NAT"
    assert latency["phases"]["RayJob submission"] == parse_settings(
        stack_settings(EXPERIMENT)).latency.job_submit_no_pip_minutes, "the built image installs nothing at start"


def test_a_new_platform_plus_experiment_is_within_1_1x_the_unavoidable_chain(pair_plan):
    split = pair_plan["sections"]["latency"]["split"]
    assert split["fresh_first_step_minutes"] <= 1.1 * split["chain_minutes"], split
    assert split["gpu_avoidable_idle_minutes"] <= 5.0, split
    assert split["sequential_first_step_minutes"] == pytest.approx(
        split["platform_up_minutes"] + split["warm_first_step_minutes"], abs=0.02)


def test_an_experiment_on_a_warm_platform_reaches_its_first_step_within_15_minutes(pair_plan):
    """ESTIMATE (docs/latency.md): the platform keeps the Lingjun pool joined with the image pre-pulled."""
    split = pair_plan["sections"]["latency"]["split"]
    assert split["warm_first_step_minutes"] <= 15.0, split
    assert all(split["targets"].values()), split["targets"]


@pytest.mark.parametrize("min_nodes", [0, 1])
def test_an_experiment_that_owns_an_ecs_pool_waits_for_the_join_and_the_pull_on_a_warm_platform(min_nodes):
    """owner: experiment (pay-as-you-go ECS, which must not bill idle): the warm figure includes the GPU nodes' join
    (pool creation, or the autoscaler's scale-up) and the image pull. It may exceed 15 min; this asserts the breakdown."""
    ecs = {"kind": "ecs", "lingjun": None, "owner": "experiment", "gpu_memory_gib": 96, "cpus_per_node": 192,
           "memory_gib_per_node": 1536, "ecs": {"instance_types": ["ecs.gn8v-8x.48xlarge"], "min_nodes": min_nodes}}
    raw = stack_settings(EXPERIMENT, {"gpu_pool": ecs})
    settings = parse_settings(raw)
    config, secret_keys, _ = offline_plan.stack_config(STACKS_DIR / f"Pulumi.{EXPERIMENT}.yaml")
    outputs = _distinct_platform_outputs()
    # A platform whose team quota fits this pool's nodes (the shipped one describes its 104-CPU Lingjun node).
    team = {"team": settings.job.namespace, "nvidia.com/gpu": 8.0, "cpu": 192.0, "memory": 1536.0 * 2**30}
    outputs = StackOutputs({**outputs.outputs, "gpu_pool_owner": "experiment", "gpu_pool_id": "",
                            "queue_teams": {settings.job.namespace: team}}, outputs.secret_output_names)
    rec = run_program(REPO / "__main__.py", {**config, SETTINGS_KEY: json.dumps(raw)}, secret_keys, project=PROJECT,
                      stack=EXPERIMENT, stack_references={settings.platform_stack: outputs})
    assert [r.name for r in rec.by_type(NODE_POOL)] == ["pools-gpu"]
    assert rec.get(NODE_POOL, "pools-gpu").inputs["clusterId"] == "c-from-reference"
    cp = critical_path(rec, settings)
    kinds = {st.kind: st for st in cp.path}
    join = kinds.get("gpu_scale_up") or kinds.get("gpu_node_pool")
    assert join is not None and join.minutes == settings.latency.create_minutes["gpu_node_pool"], cp.path
    assert "image_pull" in kinds and cp.image_pull.minutes > 0 and cp.image_pull.on_critical_path, cp.path
    start = sum(cp.phases[p] for p in ("Ray cluster start", "RayJob submission", "verl init and model load"))
    assert cp.first_step_minutes >= join.minutes + cp.image_pull.minutes + start


def test_plan_md_states_both_figures_and_who_owns_the_gpu_nodes(pair_plan, tmp_path):
    out = tmp_path / "p"
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{EXPERIMENT}.yaml", EXPERIMENT, out)
    md = (out / "plan.md").read_text()
    assert "new platform + experiment" in md and "experiment on a warm platform" in md
    assert "Who owns the GPU nodes:** the platform stack" in md
    assert "GPU nodes: the platform's pool (gpu_pool.owner: platform), billed in the platform's estimate" in md
    offline_plan.build_plan(STACKS_DIR / f"Pulumi.{PLATFORM}.yaml", PLATFORM, tmp_path / "q")
    platform_md = (tmp_path / "q" / "plan.md").read_text()
    assert "Who owns the GPU nodes:** the platform stack" in platform_md
    assert "| Lingjun GPU nodes (1 x GU8TF) |" in platform_md, "the cost estimate bills the GPU nodes to their owner"


def test_plan_refuses_an_experiment_whose_platform_stack_file_is_missing(tmp_path, capsys):
    raw = stack_settings(EXPERIMENT, {"platform_stack": "organization/verl-ack/no-such-platform"})
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "no-such-platform" in capsys.readouterr().err


def test_plan_refuses_an_experiment_in_another_region_than_its_platform(tmp_path, capsys):
    raw = stack_settings(EXPERIMENT, {"region": "cn-hangzhou", "zones": ["cn-hangzhou-a"],
                                      "gpu_pool": {"zone": "cn-hangzhou-a"}})
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "use its region" in capsys.readouterr().err


@pytest.mark.parametrize("stack", [PLATFORM, EXPERIMENT])
def test_both_halves_pass_the_mandatory_policies(stack):
    from tests.test_policy import test_every_stack_of_the_program_passes_the_mandatory_policies as mandatory

    mandatory(stack)


def test_an_rdma_experiment_creates_its_own_privileged_ray_namespace_beside_its_restricted_job_namespace():
    # A multi-node Lingjun experiment: its Ray pods need `privileged`, nothing else of it does.
    # Not queued: the shipped platform's teams hold verl-dev-grpo, not the RDMA job's -ray namespace (which an
    # experiment on it is refused for: test_sharing.py).
    rec = record(EXPERIMENT, {"gpu_pool": {"nodes": 2}, "job": {"host_network_cidrs": ["10.0.0.0/16"]},
                              "queue": {"enabled": False}})
    enforce = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
               for r in rec.by_type("kubernetes:core/v1:Namespace")}
    job_ns = parse_settings(stack_settings(EXPERIMENT)).job.namespace
    assert enforce == {job_ns: "restricted", f"{job_ns}-ray": "privileged"}
    assert rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs["metadata"]["namespace"] == f"{job_ns}-ray"
    assert rec.get("kubernetes:core/v1:ServiceAccount", "identity-sa-train").inputs["metadata"]["namespace"] == \
        f"{job_ns}-ray"
    assert rec.get("kubernetes:core/v1:ServiceAccount", "identity-sa-data").inputs["metadata"]["namespace"] == job_ns


@pytest.mark.parametrize("layout", ["project", "legacy"])
@pytest.mark.parametrize("stack", ["dev-platform", EXPERIMENT, "dev-sweep"])
def test_every_stack_reference_is_a_name_the_diy_backend_accepts_in_either_layout(stack, layout):
    # the DIY backend's legacy layout (no projects) parses a StackReference's name as a bare stack name: the fully
    # qualified organization/<project>/<stack> once failed the preview there (the experiment's platform, the
    # create-only guard's own stack)
    config, secret_keys, _ = offline_plan.stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    platform = stack_settings(stack).get("platform_stack")
    refs = {platform: StackOutputs.of(record(platform.rsplit("/", 1)[-1]))} if platform else {}
    rec = run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                      stack_references=refs, own_outputs=StackOutputs.of(record(stack)), backend_layout=layout)
    assert rec.by_type("pulumi:pulumi:StackReference")
