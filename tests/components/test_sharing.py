"""Experiments that share a platform: queued all-or-nothing RayJobs, sweeps as one stack, logs that outlive the job."""

from __future__ import annotations

import pytest

from components.config import Settings
from components.logs import RAY_LOGS_ENV, aliyun_log_config_manifest, mark_ray_containers
from components.model import parse_settings
from components.model.layout import resolve_layout
from components.queue import (
    MIN_AVAILABLE_LABEL,
    POD_GROUP_LABEL,
    QueueError,
    check_gang,
    elastic_quota_tree_manifest,
    job_request,
    queued_rayjob,
)
from components.sweep import variants
from components.wiring import gpu_scheduling
from components.workloads.training.rayjob import pod_groups, pod_wiring, rayjob_manifest
from tests.conftest import record, stack_settings


def _queued(s: Settings, namespace: str) -> dict:
    layout = resolve_layout(s)
    manifest = rayjob_manifest(s, layout, gpu_scheduling(s), pod_wiring(s, namespace=namespace, service_account="sa"))
    out = queued_rayjob(manifest, s, layout)
    check_gang(out)
    return out


def _pods(manifest: dict) -> list[dict]:
    cluster = manifest["spec"]["rayClusterSpec"]
    head = [cluster["headGroupSpec"]["template"]]
    return head + [g["template"] for g in cluster.get("workerGroupSpecs") or [] for _ in range(g["replicas"])]


@pytest.mark.parametrize("nodes", [1, 2])
def test_two_experiments_that_together_exceed_the_pool_can_each_start_only_whole(nodes):
    platform = parse_settings(stack_settings("dev-platform", {"gpu_pool": {"nodes": nodes}, "queue": {"teams": {
        "team-a": {"gpus": 8 * nodes}, "team-b": {"gpus": 8 * nodes}}}}))
    tree = elastic_quota_tree_manifest(platform)
    pool = tree["spec"]["root"]["max"]["nvidia.com/gpu"]
    jobs = []
    for ns in ("team-a", "team-b"):
        s = parse_settings(stack_settings("dev-grpo", {"gpu_pool": {"nodes": nodes}, "job": {"namespace": ns}}))
        jobs.append(_queued(s, ns))
    assert sum(job_request(j)["nvidia.com/gpu"] for j in jobs) > pool, "the two jobs must not fit together"
    for job in jobs:
        # Suspended: the queue admits the job's whole request as one unit, which fits the quota alone...
        assert job["spec"]["suspend"] is True
        assert job_request(job)["nvidia.com/gpu"] == 8 * nodes <= pool
        # ...and once resumed every pod is in one gang of all its pods: no partial allocation can be held.
        pods = _pods(job)
        assert len(pods) == nodes
        for pod in pods:
            assert pod["metadata"]["labels"][POD_GROUP_LABEL] == job["metadata"]["name"]
            assert pod["metadata"]["labels"][MIN_AVAILABLE_LABEL] == str(nodes)
    leaves = {c["namespaces"][0]: c["max"]["nvidia.com/gpu"] for c in tree["spec"]["root"]["children"]}
    assert {ns: leaves[ns] for ns in ("team-a", "team-b")} == {"team-a": 8 * nodes, "team-b": 8 * nodes}
    assert tree["spec"]["root"]["min"] == tree["spec"]["root"]["max"], "ACK requires root min == max"


def test_a_rayjob_whose_gang_is_not_all_its_pods_is_refused_before_anything_is_created():
    s = parse_settings(stack_settings("dev-grpo", {"gpu_pool": {"nodes": 2}}))
    job = _queued(s, "verl-dev-grpo")
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["metadata"]["labels"][MIN_AVAILABLE_LABEL] = "1"
    with pytest.raises(QueueError, match="min-available=2"):
        check_gang(job)
    running = _queued(s, "verl-dev-grpo")
    running["spec"]["suspend"] = False
    with pytest.raises(QueueError, match="spec.suspend"):
        check_gang(running)


