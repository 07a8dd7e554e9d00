"""The model prefetch as the program renders it (job.model_prefetch): every Ray pod copies the staged model into a
memory-backed directory beside the Ray container, the pod still fits its node, verl reads the copy (or the OSS
volume when the wait step falls back), and the time model follows what the RayJob holds."""

from __future__ import annotations

import json
import shlex

import pytest

from agent_tools import verl_ack_model_prefetch as mp
from components.config import REPO_ROOT, SettingsError
from components.config.estimates import LatencySettings
from components.model.layout import (
    NODE_RESERVED_CPUS,
    NODE_RESERVED_MEMORY_GIB,
    PREFETCH_CPUS,
    PREFETCH_EXTRA_GIB,
    PREFETCH_MARGIN,
    PREFETCH_PROCESS_GIB,
    SUBMITTER_CPU_LIMIT,
    SUBMITTER_MEMORY_LIMIT_GIB,
    resolve_layout,
)
from components.model.wait import mbit_minutes, model_bytes
from components.wiring import completion_marker, model_path
from components.workloads.training.rayjob import MODEL_PREFETCH_CONTAINER, pod_groups
from components.workloads.training.verl_config import config_files
from components.workloads.training.volumes import model_dir, oss_volumes
from offline.report.latency import critical_path
from offline.report.latency.kinds import submit_minutes
from offline.report.latency.path import model_read_phase
from tests.components.workloads.training.test_rayjob import build, settings_for
from tests.conftest import record

MEASURED = REPO_ROOT / "components" / "model" / "model_read_measured.json"
RUN = REPO_ROOT / "components" / "model" / "prefetch_measured.json"  # tools/measure_prefetch.py on the device


def _quantity_gib(text: str) -> int:
    assert text.endswith("Gi"), text
    return int(text[:-2])


def _wait_args(manifest: dict):
    words = shlex.split(manifest["spec"]["entrypoint"])
    words = words[words.index("--") + 1:]
    assert words[:4] == ["python3", "-m", "verl_ack_model_prefetch", "wait"]
    return mp.parse(words[3:])


def test_every_ray_pod_copies_the_model_the_wait_step_and_verl_name(stack_name):
    s, manifest = build(stack_name)
    L = resolve_layout(s)
    assert L.model_copy_gib, f"{stack_name}: the shipped stacks all prefetch"
    (wait, command) = _wait_args(manifest)
    assert wait.nodes == L.nodes and wait.source == model_dir(s)
    # The wait allows at least the modelled copy (the model at oss_read_mbps) before verl reads OSS instead.
    assert wait.timeout_seconds >= mbit_minutes(model_bytes(s), s.latency.oss_read_mbps) * 60
    # verl reads the copy; the fallback rewrites exactly this word.
    assert mp.with_source(command, wait.dest, wait.source) != command
    # The marker the copier reads through the mount is the object the staging Job writes last.
    models = oss_volumes(s)["models"]
    assert mp.marker_of(wait.source) == models.path_of(completion_marker(model_path(s)))
    assert model_bytes(s) <= L.model_copy_gib * 2**30  # the bf16 weights fit the copy's directory
    for where, group in pod_groups(manifest["spec"]):
        pod = group["template"]["spec"]
        ray, *others = pod["containers"]
        (prefetch,) = [c for c in others if c["name"] == MODEL_PREFETCH_CONTAINER]
        args, _ = mp.parse(prefetch["command"][2:])
        assert (args.action, args.source, args.dest) == ("copy", wait.source, wait.dest), where
        assert args.max_gib == L.model_copy_gib  # the copier refuses what its memory limit cannot hold
        assert prefetch["image"] == ray["image"]  # on the node already: no second pull
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["name"]: m for m in prefetch["volumeMounts"]}
        copy = volumes[mounts["model-copy"]["name"]]["emptyDir"]
        assert copy == {"medium": "Memory", "sizeLimit": f"{L.model_copy_gib}Gi"}
        assert mounts["models"]["readOnly"] is True and not mounts["model-copy"].get("readOnly")
        ray_mounts = {m["name"]: m for m in ray["volumeMounts"]}
        assert ray_mounts["model-copy"]["readOnly"] is True
        assert wait.dest.startswith(ray_mounts["model-copy"]["mountPath"] + "/")
        assert wait.source.startswith(mounts["models"]["mountPath"] + "/")
        # The copy's pages count against the copier's limit (emptyDir medium Memory): the copy plus its process.
        limits = prefetch["resources"]["limits"]
        assert prefetch["resources"]["requests"] == limits
        assert _quantity_gib(limits["memory"]) > L.model_copy_gib
        # The whole pod, KubeRay's SidecarMode submitter on the head included, still fits the node's share.
        head = where.endswith("headGroupSpec")
        sidecar = head and s.job.submission_mode == "SidecarMode"
        memory = sum(_quantity_gib(c["resources"]["limits"]["memory"]) for c in pod["containers"])
        cpus = sum(int(c["resources"]["limits"]["cpu"]) for c in pod["containers"])
        assert memory + (SUBMITTER_MEMORY_LIMIT_GIB if sidecar else 0) == (
            s.gpu_pool.memory_gib_per_node - NODE_RESERVED_MEMORY_GIB), where
        assert cpus + (SUBMITTER_CPU_LIMIT if sidecar else 0) == s.gpu_pool.cpus_per_node - NODE_RESERVED_CPUS, where
    assert "verl_ack_model_prefetch.py" in config_files(s)


