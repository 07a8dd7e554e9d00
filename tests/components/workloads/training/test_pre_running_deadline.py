"""preRunningDeadlineSeconds is derived per stack from the modelled wait between the RayJob's creation and its Ray
cluster being Ready (components/model/wait.py), with a margin, instead of a constant hour."""

from __future__ import annotations

import math

import pytest

from components.model.wait import pre_running_wait
from components.workloads.training.run_spec import RayJobError
from tests.components.workloads.training.test_rayjob import build, settings_for


def _deadline(stack: str, overrides: dict | None = None) -> tuple[float, int]:
    s, manifest = build(stack, overrides)
    image = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    wait = sum(pre_running_wait(s, image).values())
    return wait, manifest["spec"]["preRunningDeadlineSeconds"]


def test_every_stacks_deadline_is_the_modelled_wait_with_its_margin(stack_name):
    s = settings_for(stack_name)
    wait, deadline = _deadline(stack_name)
    expected = math.ceil((wait * s.job.pre_running_margin_factor + s.job.pre_running_margin_minutes) * 60)
    assert deadline == expected, stack_name
    # At least half again the modelled wait and ten minutes over it, whatever the stack.
    assert deadline >= 1.5 * wait * 60 and deadline - wait * 60 >= 600, stack_name


# multinode pulling the official image (no `image` section): 25 GiB through the VPC's NAT shared by 2 nodes.
NAT_PULL = {"image": None}


def test_multinode_gets_two_hours_for_its_72_minute_pull_through_the_nat_not_the_old_hour():
    wait, deadline = _deadline("multinode", NAT_PULL)
    assert 70 < wait < 80  # 25 GiB at 50 Mbit/s per node (100 Mbit/s NAT, 2 nodes) + Ray start
    assert deadline > 3600 + 3000


def test_a_faster_image_path_shortens_the_deadline():
    slow_wait, slow = _deadline("dev")
    fast_wait, fast = _deadline("dev", {"latency": {"node_pull_mbps": 10000}, "cluster": {"network": {
        "nat_bandwidth_mbps": 10000}}})
    assert fast_wait < slow_wait and fast < slow


def test_an_autoscaled_gpu_pool_counts_its_nodes_boot(stack_name):
    s = settings_for(stack_name)
    phases = pre_running_wait(s, "registry-vpc.ap-southeast-1.aliyuncs.com/x/y:1")
    autoscaled = s.gpu_pool.ecs is not None and s.gpu_pool.ecs.min_nodes < s.gpu_pool.nodes
    assert ("GPU nodes scale up" in phases) == autoscaled


def test_a_stack_value_is_kept_when_it_covers_the_wait():
    _, deadline = _deadline("multinode", {**NAT_PULL, "job": {"pre_running_deadline_seconds": 9000}})
    assert deadline == 9000


def test_a_stack_value_below_the_modelled_wait_is_refused_naming_the_field_and_the_derived_value():
    with pytest.raises(RayJobError, match=r"job.pre_running_deadline_seconds 3600 is below the modelled wait of "
                                          r"\d+ s \(image pull 71.6, Ray cluster start 2.0 min\).*derived: 7223 s"):
        build("multinode", {**NAT_PULL, "job": {"pre_running_deadline_seconds": 3600}})


def test_kuberay_before_1_6_gets_no_deadline_field_rather_than_a_rejected_one():
    _, manifest = build("dev", {"versions": {"kuberay": "1.5.1"}})
    assert "preRunningDeadlineSeconds" not in manifest["spec"]
