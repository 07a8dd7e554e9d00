"""Every verl/vLLM start-up rule refuses a bad layout and passes a good one, before anything is paid for."""

import pytest

from components.config import Settings
from components.model.layout import BY_CONSTRUCTION, check_layout, resolve_layout
from tests.conftest import deep_merge, stack_settings


def settings(overrides: dict | None = None, stack: str = "dev") -> Settings:
    return Settings.model_validate(stack_settings(stack, overrides))


def errors(s: Settings) -> list:
    return [f for f in check_layout(s) if f.severity == "error"]


def fields(s: Settings) -> set[str]:
    return {f.field for f in errors(s)}


@pytest.mark.parametrize("stack", ["dev", "multinode", "existing-ecs"])
def test_shipped_stacks_pass_every_rule(stack):
    assert errors(settings(stack=stack)) == []


def test_vllm_refuses_a_rollout_tp_that_does_not_divide_the_heads_and_suggests_valid_ones():
    s = settings({"model": {"rollout_tp": 8}}, stack="multinode")
    (e,) = [f for f in errors(s) if f.field == "model.rollout_tp"]
    assert "rollout TP 8 does not divide Qwen2.5-7B-Instruct's 28 attention heads" in e.message
    assert "use 1, 2, 4" in e.message


def test_rule1_batch_times_n_must_divide_over_all_gpus():
    ok = settings({"training": {"train_batch_size": 16, "rollout_n": 16}})
    bad = settings({"training": {"train_batch_size": 3, "rollout_n": 3, "ppo_mini_batch_size": 3,
                                 "agent_num_workers": 1}})
    assert "training.train_batch_size" not in fields(ok)
    assert any("rule 1" in f.message for f in errors(bad))


def test_rule1_does_not_apply_with_dynamic_batch_sizes():
    s = settings({"training": {"train_batch_size": 3, "rollout_n": 3, "ppo_mini_batch_size": 3,
                               "agent_num_workers": 1, "use_dynamic_bsz": True}})
    assert not any("rule 1" in f.message for f in errors(s))


def test_rule3_mini_batch_cannot_exceed_the_train_batch():
    bad = settings({"training": {"ppo_mini_batch_size": 32}})
    assert any("rule 3" in f.message and f.field == "training.ppo_mini_batch_size" for f in errors(bad))


def test_rule5_mini_batch_must_split_evenly_over_data_parallel_ranks():
    # 16 GPUs, mini 3 x n 8 = 24 is not a multiple of 16: verl would floor it silently.
    bad = settings({"training": {"ppo_mini_batch_size": 3}}, stack="multinode")
    assert any("rule 5" in f.message for f in errors(bad))


def test_rule5_micro_batch_must_divide_the_per_gpu_mini_batch():
    ok = settings({"model": {"ppo_micro_batch_size_per_gpu": 4}})  # mini per GPU is 16
    bad = settings({"model": {"ppo_micro_batch_size_per_gpu": 3}})
    assert "model.ppo_micro_batch_size_per_gpu" not in fields(ok)
    assert "model.ppo_micro_batch_size_per_gpu" in fields(bad)


def test_rule7_rollout_tp_must_divide_the_world():
    bad = settings({"model": {"rollout_tp": 16}, "gpu_pool": {"nodes": 1}})
    assert any("world % TP" in f.message for f in errors(bad))


def test_rule7_a_tp_group_spanning_nodes_must_span_whole_nodes():
    # 1.5B allows TP 6 (12 heads, 2 KV heads); 3 nodes x 4 GPUs = 12 GPUs: 6 does not fit in a 4-GPU node.
    base = {"model": {"preset": "qwen2.5-1.5b-instruct", "rollout_tp": 6},
            "gpu_pool": {"nodes": 3, "gpus_per_node": 4},
            "training": {"train_batch_size": 12, "ppo_mini_batch_size": 6, "rollout_n": 8, "agent_num_workers": 4}}
    bad = settings(base)
    assert any("spans whole nodes" in f.message for f in errors(bad))
    good = settings(deep_merge(base, {"model": {"rollout_tp": 4}}))
    assert "model.rollout_tp" not in fields(good)


def test_rule8_agent_workers_must_split_the_batch_evenly():
    bad = settings({"training": {"agent_num_workers": 7}})
    assert "training.agent_num_workers" in fields(bad)


def test_rule14_the_train_set_must_hold_at_least_one_batch():
    bad = settings({"dataset": {"train_subset": 8}})
    e = [f for f in errors(bad) if "rule 14" in f.message]
    assert e and e[0].field == "training.train_batch_size"


def test_rule15_grpo_needs_more_than_one_sample_per_prompt():
    bad = settings({"training": {"rollout_n": 1, "train_batch_size": 16, "ppo_mini_batch_size": 8}})
    assert "training.rollout_n" in fields(bad)
    gae = settings({"training": {"algorithm": "gae", "rollout_n": 1}})
    assert "training.rollout_n" not in fields(gae)