def test_the_platform_installs_the_queue_and_renders_quotas_and_priorities_that_never_preempt():
    rec = record("dev-platform")
    addons = {r.name: r.inputs["name"] for r in rec.by_type("alicloud:cs/kubernetesAddon:KubernetesAddon")}
    assert addons["queue-kube-queue"] == "ack-kube-queue" and addons["logs-logtail"] == "logtail-ds"
    tree = [r for r in rec.by_type("kubernetes:scheduling.sigs.k8s.io/v1beta1:ElasticQuotaTree")]
    assert len(tree) == 1 and tree[0].inputs["metadata"]["namespace"] == "kube-system"
    classes = rec.by_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")
    assert {r.inputs["metadata"]["name"] for r in classes} == {"verl-ack-low", "verl-ack-normal", "verl-ack-high"}
    assert all(r.inputs["preemptionPolicy"] == "Never" for r in classes)


def test_a_queued_experiment_waits_without_its_deadline_running_because_kuberay_restarts_the_clock_on_resume():
    # The deadlines stay as set: KubeRay v1.7.0 checks them only from Initializing/Running, and startTime is set
    # anew when the queue resumes the job (docs/facts.md "Shared platform"); so they are safe to keep on a queued job.
    rec = record("dev-grpo")
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    spec = job.inputs["spec"]
    assert spec["suspend"] is True and spec["shutdownAfterJobFinishes"] is True
    assert spec["preRunningDeadlineSeconds"] > 0


def test_a_sweep_renders_one_queued_rayjob_per_variant_with_its_own_run_checkpoints_and_logical_name():
    rec = record("dev-sweep")
    jobs = rec.by_type("kubernetes:ray.io/v1:RayJob")
    s = parse_settings(stack_settings("dev-sweep"))
    vs = variants(s)
    assert len(jobs) == len(vs) == 4
    by_name = {j.inputs["metadata"]["name"]: j for j in jobs}
    for v in vs:
        job = by_name[v.rayjob_name]
        assert job.name == f"train-{v.key}-rayjob"
        entry = job.inputs["spec"]["entrypoint"]
        assert f"trainer.experiment_name={v.run_name}" in entry
        assert f"/{s.training.experiment_name}/{v.key}" in entry  # its own checkpoint folder
        assert job.inputs["spec"]["suspend"] is True
    assert len({v.checkpoint_prefix for v in vs}) == 4
    assert rec.outputs["sweep_rayjobs"] == {v.key: v.rayjob_name for v in vs}


def test_sweep_variant_names_do_not_change_when_the_lists_are_reordered():
    a = parse_settings(stack_settings("dev-sweep", {"training": {"sweep": {"lr": [1.0e-6, 3.0e-6]}}}))
    b = parse_settings(stack_settings("dev-sweep", {"training": {"sweep": {"lr": [3.0e-6, 1.0e-6]}}}))
    assert {v.key for v in variants(a)} == {v.key for v in variants(b)}


def test_a_sweep_variant_that_breaks_a_rule_is_refused_naming_the_variant():
    with pytest.raises(Exception, match="sweep"):
        parse_settings(stack_settings("dev-sweep", {"training": {"sweep": {"lr": [1.0e-6, 2.0]}}}))


def test_a_sweep_larger_than_the_cap_or_without_a_queue_is_refused():
    with pytest.raises(Exception, match="more than 16"):
        parse_settings(stack_settings("dev-sweep", {"training": {"sweep": {"lr": [1e-6, 2e-6, 3e-6, 4e-6, 5e-6],
                                                                           "kl_loss_coef": [0.1, 0.2, 0.3, 0.4]}}}))
    with pytest.raises(Exception, match="queue.enabled"):
        parse_settings(stack_settings("dev-sweep", {"queue": {"enabled": False}}))


def test_ray_logs_are_collected_by_the_platform_and_experiments_only_mark_their_containers():
    s = parse_settings(stack_settings("dev-platform"))
    m = aliyun_log_config_manifest(s)
    detail = m["spec"]["logtailConfig"]["inputDetail"]
    assert detail["logPath"] == "/tmp/ray" and detail["dockerFile"] is True
    assert detail["dockerIncludeEnv"] == {RAY_LOGS_ENV: ""}
    assert m["spec"]["lifeCycle"] == s.logs.retention_days
    assert m["spec"]["logtailConfig"]["configName"] == m["metadata"]["name"]
    platform = record("dev-platform")
    assert len(platform.by_type("kubernetes:log.alibabacloud.com/v1alpha1:AliyunLogConfig")) == 1
    experiment = record("dev-grpo")
    assert not experiment.by_type("kubernetes:log.alibabacloud.com/v1alpha1:AliyunLogConfig")
    assert not [r for r in experiment.by_type("alicloud:cs/kubernetesAddon:KubernetesAddon")]
    (job,) = experiment.by_type("kubernetes:ray.io/v1:RayJob")
    containers = [c for c in job.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]]
    assert all(any(e["name"] == RAY_LOGS_ENV for e in c["env"]) for c in containers)
    assert mark_ray_containers(mark_ray_containers(job.inputs)) == mark_ray_containers(job.inputs)


