"""The resource graph does not grow with the GPU layout or the sandbox pool: more nodes are more Ray worker
replicas and a bigger pool is more SandboxSet replicas, never more resources to create, review or destroy.
(benchmark.py measures the time; tests never assert on time.)"""

from __future__ import annotations

from collections import Counter

import pytest

from benchmark import gpu_overrides, sandbox_overrides
from components.model import parse_settings
from offline.report.latency import RAYJOB_TYPE
from tests.conftest import record, stack_settings


def shape(stack: str, overrides: dict) -> Counter:
    return Counter((r.type, r.name) for r in record(stack, overrides).resources)


@pytest.mark.parametrize("nodes", [1, 8, 64])
def test_the_scaled_gpu_layouts_are_valid_settings(nodes):
    s = parse_settings(stack_settings("multinode", gpu_overrides(nodes)))
    assert s.gpu_pool.nodes == nodes


def test_resource_count_does_not_grow_with_gpu_nodes():
    # From two Lingjun nodes on the job is multi-node (RDMA, the Ray pods' own namespace); beyond that, nothing grows.
    two, eight, sixty_four = (shape("multinode", gpu_overrides(n)) for n in (2, 8, 64))
    assert sum(two.values()) == sum(eight.values()) == sum(sixty_four.values())
    assert two == eight == sixty_four
    one = shape("multinode", gpu_overrides(1))
    assert set(two) - set(one) == {("kubernetes:core/v1:Namespace", "identity-ray-namespace")}


def test_resource_count_does_not_grow_with_the_sandbox_pool():
    small, large = (shape("dev", sandbox_overrides(p)) for p in (3, 1024))
    assert sum(small.values()) == sum(large.values())
    assert small == large


def test_gpu_nodes_become_ray_worker_replicas():
    rayjobs = record("multinode", gpu_overrides(64)).by_type(RAYJOB_TYPE)
    if not rayjobs:
        pytest.skip("the program has no RayJob yet")
    groups = rayjobs[0].inputs["spec"]["rayClusterSpec"].get("workerGroupSpecs") or []
    assert sum(g.get("replicas", 0) for g in groups) in (63, 64)  # 64 workers, or a GPU head plus 63
