"""The cost ESTIMATE: a hand-computed run, price overrides, idle cost after the job, and its labelling in the
plan (its only home)."""

from __future__ import annotations

import json

import pytest

from components.config import DEFAULT_PRICES_USD, Settings, SettingsError
from components.model import load_stack, parse_settings
from offline.report.cost import (
    CHECKPOINT_BYTES_PER_PARAM,
    HOURS_PER_MONTH,
    cost_section,
    estimate_cost,
    training_steps,
)
from offline.report.latency import Timeline
from tests.components.cloud.test_common import NEW_VPC
from tests.conftest import record, stack_settings

TIMELINE = Timeline(setup_minutes=25, gpu_pool_start_minutes=5, gpu_pool_ready_minutes=15, source="test")
PRICES = {"ecs.gn7i-c16g1.4xlarge": 2.0, "ecs.g7.2xlarge": 0.5, "disk_gib_month": 0.1, "oss_gib_month": 0.02}


def settings(overrides: dict | None = None, stack: str = "existing-ecs") -> Settings:
    return parse_settings(stack_settings(stack, overrides))


def small() -> Settings:
    """existing-ecs: 2 ECS A10 nodes, 2 system nodes, 2 sandbox nodes, existing cluster (no ACK fee, NAT or ALB),
    0.5B model."""
    return settings({"cost": {"prices": PRICES, "seconds_per_step": 360, "scale_down_minutes": 10},
                     "training": {"total_training_steps": 5, "save_freq": 5}})


def test_a_small_run_matches_the_hand_computed_total():
    s = small()
    est = estimate_cost(s, TIMELINE)
    # Run: setup 25 + 5 steps x 6 min + TTL 300 s = 60 min -> 1 hour the stack is up.
    assert est.training_minutes == 30 and est.ttl_minutes == 5 and est.run_hours == pytest.approx(1.0)
    # ECS GPU nodes bill from pool creation (min 5) to 10 min after the run: 65 min on 2 nodes.
    gpu = 2 * 65 / 60 * 2.0
    gpu_disks = 2 * 200 * (65 / 60) / 730 * 0.1
    system = 2 * 1.0 * 0.5
    system_disks = 2 * 120 * 1.0 / 730 * 0.1
    # The sandboxes' own pool (the default sandbox.dedicated_pool): 2 x ecs.g7.2xlarge with 120 GiB disks.
    sandbox, sandbox_disks = system, system_disks
    tracking_disk = 20 * 1.0 / 730 * 0.1
    # OSS: 10 MiB dataset + P x 2 B model + one checkpoint of P x 16 B (model+optimizer+extra+hf_model), with
    # P = Qwen2.5-0.5B's 494,032,768 parameters (its config.json's shapes; the card rounds to 0.49 B).
    p = 494_032_768
    oss_gib = 10 / 1024 + p * 2 / 2**30 + p * 16 / 2**30
    oss = oss_gib * 1.0 / 730 * 0.02
    assert est.gpu_node_hours == pytest.approx(2 * 65 / 60)
    assert sum(est.storage_gib.values()) == pytest.approx(oss_gib)
    assert est.total == pytest.approx(gpu + gpu_disks + system + system_disks + sandbox + sandbox_disks
                                      + tracking_disk + oss)
    assert est.total == pytest.approx(6.4615, abs=1e-4)
    assert HOURS_PER_MONTH == 730 and sum(CHECKPOINT_BYTES_PER_PARAM.values()) == 16