def test_single_stacks_neither_queue_nor_collect_logs():
    rec = record("dev")
    (job,) = rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert "suspend" not in job.inputs["spec"]
    assert not rec.by_type("kubernetes:scheduling.sigs.k8s.io/v1beta1:ElasticQuotaTree")


def test_a_sweeps_plan_states_one_gpu_time_its_variants_sum_to_the_cost_sections_figure(tmp_path):
    # the cost section once counted one run of a 4-variant sweep, with a GPU-hour figure the variant table disagreed on
    from components.config import STACKS_DIR
    from offline.plan import build_plan

    data = build_plan(STACKS_DIR / "Pulumi.dev-sweep.yaml", "dev-sweep", tmp_path / "dev-sweep")
    use, sweep = data["sections"]["cost"]["platform_gpu_use"], data["sections"]["sharing"]["sweep"]
    assert use["runs"] == len(sweep["variants"]) == 4
    assert sweep["gpu_hours"] == pytest.approx(use["gpu_hours"], abs=0.01)
    assert sweep["cost"] == pytest.approx(use["cost"], abs=0.01)
    per_run = use["gpu_hours"] / use["runs"]
    assert all(v["gpu_hours"] == pytest.approx(per_run, abs=0.01) for v in sweep["variants"])


# --------------------------------------------------------------------------- the platform's teams are the quota
def _experiment_on(platform_teams: dict | None, overrides: dict | None = None, stack: str = "dev-grpo",
                   as_stack: str | None = None):
    """The experiment of stack file `stack` (run as stack `as_stack`) under the mock engine, reading the shipped
    platform's outputs with `queue_teams` replaced."""
    import json as _json

    from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR
    from offline.engine import StackOutputs, run_program
    from offline.plan import stack_config
    from tests.conftest import REPO

    raw = stack_settings(stack, overrides)
    s = parse_settings(raw)
    real = record("dev-platform")
    outputs = dict(real.outputs)
    if platform_teams is not None:
        outputs["queue_teams"] = platform_teams
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    return run_program(REPO / "__main__.py", {**config, SETTINGS_KEY: _json.dumps(raw)}, secret_keys,
                       project=PROJECT, stack=as_stack or stack,
                       stack_references={s.platform_stack: StackOutputs(outputs, list(real.secret_outputs))})


def test_the_platform_exports_each_team_namespace_with_what_one_of_its_jobs_may_take():
    teams = record("dev-platform").outputs["queue_teams"]
    s = parse_settings(stack_settings("dev-platform"))
    assert set(teams) == {ns for k, t in s.queue.teams.items() for ns in t.all_namespaces(k)}
    for limit in teams.values():
        assert limit["nvidia.com/gpu"] == s.queue.teams[limit["team"]].gpus
        assert limit["cpu"] == s.gpu_pool.nodes * s.gpu_pool.cpus_per_node


def test_an_experiment_whose_rayjob_namespace_is_in_no_team_is_refused_at_preview_naming_queue_teams():
    # the multi-node default: an RDMA RayJob lives in <job.namespace>-ray, which the shipped platform does not list
    with pytest.raises(Exception, match=r"verl-dev-grpo-ray is in none of the platform .*queue.teams"):
        _experiment_on(None, {"gpu_pool": {"nodes": 2}, "job": {"host_network_cidrs": ["10.0.0.0/16"]}})
    with pytest.raises(Exception, match=r"add `verl-dev-grpo: \{gpus: N\}` under queue.teams"):
        _experiment_on({"team-b": {"team": "team-b", "nvidia.com/gpu": 8.0, "cpu": 104.0, "memory": 516 * 2**30}})
    # listed under a team's further namespaces, it is queued against that team
    rec = _experiment_on({"verl-dev-grpo": {"team": "team-b", "nvidia.com/gpu": 8.0, "cpu": 104.0,
                                            "memory": 516.0 * 2**30}})
    assert rec.outputs["queue_team"] == "team-b"