def test_turned_off_nothing_of_it_is_rendered_and_verl_reads_the_oss_volume():
    s, manifest = build("dev", {"job": {"model_prefetch": False}})
    assert resolve_layout(s).model_copy_gib == 0
    assert "verl_ack_model_prefetch" not in manifest["spec"]["entrypoint"]
    assert f"actor_rollout_ref.model.path={model_dir(s)}" in manifest["spec"]["entrypoint"].split(" ")
    for _, group in pod_groups(manifest["spec"]):
        pod = group["template"]["spec"]
        assert [c["name"] for c in pod["containers"]] == ["ray-head"]
        assert "model-copy" not in {v["name"] for v in pod["volumes"]}
    assert "verl_ack_model_prefetch.py" not in config_files(s)


def test_left_empty_it_runs_only_where_the_copy_fits_a_quarter_of_the_pod():
    # existing-ecs: 60 GiB nodes leave the Ray pod 44 GiB; a 12 GiB copy + 1 GiB copier is more than a quarter.
    s = settings_for("existing-ecs", {"job": {"model_prefetch_gib": 12}})
    assert resolve_layout(s).model_copy_gib == 0
    assert "verl_ack_model_prefetch" not in build("existing-ecs", {"job": {"model_prefetch_gib": 12}})[1]["spec"][
        "entrypoint"]
    assert resolve_layout(settings_for("existing-ecs", {"job": {"model_prefetch_gib": 10}})).model_copy_gib == 10


def test_asked_for_where_it_would_take_half_the_pod_it_is_refused_at_preview_naming_the_fix():
    with pytest.raises(SettingsError, match=r"job.model_prefetch: .*turn job.model_prefetch off"):
        settings_for("existing-ecs", {"job": {"model_prefetch": True, "model_prefetch_gib": 22}})
    assert resolve_layout(settings_for("existing-ecs", {"job": {"model_prefetch": True, "model_prefetch_gib": 21}}))


def test_a_model_published_in_fp32_gets_the_size_it_is_given():
    s = settings_for("dev", {"job": {"model_prefetch_gib": 20}})
    assert resolve_layout(s).model_copy_gib == 20


# --------------------------------------------------------------------------------------------- the time model
def test_the_copy_overlaps_ray_start_and_submission_and_verl_waits_only_for_what_outlasts_them():
    s = settings_for("dev")
    L = s.latency
    window = L.ray_start_minutes + submit_minutes(s)
    oss = mbit_minutes(model_bytes(s), L.oss_read_mbps)
    local = mbit_minutes(model_bytes(s), L.local_read_mbps)
    assert oss < window  # the 3B model: the whole copy hides behind Ray's start
    read = model_read_phase(s, prefetched=True)
    assert read["copy_wait_minutes"] == 0 and read["minutes"] == pytest.approx(local)
    slow = settings_for("dev", {"latency": {"oss_read_mbps": 50}})
    slow_read = model_read_phase(slow, prefetched=True)
    slow_oss = mbit_minutes(model_bytes(slow), 50)
    assert slow_read["copy_wait_minutes"] == pytest.approx(slow_oss - window)
    assert slow_read["minutes"] < model_read_phase(slow, prefetched=False)["minutes"]  # never slower than no copy
    assert model_read_phase(s, prefetched=False)["minutes"] == pytest.approx(oss)


def test_the_plan_lists_the_copys_read_rate_among_its_assumptions_only_where_the_pods_copy():
    from offline.report.latency import latency_section

    on = latency_section(settings_for("dev"), record("dev")).data["assumptions"]
    off_s = settings_for("dev", {"job": {"model_prefetch": False}})
    off = latency_section(off_s, record("dev", {"job": {"model_prefetch": False}})).data["assumptions"]
    assert "local_read_mbps" in on and "local_read_mbps" not in off and "oss_read_mbps" in off


def test_the_model_follows_the_recorded_rayjob_not_the_setting():
    on, off = record("dev"), record("dev", {"job": {"model_prefetch": False}})
    s, s_off = settings_for("dev"), settings_for("dev", {"job": {"model_prefetch": False}})
    a, b = critical_path(on, s), critical_path(off, s_off)
    assert a.model_read["source"].startswith("pod memory copy") and b.model_read["source"] == "OSS volume"
    saved = b.model_read["minutes"] - a.model_read["minutes"]
    assert saved > 0
    assert b.phases["verl init and model load"] - a.phases["verl init and model load"] == pytest.approx(saved)


def test_the_copys_read_rate_is_below_what_the_device_measured_for_a_3b_checkpoint_in_tmpfs():
    measured = json.loads(MEASURED.read_text())
    assert measured["complete"] and measured["checkpoint"]["total_bytes"] == pytest.approx(
        model_bytes(settings_for("dev")), rel=0.01)  # the 3B preset's bf16 weights
    # The raw read moves every byte (the loaders map the file and copy nothing); the default is well below it.
    raw = measured["medians"]["tmpfs_raw_read"]["Mbit_per_s"]
    assert LatencySettings().local_read_mbps <= raw / 4


