"""The time-to-first-step model: critical paths over small synthetic graphs with hand-computed times, the
engine's parent/child rules, defaults for unknown types, and the pre-pull moving the image pull off the path."""

from __future__ import annotations

import pytest

from components.config import DEFAULT_CREATE_MINUTES, Settings, SettingsError
from components.model import load_stack, parse_settings, preset_of
from offline.engine import Recording, Registration, run_program
from offline.report import plan_sections
from offline.report.latency import (
    RAYJOB_TYPE,
    TARGET_FRESH_RATIO,
    critical_path,
    job_kind,
    job_minutes,
    kind_of,
    latency_section,
    mbit_minutes,
    pull_minutes,
    unavoidable_chain_minutes,
)
from tests.conftest import record, stack_settings

CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"
NAT = "alicloud:vpc/natGateway:NatGateway"
POOL = "alicloud:cs/nodePool:NodePool"
JOB = "kubernetes:batch/v1:Job"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
COMPONENT = "verl-ack:test:Group"

# Round minutes so every expectation below can be added up by hand. The existing-ecs stack reuses a
# cluster (no NAT created), so no NAT bandwidth cap applies to the pull.
MINUTES = {"ack_cluster": 10, "addon": 5, "nat_gateway": 1, "gpu_node_pool": 4, "node_pool": 3, "k8s_object": 0,
           "k8s_workload": 2, "default": 2.5}
PHASES = {"ray_start_minutes": 2, "job_submit_minutes": 3, "verl_init_minutes": 4, "job_start_minutes": 1}


def settings(overrides: dict | None = None, stack: str = "existing-ecs") -> Settings:
    """existing-ecs with a fixed GPU pool (min_nodes = nodes: created with its nodes, no autoscaling)."""
    base = {"latency": {"create_minutes": MINUTES, **PHASES}, "gpu_pool": {"ecs": {"min_nodes": 2}}}
    return parse_settings(stack_settings(stack, {**base, **(overrides or {})}))


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::verl-ack::{type_}::{name}"


def reg(type_: str, name: str, deps: tuple[Registration, ...] = (), parent: Registration | None = None,
        inputs: dict | None = None, custom: bool = True, prop_deps: tuple[Registration, ...] = ()) -> Registration:
    return Registration(
        urn=urn(type_, name), type=type_, name=name, custom=custom, parent=parent.urn if parent else "",
        provider="", dependencies=[d.urn for d in deps],
        property_dependencies={"clusterId": [d.urn for d in prop_deps]} if prop_deps else {},
        inputs=inputs or {}, options={})


def gpu_pool(name: str = "gpu", deps: tuple[Registration, ...] = ()) -> Registration:
    return reg(POOL, name, deps, inputs={"labels": [{"key": "verl-ack/pool", "value": "gpu"}]})


def phases_after_pull(s: Settings) -> float:
    """Ray start + submission + verl init + the model read from OSS, as the settings state them."""
    model_read = mbit_minutes(preset_of(s).arch.params * 2, s.latency.oss_read_mbps)
    return 2 + 3 + 4 + model_read


def names(cp) -> list[str]:
    return [st.name for st in cp.path]


def test_diamond_graph_follows_the_slower_branch_and_adds_the_training_phases():
    s = settings()
    a = reg(CLUSTER, "cluster")  # 10
    b = reg(ADDON, "slow-addon", (a,))  # 5
    c = reg(NAT, "fast", (a,))  # 1
    d = reg(RAYJOB_TYPE, "train", (b, c))  # 0 (k8s_object)
    cp = critical_path(Recording(resources=[a, b, c, d]), s)
    pull = pull_minutes(s, s.versions.verl_image)[0]
    assert cp.first_step_minutes == pytest.approx(10 + 5 + pull + phases_after_pull(s))
    assert names(cp)[:2] == ["cluster", "slow-addon"]
    assert "fast" not in names(cp)
    assert names(cp)[-4:] == ["image pull", "Ray cluster start", "RayJob submission", "verl init and model load"]
    # Serial: every step one after another, the fast branch included.
    assert cp.serial_minutes == pytest.approx(10 + 5 + 1 + 0 + pull + phases_after_pull(s))


def test_property_dependencies_order_resources_like_explicit_ones():
    s = settings()
    a = reg(CLUSTER, "cluster")
    b = reg(ADDON, "addon", prop_deps=(a,))
    cp = critical_path(Recording(resources=[a, b]), s)
    assert cp.graph_minutes == pytest.approx(15)