def test_overriding_a_price_changes_the_total_by_exactly_that_line():
    base = estimate_cost(small(), TIMELINE)
    dearer = estimate_cost(settings({"cost": {"prices": {**PRICES, "ecs.gn7i-c16g1.4xlarge": 3.0},
                                              "seconds_per_step": 360},
                                     "training": {"total_training_steps": 5, "save_freq": 5}}), TIMELINE)
    assert dearer.total - base.total == pytest.approx(base.gpu_node_hours * 1.0)
    lingjun = load_stack("dev")
    t = Timeline(60, 20, 30, "test")
    cheap = estimate_cost(lingjun, t)
    dear = estimate_cost(parse_settings(stack_settings("dev", {"cost": {"prices": {"lingjun_node_hour": 40.0}}})), t)
    step = 40.0 - DEFAULT_PRICES_USD["lingjun_node_hour"]
    assert dear.total - cheap.total == pytest.approx(cheap.gpu_node_hours * step)


def test_the_ecs_gpu_pool_costs_nothing_idle_at_min_nodes_zero_and_its_price_above():
    idle = {ln.price_key: ln.cost for ln in estimate_cost(small(), TIMELINE).idle_lines if "GPU" in ln.item}
    assert idle == {"ecs.gn7i-c16g1.4xlarge": 0, "disk_gib_month": 0}
    warm = settings({"gpu_pool": {"ecs": {"min_nodes": 1}}, "cost": {"prices": PRICES}})
    idle = {ln.price_key: ln.cost for ln in estimate_cost(warm, TIMELINE).idle_lines if "GPU" in ln.item}
    assert idle == {"ecs.gn7i-c16g1.4xlarge": pytest.approx(2.0), "disk_gib_month": pytest.approx(200 / 730 * 0.1)}


def test_lingjun_nodes_bill_while_they_exist_so_they_dominate_the_idle_cost():
    s = load_stack("multinode")
    est = estimate_cost(s, Timeline(60, 20, 30, "test"))
    (gpu,) = [ln for ln in est.idle_lines if ln.price_key == "lingjun_node_hour"]
    assert gpu.cost == pytest.approx(2 * s.cost.prices["lingjun_node_hour"])
    assert est.idle_per_hour > gpu.cost  # plus cluster fee, NAT, ALB, system pool


def test_a_new_cluster_adds_the_ack_fee_nat_eip_and_the_sandbox_domain_adds_the_alb():
    keys = {ln.price_key for ln in estimate_cost(settings(NEW_VPC, "dev"), TIMELINE).lines}
    assert {"ack.pro.small", "nat_gateway_hour", "eip_hour", "eip_egress_gib", "alb_hour", "alb_lcu_hour"} <= keys
    # A Lingjun stack is built in its nodes' VPC: no NAT or EIP of its own bills.
    keys = {ln.price_key for ln in estimate_cost(load_stack("dev"), TIMELINE).lines}
    assert "ack.pro.small" in keys and not keys & {"nat_gateway_hour", "eip_hour"}
    keys = {ln.price_key for ln in estimate_cost(small(), TIMELINE).lines}
    assert not keys & {"ack.pro.small", "nat_gateway_hour", "alb_hour"}


def test_the_sandbox_pool_is_priced_like_the_system_pool_and_only_where_it_exists():
    lines = {ln.key: ln for ln in estimate_cost(small(), TIMELINE).lines}
    assert lines["sandbox_nodes"].price_key == "ecs.g7.2xlarge" and lines["sandbox_nodes"].quantity == 2 * 1.0
    assert lines["sandbox_nodes"].cost == pytest.approx(2 * 0.5)
    assert lines["sandbox_disks"].cost == pytest.approx(2 * 120 / 730 * 0.1)
    idle = {ln.key: ln.cost for ln in estimate_cost(small(), TIMELINE).idle_lines}
    assert idle["sandbox_nodes"] == pytest.approx(2 * 0.5), "a stack left up keeps billing its sandbox nodes"
    for off in ({"sandbox": {"dedicated_pool": None}}, {"sandbox": {"enabled": False}}):
        s = settings({**off, "cost": {"prices": PRICES}, "training": {"logger": ["console"]}})
        assert not {"sandbox_nodes", "sandbox_disks"} & {ln.key for ln in estimate_cost(s, TIMELINE).lines}, off
    assert not any(ln.key.startswith("sandbox_") for ln in estimate_cost(load_stack("dev-grpo"), TIMELINE).lines)


