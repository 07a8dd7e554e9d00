"""How bought Lingjun machines become nodes of the pool (docs/cloud.md "Lingjun nodes"), what a change of the node
group does, and the security-group rules that close the host-network Ray head of a multi-node pool."""

from __future__ import annotations

import pytest

from components.cloud.nodepools import RAY_PORTS, lingjun_join_warnings
from components.config.cloud import EXCLUSIVE_ENI_LABEL
from components.config.loading import SettingsError
from components.workloads import network_policies
from tests.components.cloud.test_common import labels, settings_of
from tests.conftest import STACKS, record

POOL = "alicloud:cs/nodePool:NodePool"
RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"


def test_the_lingjun_pool_attaches_the_bought_machines_by_their_eflo_node_ids():
    s = settings_of("multinode")
    pool = record("multinode").get(POOL, "pools-gpu")
    assert pool.inputs["instances"] == s.gpu_pool.lingjun.node_ids
    assert len(pool.inputs["instances"]) == s.gpu_pool.nodes


def test_with_join_console_the_pool_is_created_empty_and_the_preview_names_the_console_step():
    over = {"gpu_pool": {"lingjun": {"join": "console"}}}
    pool = record("dev", over).get(POOL, "pools-gpu")
    assert "instances" not in pool.inputs
    warning = lingjun_join_warnings(settings_of("dev", over))[0]
    assert "EMPTY" in warning and "ACK console > Clusters" in warning and "e01-cn-0000000001" in warning


def test_lingjun_nodes_are_labelled_for_terway_exclusive_eni_mode_unless_the_stack_turns_it_off():
    key, value = EXCLUSIVE_ENI_LABEL
    assert labels(record("dev").get(POOL, "pools-gpu"))[key] == value
    off = record("dev", {"gpu_pool": {"lingjun": {"terway_exclusive_eni": False}}}).get(POOL, "pools-gpu")
    assert key not in labels(off)
    assert key not in labels(record("existing-ecs").get(POOL, "pools-gpu")), "ECS pools keep shared-ENI mode"


def test_a_changed_node_group_or_node_list_replaces_the_lingjun_pool_old_pool_first():
    pool = record("dev").get(POOL, "pools-gpu")
    # The Pulumi input names of the create-only fields (SDK cs/node_pool.py getters efloNodeGroup, instances).
    assert set(pool.options["replace_on_changes"]) == {"efloNodeGroup", "instances"}
    assert set(pool.options["replace_on_changes"]) <= set(pool.inputs)
    assert pool.options["delete_before_replace"] is True


def test_the_lingjun_pool_carries_no_tags_because_they_reach_ecs_scaling_groups_only():
    assert "tags" not in record("dev").get(POOL, "pools-gpu").inputs
    assert "tags" in record("existing-ecs").get(POOL, "pools-gpu").inputs


@pytest.mark.parametrize("change, field, message", [
    ({"gpu_pool": {"lingjun": {"node_ids": ["e01-cn-a0001", "e01-cn-a0002"]}}}, "gpu_pool", "exactly that many"),
    ({"gpu_pool": {"lingjun": {"node_ids": ["i-2zed0sswuau6o89b"]}}}, "node_ids", "ECS instance id"),
    ({"cluster": {"network": {"vpc_id": None, "node_vswitch_ids": [], "pod_vswitch_ids": []}}}, "settings",
     "needs cluster.network.vpc_id"),
])
def test_a_lingjun_stack_is_refused_without_its_nodes_or_outside_their_vpc(change, field, message):
    with pytest.raises(SettingsError) as err:
        settings_of("dev", change)
    assert message in str(err.value) and field in str(err.value)


def test_a_multi_node_lingjun_pool_without_the_nodes_security_group_is_refused():
    with pytest.raises(SettingsError, match="security_group_id"):
        settings_of("multinode", {"gpu_pool": {"lingjun": {"security_group_id": None}}})


@pytest.mark.parametrize("stack", ["multinode", "dev", "dev-platform"])
def test_a_lingjun_pool_admits_the_ray_ports_only_from_the_gpu_nodes_and_the_pod_vswitches_and_drops_the_rest(stack):
    """multinode: host-network Ray pods; dev (one node) and the platform that owns its pool: Ray pods on Terway
    exclusive ENIs, which NetworkPolicy does not cover."""
    s = settings_of(stack)
    lj = s.gpu_pool.lingjun
    rules = [r.inputs for r in record(stack).by_type(RULE)]
    assert rules and all(r["securityGroupId"] == lj.security_group_id and r["type"] == "ingress" for r in rules)
    assert {r["portRange"] for r in rules} == {f"{p}/{p}" for p in RAY_PORTS}
    for port in RAY_PORTS:
        on_port = [r for r in rules if r["portRange"] == f"{port}/{port}"]
        accepted = {r.get("sourceSecurityGroupId") or r.get("cidrIp") for r in on_port if r["policy"] == "accept"}
        assert accepted == {lj.security_group_id, *lj.ray_admit_cidrs}
        drops = [r for r in on_port if r["policy"] == "drop"]
        assert [d["cidrIp"] for d in drops] == ["0.0.0.0/0"]
        # A smaller number wins in an Alibaba security group: every accept outranks the drop.
        assert all(r["priority"] < drops[0]["priority"] for r in on_port if r["policy"] == "accept")


def test_a_single_node_exclusive_eni_lingjun_pool_without_the_nodes_security_group_is_refused():
    with pytest.raises(SettingsError, match="exclusive-ENI pods"):
        settings_of("dev", {"gpu_pool": {"lingjun": {"security_group_id": None, "ray_admit_cidrs": []}}})


def test_stacks_that_own_no_lingjun_pool_add_no_security_group_rules():
    for stack in ("existing-ecs", "dev-grpo"):
        assert record(stack).by_type(RULE) == [], stack


@pytest.mark.parametrize("stack", STACKS)
def test_the_fenced_ports_are_every_fixed_port_of_every_rendered_rayjob(stack):
    """Derived, not listed: whatever port a stack's RayJob makes its Ray pods listen on is one the fence closes."""
    for job in record(stack).by_type("kubernetes:ray.io/v1:RayJob"):
        assert set(network_policies.ray_listen_ports(job.inputs["spec"])) <= set(RAY_PORTS), job.urn
    assert {network_policies.RAY_GCS_PORT, network_policies.RAY_DASHBOARD_PORT,
            network_policies.RAY_CLIENT_PORT} <= set(RAY_PORTS)


def test_a_port_moved_in_the_rayjob_is_a_port_the_derivation_sees():
    spec = {"rayClusterSpec": {"headGroupSpec": {"rayStartParams": {"dashboard-port": "18265"}},
                               "workerGroupSpecs": [{"rayStartParams": {"metrics-export-port": "9090"}}]}}
    ports = network_policies.ray_listen_ports(spec)
    assert 18265 in ports and 9090 in ports and 8265 not in ports