def test_a_component_finishes_when_its_last_child_finishes():
    s = settings()
    group = reg(COMPONENT, "group", custom=False)
    reg_fast = reg(NAT, "group-fast", parent=group)  # 1
    reg_slow = reg(ADDON, "group-slow", parent=group)  # 5
    after = reg(CLUSTER, "after", (group,))  # depends on the component, not on its children
    cp = critical_path(Recording(resources=[group, reg_fast, reg_slow, after]), s)
    assert cp.graph_minutes == pytest.approx(5 + 10)
    assert [st.name for st in cp.path if st.kind not in ("image_pull", "training_phase")] == ["group-slow", "after"]


def test_a_child_cannot_start_before_its_parents_dependencies_are_done():
    s = settings()
    first = reg(CLUSTER, "first")  # 10
    group = reg(COMPONENT, "group", (first,), custom=False)
    child = reg(ADDON, "group-child", parent=group)  # no dependency of its own
    train = reg(RAYJOB_TYPE, "train", parent=group)
    cp = critical_path(Recording(resources=[first, group, child, train]), s)
    assert cp.graph_minutes == pytest.approx(10 + 5)
    pull = pull_minutes(s, s.versions.verl_image)[0]
    assert cp.first_step_minutes == pytest.approx(10 + 0 + pull + phases_after_pull(s))
    assert names(cp)[0] == "first"


def test_unknown_types_get_the_default_and_unknown_kubernetes_kinds_count_as_objects():
    s = settings()
    unknown = reg("random:index/randomPassword:RandomPassword", "pw")
    crd_obj = reg("kubernetes:example.com/v1:Widget", "widget", (unknown,))
    assert kind_of(unknown) == "default"
    assert kind_of(crd_obj) == "k8s_object"
    assert kind_of(reg(COMPONENT, "c", custom=False)) == "component"
    assert kind_of(reg("pulumi:providers:kubernetes", "k8s")) == "provider"
    cp = critical_path(Recording(resources=[unknown, crd_obj]), s)
    assert cp.graph_minutes == pytest.approx(2.5 + 0)


def test_reading_an_existing_resource_takes_an_api_call_not_a_creation():
    s = settings()
    existing = reg(CLUSTER, "cluster")
    existing.options["read"] = True
    assert kind_of(existing) == "read"
    cp = critical_path(Recording(resources=[existing, reg(ADDON, "addon", (existing,))]), s)
    assert cp.graph_minutes == pytest.approx(s.latency.create_minutes["cloud_api"] + 5)


def test_data_jobs_take_their_time_from_the_data_size():
    s = settings()
    stage = reg(JOB, "weights", inputs={"spec": {"template": {"spec": {"containers": [
        {"command": ["python", "-m", "pipeline.stage_model"]}]}}}})
    data = reg(JOB, "prep", inputs={"metadata": {"labels": {"verl-ack/role": "dataset"}}})
    assert job_kind(stage) == "model_job"
    assert job_kind(data) == "dataset_job"
    assert job_kind(reg(JOB, "migrate")) == "job"
    size = preset_of(s).arch.params * 2
    expected = 1 + mbit_minutes(size, s.latency.hub_download_mbps) + mbit_minutes(size, s.latency.oss_upload_mbps)
    assert critical_path(Recording(resources=[stage]), s).graph_minutes == pytest.approx(expected)


def test_gpu_idle_is_the_time_from_gpu_pool_ready_to_the_first_step():
    s = settings()
    cluster = reg(CLUSTER, "cluster")  # 10
    pool = gpu_pool(deps=(cluster,))  # 4 -> ready at 14
    addon = reg(ADDON, "kuberay", (cluster,))  # 5 -> 15
    train = reg(RAYJOB_TYPE, "train", (pool, addon))
    cp = critical_path(Recording(resources=[cluster, pool, addon, train]), s)
    assert cp.gpu_pool_start_minutes == pytest.approx(10)
    assert cp.gpu_pool_ready_minutes == pytest.approx(14)
    assert cp.gpu_idle_minutes == pytest.approx(cp.first_step_minutes - 14)


def test_prepull_moves_the_image_pull_off_the_critical_path():
    s = settings({"latency": {"create_minutes": MINUTES, **PHASES, "training_image_gib": 1, "job_start_minutes": 5}})
    pull = pull_minutes(s, s.versions.verl_image)[0]
    cluster = reg(CLUSTER, "cluster")  # 10
    pool = gpu_pool(deps=(cluster,))  # 4 -> 14
    slow = reg("random:index/slow:Slow", "slow", (cluster,))  # default 2.5 -> 12.5
    stage = reg(JOB, "model", (slow,), inputs={"metadata": {"labels": {"verl-ack/role": "model"}}})
    train = reg(RAYJOB_TYPE, "train", (stage, pool))
    without = critical_path(Recording(resources=[cluster, pool, slow, stage, train]), s)
    created = 10 + 2.5 + job_minutes(s, "model_job")  # cluster, slow, staging; the RayJob itself takes 0
    assert pull < created - 14, "the test needs the pull to fit between GPU-pool ready and RayJob creation"
    assert without.image_pull.on_critical_path
    assert without.first_step_minutes == pytest.approx(created + pull + phases_after_pull(s))

    prepull = reg(DAEMONSET, "image-prepull", (pool,), inputs={"metadata": {
        "labels": {"verl-ack/role": "prepull"}, "annotations": {"pulumi.com/skipAwait": "true"}}})
    with_ = critical_path(Recording(resources=[cluster, pool, slow, stage, train, prepull]), s)
    assert with_.image_pull.prepulled and not with_.image_pull.on_critical_path
    assert "image pull" not in names(with_)
    assert with_.first_step_minutes == pytest.approx(created + phases_after_pull(s))
    assert with_.first_step_minutes == pytest.approx(without.first_step_minutes - pull)


