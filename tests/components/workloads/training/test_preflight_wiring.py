"""The fabric preflight runs from the RayJob entrypoint before verl on multi-node stacks, from the ConfigMap the Ray
pods mount, with the stack's expectations (nodes, GPUs, memory, bus bandwidth)."""

from __future__ import annotations

import shlex

from agent_tools import verl_ack_preflight as pf
from components.workloads.training.verl_config import (
    CONFIG_DIR,
    PREFLIGHT_MODULE_FILE,
    PREFLIGHT_SOURCE,
    config_files,
)
from tests.components.workloads.training.test_rayjob import build


def child(manifest: dict) -> list[str]:
    """What the entrypoint program runs as its child (the words after its `--`), past the model prefetch's wait step
    when it runs (it execs the words after its own `--`)."""
    words = shlex.split(manifest["spec"]["entrypoint"])
    assert words[:2] == ["python3", f"{CONFIG_DIR}/verl_ack_entrypoint.py"]
    words = words[words.index("--") + 1:]
    if words[:3] == ["python3", "-m", "verl_ack_model_prefetch"]:
        words = words[words.index("--") + 1:]
    return words


def _preflight_args(manifest: dict):
    words = child(manifest)
    assert words[:3] == ["python3", "-m", "verl_ack_preflight"]
    args, then = pf.parse_args(words[3:])
    return args, then


def test_multinode_runs_the_preflight_across_both_nodes_then_verl():
    s, manifest = build("multinode")
    args, then = _preflight_args(manifest)
    assert args.ray and args.nodes == 2 and args.gpus_per_node == 8
    assert args.min_busbw_gbps == 20  # Lingjun: RDMA between the nodes
    assert args.min_gpu_memory_gib == round(0.97 * s.gpu_pool.gpu_memory_gib, 2)
    assert args.mlflow_experiment == s.training.project_name
    assert then[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert any(w.startswith("trainer.nnodes=2") for w in then)


def test_the_module_reaches_the_ray_pods_in_the_configmap_on_their_pythonpath(stack_name):
    s, manifest = build(stack_name)
    files = config_files(s)
    runs = child(manifest)[:3] == ["python3", "-m", "verl_ack_preflight"]
    assert (PREFLIGHT_MODULE_FILE in files) == runs, stack_name
    if runs:
        assert files[PREFLIGHT_MODULE_FILE] == PREFLIGHT_SOURCE.read_text()
        assert f"PYTHONPATH: {CONFIG_DIR}:" in manifest["spec"]["runtimeEnvYAML"]


def test_a_single_node_stack_starts_verl_directly_unless_asked():
    _, manifest = build("dev")
    assert child(manifest)[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    _, forced = build("dev", {"training": {"preflight": {"enabled": True, "min_busbw_gbps": 0}}})
    args, _ = _preflight_args(forced)
    assert args.nodes == 1 and args.min_busbw_gbps == 0


def test_an_ecs_pool_checks_gpus_and_completion_but_no_bandwidth_unless_set():
    _, manifest = build("existing-ecs")
    args, _ = _preflight_args(manifest)
    assert args.min_busbw_gbps == 0
    _, given = build("existing-ecs", {"training": {"preflight": {"min_busbw_gbps": 5}}})
    assert _preflight_args(given)[0].min_busbw_gbps == 5


def test_the_checkpoint_rule_still_finds_verls_checkpoint_dir_behind_the_preflight():
    from components.workloads.training.rayjob import check_rayjob

    s, manifest = build("multinode")
    check_rayjob(manifest, s.versions.kuberay, checkpoint_claim=f"{s.name}-checkpoints")