def test_plan_refuses_a_non_team_namespace_naming_the_platform_file(tmp_path, capsys):
    import json as _json

    import plan
    from components.config import SETTINGS_KEY

    raw = stack_settings("dev-grpo", {"job": {"namespace": "verl-b-dev-grpo"}})
    path = tmp_path / "Pulumi.dev-grpo.yaml"
    path.write_text(_json.dumps({"config": {SETTINGS_KEY: raw}}))
    assert plan.main(["--config-file", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "verl-b-dev-grpo" in err and "queue.teams" in err and "Pulumi.dev-platform.yaml" in err


def test_a_team_namespace_listed_twice_is_refused():
    with pytest.raises(Exception, match="namespace verl-a is in teams"):
        parse_settings(stack_settings("dev-platform", {"queue": {"teams": {
            "verl-a": {"gpus": 8}, "verl-b": {"gpus": 8, "namespaces": ["verl-a"]}}}}))


def test_min_gpus_says_it_orders_and_guarantees_nothing_because_nothing_is_preempted():
    from components.config.sharing import TeamQuota
    from components.queue import priority_class_manifests, queue_summary

    text = TeamQuota.model_fields["min_gpus"].description
    assert "reclaimed" not in text and "not a guarantee" in text
    s = parse_settings(stack_settings("dev-platform"))
    assert all(m["preemptionPolicy"] == "Never" for m in priority_class_manifests(s)), "the text depends on this"
    assert "not a guarantee" in queue_summary(s)["min_gpus"]


@pytest.mark.parametrize("mode", ["K8sJobMode", "SidecarMode", "HTTPMode"])
def test_a_jobs_quota_request_counts_kuberays_submitter(mode):
    s = parse_settings(stack_settings("dev-grpo", {"job": {"submission_mode": mode}}))
    job = _queued(s, "verl-dev-grpo")
    pods = {"cpu": 0.0, "memory": 0.0}
    for pod in _pods(job):
        for c in pod["spec"]["containers"]:
            from components.queue import quantity
            pods["cpu"] += quantity(c["resources"]["requests"]["cpu"])
            pods["memory"] += quantity(c["resources"]["requests"]["memory"])
    request = job_request(job)
    extra = (0.5, 200 * 2**20) if mode != "HTTPMode" else (0.0, 0.0)  # KubeRay v1.7.0 GetDefaultSubmitterContainer
    assert request["cpu"] == pytest.approx(pods["cpu"] + extra[0])
    assert request["memory"] == pytest.approx(pods["memory"] + extra[1])


def test_a_job_whose_pods_fill_the_team_quota_is_refused_because_the_submitter_would_not_fit():
    s = parse_settings(stack_settings("dev-grpo"))
    job = _queued(s, "verl-dev-grpo")
    pods_cpu = job_request(job)["cpu"] - 0.5
    exact = {"team": "verl-dev-grpo", "nvidia.com/gpu": 8.0, "cpu": pods_cpu, "memory": 1e15}
    with pytest.raises(Exception, match=r"needs .* of cpu \(its Ray pods plus KubeRay's submitter\)"):
        _experiment_on({"verl-dev-grpo": exact})
    with pytest.raises(Exception, match=r"needs 8 of nvidia.com/gpu .* at most 4"):
        _experiment_on({"verl-dev-grpo": {**exact, "cpu": 1e4, "nvidia.com/gpu": 4.0}})


# --------------------------------------------------------------------------- the queue admission check
def test_every_queued_rayjob_has_an_admission_check_after_it_that_may_touch_only_that_job():
    for stack in ("dev-grpo", "dev-sweep"):
        rec = record(stack)
        jobs = {r.inputs["metadata"]["name"]: r for r in rec.by_type("kubernetes:ray.io/v1:RayJob")}
        checks = [j for j in rec.by_type("kubernetes:batch/v1:Job") if j.name.endswith("-admission")]
        assert len(checks) == len(jobs)
        for check in checks:
            env = {e["name"]: e["value"] for e in check.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
            job = jobs[env["ADMIT_RAYJOB"]]
            assert job.urn in check.dependencies, f"{check.urn} must start after the RayJob it checks"
            assert env["ADMIT_NAMESPACE"] == job.inputs["metadata"]["namespace"]
            (role,) = [r for r in rec.by_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
                       if r.name == check.name + "-role"]
            rules = role.inputs["rules"]
            assert all(r.get("resourceNames") == [env["ADMIT_RAYJOB"]] for r in rules if r["apiGroups"] == ["ray.io"])
            assert sorted(v for r in rules for v in r["verbs"]) == ["get", "list", "patch"]
            # pulumi awaits the Job longer than the check's own bound: `up` fails with its message, not a timeout
            bound = int(env["ADMIT_TIMEOUT_SECONDS"])
            assert int(check.options["custom_timeouts"]["create"].rstrip("m")) * 60 > bound


def test_single_stacks_and_unqueued_experiments_run_no_admission_check():
    for rec in (record("dev"), record("dev-grpo", {"queue": {"enabled": False}})):
        assert not [j for j in rec.by_type("kubernetes:batch/v1:Job") if j.name.endswith("-admission")]


# --------------------------------------------------------------------------- logs that are really collected
def _gpu_node(s: Settings) -> dict:
    """A GPU node as the program's pool makes it: its taints, plus ACK's Lingjun taint on Lingjun nodes."""
    from components.cloud.nodepools import gpu_pool_taints
    from components.wiring import LINGJUN_TAINT_KEY

    taints = [dict(t) for t in gpu_pool_taints(s)]
    if s.gpu_pool.kind == "lingjun":
        taints.append({"key": LINGJUN_TAINT_KEY, "effect": "NoSchedule"})
    return {"metadata": {"name": "gpu-0"}, "spec": {"taints": taints}}


@pytest.mark.parametrize("stack", ["dev-grpo", "dev"])
def test_the_node_gate_fails_unless_the_log_collector_tolerates_every_gpu_node_taint(stack):
    from pipeline.node_gate import collector_gaps

    s = parse_settings(stack_settings(stack))
    nodes = {"items": [_gpu_node(s)]}
    gaps = collector_gaps(nodes, [])
    assert any("verl-ack/gpu=true:NoSchedule" in g for g in gaps)
    if s.gpu_pool.kind == "lingjun":
        assert any("node-role.alibabacloud.com/lingjun" in g for g in gaps)
    # ACK's documented logtail DaemonSet template tolerates everything (docs/facts.md); the Ray pods' own do too
    assert collector_gaps(nodes, [{"operator": "Exists"}]) == []
    assert collector_gaps(nodes, [dict(t) for t in gpu_scheduling(s).tolerations]) == []
    assert collector_gaps(nodes, [{"key": "verl-ack/gpu", "operator": "Equal", "value": "false"}])


def test_a_logging_experiments_gate_checks_the_collector_and_may_read_only_that_daemonset():
    from components.workloads.training import gate

    rec = record("dev-grpo")
    job = rec.get("kubernetes:batch/v1:Job", "train-gate")
    env = {e["name"]: e["value"] for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    s = parse_settings(stack_settings("dev-grpo"))
    assert env["GATE_COLLECTOR"] == s.logs.collector_daemonset == "kube-system/logtail-ds"
    rules = gate.cluster_role_manifest(s)["rules"]
    assert {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"], "resourceNames": ["logtail-ds"]} \
        in rules
    quiet = parse_settings(stack_settings("dev-grpo", {"logs": {"enabled": False}}))
    assert all(r["resources"] == ["nodes"] for r in gate.cluster_role_manifest(quiet)["rules"])


def test_the_collection_reaches_the_log_files_of_the_ray_session_the_pods_write():
    import posixpath

    s = parse_settings(stack_settings("dev-platform"))
    detail = aliyun_log_config_manifest(s)["spec"]["logtailConfig"]["inputDetail"]
    job = record("dev-grpo").by_type("kubernetes:ray.io/v1:RayJob")[0]
    for _, group in pod_groups(job.inputs["spec"]):
        assert "temp-dir" not in group.get("rayStartParams", {}), "Ray's default temp dir, /tmp/ray"
    written = "/tmp/ray/session_2026-12-01_21-00-00_000000_1/logs/worker-abc.out"  # Ray: <temp>/session_*/logs
    rel = posixpath.relpath(posixpath.dirname(written), detail["logPath"])
    assert not rel.startswith("..") and rel.count("/") + 1 <= detail["maxDepth"]