def test_a_prepull_that_cannot_finish_in_time_stays_on_the_path_from_gpu_pool_ready():
    s = settings({"latency": {"create_minutes": MINUTES, **PHASES, "training_image_gib": 500}})
    pull = pull_minutes(s, s.versions.verl_image)[0]
    pool = gpu_pool()  # 4
    prepull = reg(DAEMONSET, "prepull", (pool,), inputs={"metadata": {
        "annotations": {"pulumi.com/skipAwait": "true"}}})
    train = reg(RAYJOB_TYPE, "train", (pool,))
    cp = critical_path(Recording(resources=[pool, prepull, train]), s)
    assert cp.image_pull.on_critical_path
    assert cp.first_step_minutes == pytest.approx(4 + 0 + pull + phases_after_pull(s))
    assert names(cp)[:3] == ["gpu", "image pull", "Ray cluster start"]


def test_an_awaited_prepull_daemonset_holds_back_what_depends_on_it():
    s = settings({"latency": {"create_minutes": MINUTES, **PHASES, "training_image_gib": 1}})
    pull = pull_minutes(s, s.versions.verl_image)[0]
    pool = gpu_pool()  # 4
    prepull = reg(DAEMONSET, "prepull", (pool,), inputs={"metadata": {"labels": {"verl-ack/role": "prepull"}}})
    after = reg(ADDON, "after", (prepull,))  # 5
    cp = critical_path(Recording(resources=[pool, prepull, after]), s)
    assert cp.graph_minutes == pytest.approx(4 + pull + 5)


def test_image_pull_through_the_nat_shares_its_bandwidth_and_acr_does_not():
    s = load_stack("multinode")  # new cluster: its NAT (the Lingjun VPC's own) is assumed at nat_bandwidth_mbps
    gib = s.latency.training_image_gib * 2**30
    docker_hub, rate, via_nat = pull_minutes(s, "verlai/verl:vllm012.latest")
    assert via_nat and rate == s.cluster.network.nat_bandwidth_mbps / s.gpu_pool.nodes
    assert docker_hub == pytest.approx(mbit_minutes(gib, rate))
    acr, rate, via_nat = pull_minutes(s, "registry-ap-southeast-1.ack.aliyuncs.com/dev/verl:x")
    assert not via_nat and rate == s.latency.node_pull_mbps and acr < docker_hub


def test_a_dependency_cycle_is_an_error_naming_a_resource():
    a = reg(ADDON, "a")
    b = reg(ADDON, "b", (a,))
    a.dependencies.append(b.urn)
    with pytest.raises(ValueError, match="dependency cycle through .*KubernetesAddon::"):
        critical_path(Recording(resources=[a, b]), settings())


def test_no_rayjob_in_the_graph_is_noted_and_the_phases_follow_the_last_resource():
    s = settings()
    cp = critical_path(Recording(resources=[reg(CLUSTER, "cluster")]), s)
    pull = pull_minutes(s, s.versions.verl_image)[0]
    assert cp.first_step_minutes == pytest.approx(10 + pull + phases_after_pull(s))
    assert any("no kubernetes:ray.io/v1:RayJob" in n for n in cp.notes)


def test_create_minutes_overrides_keep_the_other_defaults_and_unknown_kinds_are_refused():
    s = parse_settings(stack_settings("dev", {"latency": {"create_minutes": {"ack_cluster": 20}}}))
    assert s.latency.create_minutes["ack_cluster"] == 20
    assert s.latency.create_minutes["addon"] == DEFAULT_CREATE_MINUTES["addon"]
    with pytest.raises(SettingsError, match="unknown kind"):
        parse_settings(stack_settings("dev", {"latency": {"create_minutes": {"ack_clustr": 20}}}))