def test_the_docs_state_the_prefetchs_sizes_and_rates_as_the_code_and_the_measurement_have_them():
    section = " ".join((REPO_ROOT / "docs" / "training.md").read_text().split("## Model prefetch")[1]
                       .split("\n## ")[0].split())
    assert f"{PREFETCH_CPUS} CPU and the copy's size plus {PREFETCH_PROCESS_GIB} GiB of memory" in section
    assert f"the bf16 weights + {round((PREFETCH_MARGIN - 1) * 100)} % + {PREFETCH_EXTRA_GIB} GiB" in section
    raw = json.loads(MEASURED.read_text())["medians"]["tmpfs_raw_read"]["Mbit_per_s"]
    (row,) = [r for r in (REPO_ROOT / "docs" / "latency.md").read_text().splitlines()
              if r.startswith("| `local_read_mbps` |")]
    assert f"| {LatencySettings().local_read_mbps:g} Mbit/s |" in row and f"{raw:,.0f} Mbit/s" in row
    s, manifest = build("dev")
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    copier = next(c for c in head if c["name"] == MODEL_PREFETCH_CONTAINER)
    # The dev stack file's comment on the head pod's shares.
    text = (REPO_ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    assert (f"model prefetch ({copier['resources']['limits']['cpu']} CPU / {copier['resources']['limits']['memory']})"
            in text)
    assert f"its Ray container gets {head[0]['resources']['limits']['cpu']} / {head[0]['resources']['limits']['memory']}" in text


def test_the_plans_training_section_says_where_verl_reads_the_weights_from_the_recorded_job():
    from offline.report.training import training_section

    s = settings_for("dev")
    on = training_section(s, record("dev"))
    assert on.data["model_prefetch"] and on.data["model_read_path"].startswith("/mnt/model-copy/")
    assert "model prefetch" in on.markdown and on.data["model_read_path"] in on.markdown
    off_s = settings_for("dev", {"job": {"model_prefetch": False}})
    off = training_section(off_s, record("dev", {"job": {"model_prefetch": False}}))
    assert not off.data["model_prefetch"] and off.data["model_read_path"] == model_dir(off_s)
    assert "model prefetch" not in off.markdown


def test_on_the_gpu_machine_the_program_ran_as_the_pods_run_it_and_the_model_charges_more_than_it_took():
    run = json.loads(RUN.read_text())
    s = settings_for("dev")
    assert run["complete"] and run["checkpoint"]["total_bytes"] == pytest.approx(model_bytes(s), rel=0.01)
    copier = run["copier"]
    assert copier["marker_written"] and copier["exit_code_after_sigterm"] == 0
    # The copier is not what limits the copy: it outran the OSS rate the model gives the copy, from a local disk.
    assert run["medians"]["copier_disk_to_tmpfs"]["Mbit_per_s"] > s.latency.oss_read_mbps
    # Behind the wait step the loader got the copy, and through the fallback the source; both loaded on the GPU.
    assert all(r["device"] == "cuda" and r["path"].startswith("/dev/shm/") for r in run["gpu_load_from_copy"])
    assert all(r["path"].startswith("/var/tmp/") and "WARNING" in r["wait_log"][-1]
               for r in run["gpu_load_from_disk_cold_via_fallback"])
    # The modelled read of the copy is longer than the whole measured load onto the GPU.
    modelled_s = mbit_minutes(model_bytes(s), s.latency.local_read_mbps) * 60
    assert modelled_s > run["medians"]["gpu_load_from_copy"]["seconds"]
    (row,) = [r for r in (REPO_ROOT / "docs" / "latency.md").read_text().splitlines()
              if r.startswith("| `local_read_mbps` |")]
    assert f"{run['medians']['gpu_load_from_copy']['Mbit_per_s']:,.0f} Mbit/s" in row

    (fact,) = [r for r in (REPO_ROOT / "docs" / "facts.md").read_text().splitlines()
               if r.startswith("| The prefetch program as the pods run it")]
    m = run["medians"]
    for figure in (f"{m['copier_disk_to_tmpfs']['Mbit_per_s']:,.0f} Mbit/s", f"{copier['seconds_to_exit'] * 1000:.0f} ms",
                   f"{m['gpu_load_from_copy']['seconds']:.2f} s", f"{m['gpu_load_from_copy']['Mbit_per_s']:,.0f} Mbit/s",
                   f"{m['gpu_load_from_disk_cold']['seconds']:.2f} s"):
        assert figure in fact, figure
    (tmpfs,) = [r for r in (REPO_ROOT / "docs" / "facts.md").read_text().splitlines()
                if r.startswith("| A 3B bf16 checkpoint")]
    raw = json.loads(MEASURED.read_text())["medians"]["tmpfs_raw_read"]["Mbit_per_s"]
    assert f"{raw:,.0f} Mbit/s" in tmpfs