def test_rule16_each_gpu_node_needs_three_ray_cpus_per_gpu():
    bad = settings({"gpu_pool": {"cpus_per_node": 24}})
    (e,) = [f for f in errors(bad) if f.field == "gpu_pool.cpus_per_node"]
    # 25 for verl + 4 for the node's daemons + 1 for the model prefetch (which the message names, and how to drop).
    assert "rule 16" in e.message and "30 vCPUs" in e.message and "job.model_prefetch: false" in e.message
    no_prefetch = settings({"gpu_pool": {"cpus_per_node": 24}, "job": {"model_prefetch": False}})
    (e,) = [f for f in errors(no_prefetch) if f.field == "gpu_pool.cpus_per_node"]
    assert "29 vCPUs" in e.message and "prefetch" not in e.message


def test_sequence_parallel_must_divide_the_heads():
    bad = settings({"training": {"ulysses_sequence_parallel_size": 3}})
    assert "training.ulysses_sequence_parallel_size" in fields(bad)


def test_every_research_rule_is_either_checked_or_satisfied_by_construction():
    checked = {"1", "3", "5", "7", "8", "14", "15", "16"}
    by_construction = {k.split()[0] for k in BY_CONSTRUCTION}
    numbered = {n for k in by_construction for n in k.split("/")}
    assert {str(i) for i in range(1, 17)} - checked - numbered == set()


# ---------------------------------------------------------------------------------------- memory fit
def test_memory_estimate_fits_the_tutorial_layout():
    s = settings()
    m = resolve_layout(s).memory
    assert m.peak_gib < s.gpu_pool.gpu_memory_gib * 0.9
    assert not [f for f in check_layout(s) if f.field.startswith("gpu_pool.gpu_memory")]


def test_72b_on_eight_24_gib_gpus_is_refused_before_anything_is_paid_for():
    s = settings({"model": {"preset": "qwen2.5-72b-instruct"},
                  "gpu_pool": {"gpu_memory_gib": 24}})
    errs = errors(s)
    assert any(f.field == "gpu_pool.gpu_memory_gib" and "training peak" in f.message for f in errs)
    assert any(f.field == "model.gpu_memory_utilization" and "does not fit" in f.message for f in errs)


def test_72b_fits_on_four_nodes_of_eight_80_gib_gpus():
    s = settings({"model": {"preset": "qwen2.5-72b-instruct"}, "gpu_pool": {"nodes": 4},
                  "training": {"train_batch_size": 32, "ppo_mini_batch_size": 16}}, stack="multinode")
    assert [f for f in errors(s) if f.field.startswith(("gpu_pool", "model"))] == []


def test_a_layout_near_the_edge_warns_without_refusing():
    s = settings({"model": {"gpu_memory_utilization": 0.85}})
    found = check_layout(s)
    assert any(f.severity == "warning" and f.field == "gpu_pool.gpu_memory_gib" for f in found)
    assert not [f for f in found if f.severity == "error"]


def test_offloading_lowers_the_rollout_peak():
    on = resolve_layout(settings({"model": {"actor_param_offload": True, "actor_optimizer_offload": True}}))
    off = resolve_layout(settings({"model": {"actor_param_offload": False, "actor_optimizer_offload": False}}))
    assert on.memory.rollout_gib < off.memory.rollout_gib
    assert on.memory.train_gib == off.memory.train_gib  # verl reloads everything for the update


def test_offloaded_state_must_fit_in_host_memory():
    s = settings({"model": {"preset": "qwen2.5-72b-instruct"},
                  "gpu_pool": {"nodes": 4, "memory_gib_per_node": 64},
                  "training": {"train_batch_size": 32, "ppo_mini_batch_size": 16}}, stack="multinode")
    assert "gpu_pool.memory_gib_per_node" in fields(s)


def test_the_head_needs_the_rule16_cpus_beside_kuberays_submitter_sidecar():
    # 30 vCPUs leave 25 for Ray (4 for the node's daemons, 1 for the model prefetch), exactly verl's 3 x 8 + 1; the
    # SidecarMode submitter takes one of the head's.
    tight = settings({"gpu_pool": {"cpus_per_node": 30}})
    (e,) = [f for f in errors(tight) if f.field == "gpu_pool.cpus_per_node"]
    assert "submitter" in e.message and "31 vCPUs" in e.message and "K8sJobMode" in e.message
    k8s_mode = settings({"gpu_pool": {"cpus_per_node": 30}, "job": {"submission_mode": "K8sJobMode"}})
    assert not [f for f in errors(k8s_mode) if f.field == "gpu_pool.cpus_per_node"]