def test_rayjob_type_token_is_what_pulumi_kubernetes_records_for_a_custom_resource(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(
        "import pulumi\nimport pulumi_kubernetes as k8s\n"
        "p = k8s.Provider('k', kubeconfig='{}')\n"
        "k8s.apiextensions.CustomResource('rj', api_version='ray.io/v1', kind='RayJob', spec={},\n"
        "    opts=pulumi.ResourceOptions(provider=p))\n")
    rec = run_program(program, {}, [], project="t", stack="t")
    assert [r.name for r in rec.by_type(RAYJOB_TYPE)] == ["rj"]


def test_the_model_runs_on_every_stacks_recorded_graph(stack_name):
    s = load_stack(stack_name)
    cp = critical_path(record(stack_name), s)
    assert cp.first_step_minutes >= cp.phases["verl init and model load"]
    assert cp.serial_minutes >= cp.first_step_minutes - 1e-9


def test_an_autoscaled_ecs_pool_boots_its_gpu_nodes_after_the_rayjob_and_a_prepull_cannot_help():
    s = settings({"gpu_pool": {"ecs": {"min_nodes": 0}}})
    pull = pull_minutes(s, s.versions.verl_image)[0]
    cluster = reg(CLUSTER, "cluster")  # 10
    pool = gpu_pool(deps=(cluster,))  # an autoscaled pool is created as a plain pool: node_pool 3 -> 13
    addon = reg(ADDON, "kuberay", (cluster,))  # 5 -> 15
    train = reg(RAYJOB_TYPE, "train", (pool, addon))  # created at 15; the pods go pending
    prepull = reg(DAEMONSET, "prepull", (pool,), inputs={"metadata": {"labels": {"verl-ack/role": "prepull"}}})
    cp = critical_path(Recording(resources=[cluster, pool, addon, train, prepull]), s)
    assert cp.gpu_pool_start_minutes == pytest.approx(15)  # ECS GPU nodes bill from the scale-up
    assert cp.gpu_pool_ready_minutes == pytest.approx(15 + 4)  # boot: gpu_node_pool minutes
    assert cp.first_step_minutes == pytest.approx(15 + 4 + pull + phases_after_pull(s))
    assert names(cp)[:4] == ["cluster", "kuberay", "GPU nodes scale up", "image pull"]
    assert cp.image_pull.on_critical_path and not cp.image_pull.prepulled
    assert any("cluster-autoscaler" in n for n in cp.notes)


def test_the_recorded_chain_of_a_new_cluster_includes_the_cluster():
    dev, ecs = load_stack("dev"), load_stack("existing-ecs")
    new = critical_path(record("dev"), dev).timeline()
    existing = critical_path(record("existing-ecs"), ecs).timeline()
    assert new.gpu_pool_start_minutes >= dev.latency.create_minutes["ack_cluster"]
    assert existing.setup_minutes < new.setup_minutes


def test_the_plan_shows_the_latency_section_labelled_as_an_estimate():
    s = load_stack("dev")
    sec = latency_section(s, record("dev"))
    assert sec.key == "latency" and "ESTIMATE" in sec.title and "not a measurement" in sec.markdown
    assert "Critical path" in sec.markdown and "verl init and model load" in sec.markdown
    assert {"first_step_minutes", "path", "serial_minutes", "gpu_idle_minutes", "assumptions"} <= set(sec.data)
    assert "latency" in [x.key for x in plan_sections(s, record("dev"))]


def test_a_platform_stack_estimates_the_pull_of_the_image_it_names_not_the_public_base_image():
    # A platform records no RayJob; its pre-pull pulls the in-region built image (image.source: built), which never
    # crosses the NAT. The estimate must not fall back to Docker Hub's base image.
    from components.cloud.registry import training_image as configured_image

    s = load_stack("dev-platform")
    cp = critical_path(record("dev-platform"), s)
    assert cp.image_pull.image == configured_image(s) and ".aliyuncs.com/" in cp.image_pull.image
    assert not cp.image_pull.via_nat


def test_the_tutorials_single_stack_reaches_its_first_step_within_the_target_of_its_unavoidable_chain():
    s = load_stack("dev")
    cp = critical_path(record("dev"), s)
    chain = unavoidable_chain_minutes(s, cp)
    assert cp.first_step_minutes <= TARGET_FRESH_RATIO * chain, (cp.first_step_minutes, chain)
    assert not cp.image_pull.via_nat, "the 25 GiB image comes from the in-region registry, not through the NAT"
    sec = latency_section(s, record("dev"))
    assert sec.data["chain_ratio"] == round(cp.first_step_minutes / chain, 2)
    assert f"{cp.first_step_minutes / chain:.2f}x" in sec.markdown


def test_the_same_stack_with_the_docker_hub_image_through_the_nat_misses_that_target():
    over = {"image": {"source": "official"}}
    s = parse_settings(stack_settings("dev", over))
    cp = critical_path(record("dev", over), s)
    assert cp.image_pull.via_nat and cp.first_step_minutes > TARGET_FRESH_RATIO * unavoidable_chain_minutes(s, cp)
