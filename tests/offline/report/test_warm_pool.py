"""The warm sandbox pool's cold start in the latency model: the code-interpreter image pull on the sandbox nodes
(in-region VPC endpoint, or through the NAT) plus the pod start, and when the first tool call waits for it."""

from __future__ import annotations

import pytest

from components.model import parse_settings
from offline.report.latency import critical_path, latency_section
from offline.report.warm_pool import in_region_endpoint, sandbox_nodes
from tests.conftest import record, stack_settings


def model(stack: str, overrides: dict | None = None):
    s = parse_settings(stack_settings(stack, overrides))
    rec = record(stack, overrides)
    return s, rec, critical_path(rec, s)


@pytest.mark.parametrize(("host", "region", "inside"), [
    ("verl-ack-dev-registry-vpc.ap-southeast-1.cr.aliyuncs.com", "ap-southeast-1", True),
    ("registry-vpc.cn-hangzhou.aliyuncs.com", "cn-hangzhou", True),
    ("registry-ap-southeast-1-vpc.ack.aliyuncs.com", "ap-southeast-1", True),
    ("registry-ap-southeast-1.ack.aliyuncs.com", "ap-southeast-1", False),  # a public endpoint: through the NAT
    ("registry-ap-southeast-1.ack.aliyuncs.com", "cn-hangzhou", False),
    ("registry-vpc.cn-hangzhou.aliyuncs.com", "ap-southeast-1", False),  # another region's VPC endpoint
    ("docker.io", "ap-southeast-1", False),
])
def test_only_a_vpc_endpoint_in_the_stacks_region_is_pulled_without_the_nat(host, region, inside):
    assert in_region_endpoint(host, region) is inside


def test_a_mirrored_image_is_pulled_in_region_and_the_plan_shows_when_the_pool_is_ready():
    s, rec, cp = model("dev")
    w = cp.warm_pool
    assert w is not None and not w.via_nat and w.mbps == s.latency.node_pull_mbps
    assert w.ready == pytest.approx(max(w.pull_start + w.pull_minutes, w.pull_start) + s.latency.sandbox_start_minutes,
                                    abs=0.06)
    md = latency_section(s, rec).markdown
    assert "warm sandbox pool ready (off the critical path)" in md and "in-region VPC endpoint" in md


def test_upstreams_image_shares_the_nat_between_the_sandbox_nodes_and_takes_longer_than_the_mirror():
    s, _, cp = model("dev", {"sandbox": {"image_mirror": False}})
    w = cp.warm_pool
    assert w.via_nat and w.mbps == pytest.approx(s.cluster.network.nat_bandwidth_mbps / sandbox_nodes(s))
    assert w.pull_minutes > model("dev")[2].warm_pool.pull_minutes


def test_a_pool_still_pulling_when_verl_has_started_delays_the_first_step_and_is_on_the_critical_path():
    slow = {"sandbox": {"image_mirror": False}, "latency": {"sandbox_image_gib": 200}}
    s, rec, cp = model("dev", slow)
    assert cp.warm_pool_on_critical_path
    assert cp.first_step_minutes == pytest.approx(cp.warm_pool.ready)
    assert cp.path[-1].kind == "sandbox_warm_pool"
    assert cp.first_step_minutes > model("dev")[2].first_step_minutes
    assert "(on the critical path: the first tool call waits)" in latency_section(s, rec).markdown


def test_an_experiment_on_a_warm_platform_waits_for_no_sandbox_pool():
    assert model("dev-grpo")[2].warm_pool is None