def test_steps_come_from_epochs_when_total_training_steps_is_empty():
    s = load_stack("multinode")  # 7473 rows, batch 64, one epoch; verl drops the last partial batch
    assert s.training.total_training_steps is None
    assert training_steps(s) == 7473 // 64 == 116


def test_a_missing_instance_price_marks_the_estimate_incomplete_instead_of_failing():
    s = settings({"gpu_pool": {"ecs": {"instance_types": ["ecs.gn8v.8xlarge"]}}})
    est = estimate_cost(s, TIMELINE)
    assert est.missing_prices == ["ecs.gn8v.8xlarge"]
    assert est.as_output()["complete"] is False
    assert "**incomplete**: no price for ['ecs.gn8v.8xlarge']" in cost_section(s, record("existing-ecs")).markdown


def test_unknown_price_keys_and_cny_without_every_named_price_are_refused():
    with pytest.raises(SettingsError, match="unknown price key"):
        settings({"cost": {"prices": {"nat_hour": 1}}})
    with pytest.raises(SettingsError, match="built-in prices are USD"):
        settings({"cost": {"currency": "CNY"}})
    with pytest.raises(SettingsError, match="prices_taken_on"):
        settings({"cost": {"prices_taken_on": "June 2026"}})


def test_the_dev_plan_section_is_labelled_as_an_estimate_and_prints_its_assumptions():
    s = load_stack("dev")
    sec = cost_section(s, record("dev"))
    assert sec.key == "cost" and "ESTIMATE" in sec.title
    assert "**ESTIMATE, not a quote." in sec.markdown
    assert "override them with your account's prices" in sec.markdown
    assert "Assumptions:" in sec.markdown and "training step(s)" in sec.markdown
    assert sec.data["estimate"] is True and sec.data["total"] > 0


def test_one_estimate_the_plan_json_cost_is_the_recorded_graph_and_no_stack_output_repeats_it(stack_name, tmp_path):
    # Two copies of the estimate once disagreed (the stack output used a hand-coded chain); now the plan's
    # figure is computed from the recorded graph only and the program exports none.
    from plan import main

    assert main(["--stack", stack_name, "--out", str(tmp_path)]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    s = load_stack(stack_name)
    expected = json.loads(json.dumps(cost_section(s, record(stack_name)).data))
    cost = plan["sections"]["cost"]
    assert cost == expected and cost["estimate"] is True and cost["currency"] == "USD"
    assert not any("estimate" in key or "cost" in key for key in plan["outputs"])


def _plan(stack: str, tmp_path) -> dict:
    from components.config import STACKS_DIR
    from offline.plan import build_plan

    return build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, tmp_path / stack)


def test_a_platform_is_priced_per_hour_day_and_month_while_it_lives_not_as_a_training_run(tmp_path):
    data = _plan("dev-platform", tmp_path)
    cost, md = data["sections"]["cost"], (tmp_path / "dev-platform" / "plan.md").read_text()
    section = md.split("## Cost (ESTIMATE)", 1)[1].split("\n## ", 1)[0]
    assert "training step" not in section and "Run total" not in section and "Ray cluster" not in section
    total, services, gpu = cost["total"], cost["services"], cost["gpu_pool"]
    assert total["per_hour"] == pytest.approx(services["per_hour"] + gpu["per_hour"], abs=0.01)
    assert total["per_day"] == pytest.approx(24 * total["per_hour"], abs=24 * 0.0051)  # per_hour is rounded
    assert total["per_month"] == pytest.approx(HOURS_PER_MONTH * total["per_hour"], abs=HOURS_PER_MONTH * 0.0051)
    # dev-platform owns the Lingjun pool: the node bills while it exists, busy or idle.
    assert gpu["per_hour"] == pytest.approx(DEFAULT_PRICES_USD["lingjun_node_hour"])
    assert gpu["lines"] == ["gpu_nodes"] and "gpu_nodes" not in services["lines"]
    idle = {b["busy_percent"]: b["idle_per_month"] for b in cost["gpu_idle_by_busy_share"]}
    assert idle[0] == gpu["per_month"] and idle[100] == 0 and idle[50] == pytest.approx(gpu["per_month"] / 2, abs=0.01)
    assert f"{total['per_month']:,.2f} USD per month" in section


def test_an_experiment_on_the_platforms_pool_shows_the_gpu_time_it_uses_its_cost_and_who_is_billed(tmp_path):
    data = _plan("dev-grpo", tmp_path)
    cost, lat = data["sections"]["cost"], data["sections"]["latency"]
    use = cost["platform_gpu_use"]
    assert cost["total"] == pytest.approx(cost["lines"]["oss"]["cost"]), "the stack itself bills only its OSS data"
    # Its Ray pods hold the platform's node from their start through training and the finished cluster's TTL.
    held = lat["first_step_minutes"] - lat["pods_start_minutes"] + cost["training_minutes"] + cost["ttl_minutes"]
    assert use["minutes"] == pytest.approx(held, abs=0.02) and use["minutes"] > cost["training_minutes"]
    assert use["node_hours"] == pytest.approx(held / 60, abs=1e-3) and use["gpu_hours"] == pytest.approx(8 * held / 60,
                                                                                                      abs=0.01)
    assert use["cost"] == pytest.approx(held / 60 * DEFAULT_PRICES_USD["lingjun_node_hour"], abs=0.01) and use["cost"] > 0
    assert use["billed_to"].endswith("/dev-platform") and use["adds_to_platform_bill"] is False
    md = (tmp_path / "dev-grpo" / "plan.md").read_text()
    assert f"= {use['cost']:,.2f} USD" in md and f"billed to the platform stack `{use['billed_to']}`" in md


def test_an_experiment_states_one_setup_time_its_time_section_and_its_cost_use_the_same_path(tmp_path):
    data = _plan("dev-grpo", tmp_path)
    lat, cost = data["sections"]["latency"], data["sections"]["cost"]
    assert cost["setup_minutes"] == lat["first_step_minutes"]
    md = (tmp_path / "dev-grpo" / "plan.md").read_text()
    assert f"setup to the first step {lat['first_step_minutes']:.1f} min" in md


@pytest.mark.parametrize("stack, nodes, mostly_avoidable", [("multinode", 2, True), ("dev", 1, False)])
def test_idle_gpu_minutes_before_the_first_step_are_priced_and_split_into_the_avoidable_part(stack, nodes,
                                                                                              mostly_avoidable, tmp_path):
    data = _plan(stack, tmp_path)
    lat, gi = data["sections"]["latency"], data["sections"]["cost"]["gpu_idle_before_first_step"]
    price = DEFAULT_PRICES_USD["lingjun_node_hour"] * nodes  # every node of the pool idles
    assert gi["minutes"] == lat["gpu_idle_minutes"]
    assert gi["cost"] == pytest.approx(lat["gpu_idle_minutes"] / 60 * price, abs=0.01)
    # multinode pulls the Docker Hub image through the NAT: most of its idle time is that pull, which an in-region
    # image removes; dev pulls from the in-region registry, so little is avoidable. The job's own start from an
    # in-region image is never counted as avoidable.
    assert gi["avoidable_minutes"] == pytest.approx(max(0.0, gi["minutes"] - gi["own_start_minutes"]), abs=0.02)
    assert (gi["avoidable_minutes"] > gi["minutes"] / 2) is mostly_avoidable
    assert gi["avoidable_cost"] == pytest.approx(gi["avoidable_minutes"] / 60 * price, abs=0.01)
