"""Teardown never depends on today's catalogue: teardown.py destroys with `--run-program` and VERL_ACK_DESTROY=1
(keeper/destroy.py), the engine deletes only after the program finished and bails on a program error
(pulumi/pulumi deployment_executor.go), so under a destroy the program reads nothing that describes the world as it
is now (components/cloud/guards.py destroying, DESTROY_READS; docs/teardown.md).

The program's reads are derived here, not listed: every invoke and every `Resource.get` the recording engine sees in
an ordinary run of every shipped stack (and of dev with real-looking Lingjun ids, whose reads the placeholders skip).
A destroy-time run of each then makes none of them but DESTROY_READS, against an account whose catalogue says no to
everything: a stock-out, a released node, a deleted DNS zone or registry cannot stop it."""

from __future__ import annotations

import json

import pytest

from components.cloud.cluster import CONTROLLER_CLEANUP_KINDS, deleted_with_cluster
from components.cloud.guards import DESTROY_ENV, DESTROY_READS
from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR
from components.model import parse_settings
from offline import fakes
from offline.engine import STACK_REFERENCE_TYPE, Recording, StackOutputs, run_program
from offline.plan import stack_config
from tests.conftest import REAL_DEV_VALUES, REPO, STACKS, record, stack_settings

# The shipped stacks, and dev with an account's real-looking values: its Lingjun reads run (placeholders skip them).
RUNS = [(s, None) for s in STACKS] + [("dev", REAL_DEV_VALUES)]


def reads_of(rec: Recording) -> set[str]:
    """Every invoke token and every read type (`Resource.get`, StackReference) of a run."""
    return {i["token"] for i in rec.invokes} | {r.type for r in rec.resources if r.options.get("read")}


def world_now_reads() -> set[str]:
    """What the program reads in an ordinary run of any shipped stack, less what a destroy still needs."""
    return set().union(*(reads_of(record(s, o)) for s, o in RUNS)) - set(DESTROY_READS)


def destroy_run(stack: str, overrides: dict | None) -> Recording:
    """The program as teardown.py's `pulumi destroy --run-program` runs it (VERL_ACK_DESTROY=1 is set by the caller);
    an experiment reads its platform's outputs as they are (the platform stays up)."""
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    raw = stack_settings(stack, overrides)
    config[SETTINGS_KEY] = json.dumps(raw)
    s = parse_settings(raw)
    refs = {}
    if s.kind == "experiment":
        assert s.platform_stack is not None
        refs = {s.platform_stack: StackOutputs.of(record(s.platform_stack.rsplit("/", 1)[-1]))}
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                       stack_references=refs)


def test_the_derived_world_now_reads_are_the_catalogue_account_and_lingjun_reads():
    """The derivation finds what the issue names (so it cannot silently derive nothing), and every DESTROY_READS
    entry is a read the program makes (no stale allowance)."""
    found = world_now_reads()
    assert {"alicloud:index/getZones:getZones", "alicloud:dns/getAlidnsDomains:getAlidnsDomains",
            "alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances",
            "alicloud:ram/getRoles:getRoles", "alicloud:cs/getKubernetesAddons:getKubernetesAddons",
            "alicloud:oss/getBucketObjects:getBucketObjects", "alicloud:eflo/nodeGroup:NodeGroup",
            "alicloud:eflo/node:Node"} <= found, sorted(found)
    made = set().union(*(reads_of(record(s, o)) for s, o in RUNS))
    assert set(DESTROY_READS) <= made, sorted(set(DESTROY_READS) - made)


@pytest.mark.parametrize("stack,overrides", RUNS, ids=[s if o is None else f"{s}-real-ids" for s, o in RUNS])
def test_a_destroy_time_run_of_every_stack_reads_nothing_of_the_world_now(stack, overrides, monkeypatch):
    world_now = world_now_reads()
    monkeypatch.setenv(DESTROY_ENV, "1")
    # A catalogue that says no to everything: were any check still made, the program (and the destroy) would fail.
    monkeypatch.setattr(fakes, "ACCOUNT", fakes.FakeAccount(
        zones=[], dns_domains=[], acr_instances={}, ram_roles=[], buckets=[], lingjun_node_groups={},
        lingjun_nodes={}))
    rec = destroy_run(stack, overrides)
    made = reads_of(rec)
    assert made & world_now == set(), f"{stack}: a destroy reads {sorted(made & world_now)}"
    assert made <= set(DESTROY_READS), sorted(made - set(DESTROY_READS))
    # The one StackReference a destroy reads is an experiment's platform: not this stack's own create-only record.
    assert [r.name for r in rec.by_type(STACK_REFERENCE_TYPE)] in ([], ["platform"]), stack


# ------------------------------------------------------------------------------------------ deleted with the cluster
CLUSTER_TYPE = "alicloud:cs/managedKubernetes:ManagedKubernetes"


@pytest.mark.parametrize("stack", STACKS)
def test_kubernetes_objects_of_an_owned_cluster_go_with_it_except_those_a_controller_must_clean_up(stack):
    """A destroy of a stack that owns its cluster deletes none of its Kubernetes objects one by one (the engine skips
    a delete whose deletedWith resource goes in the same run) except those whose deletion a controller turns into a
    cloud-side cleanup; on a cluster the stack does not own (existing, or the platform's) every object is deleted."""
    rec = record(stack)
    owned = [r for r in rec.by_type(CLUSTER_TYPE) if not r.options.get("read")]
    for r in (r for r in rec.resources if r.is_kubernetes):
        expected = owned[0].urn if owned and deleted_with_cluster(r.type, r.inputs) else ""
        assert r.options["deleted_with"] == expected, f"{r.urn}: deleted_with {r.options['deleted_with']!r}"
    if owned:
        kept = {r.inputs.get("kind") for r in rec.resources if r.is_kubernetes and not r.options["deleted_with"]}
        assert kept <= set(CONTROLLER_CLEANUP_KINDS) | {"PersistentVolumeClaim", "PersistentVolume", "Service"}


def test_what_goes_with_the_cluster_is_what_releases_no_cloud_resource_on_its_own_delete():
    assert deleted_with_cluster("kubernetes:core/v1:ConfigMap", {"kind": "ConfigMap"})
    assert deleted_with_cluster("kubernetes:helm.sh/v3:Release", {"chart": "kuberay-operator"})
    assert not deleted_with_cluster("pulumi:providers:kubernetes", {})
    assert not deleted_with_cluster("alicloud:cs/nodePool:NodePool", {})
    assert not deleted_with_cluster("kubernetes:alibabacloud.com/v1:AlbConfig", {"kind": "AlbConfig"})
    svc = "kubernetes:core/v1:Service"
    assert deleted_with_cluster(svc, {"kind": "Service", "spec": {"type": "ClusterIP"}})
    assert not deleted_with_cluster(svc, {"kind": "Service", "spec": {"type": "LoadBalancer"}})
    pvc = "kubernetes:core/v1:PersistentVolumeClaim"
    assert deleted_with_cluster(pvc, {"kind": "PersistentVolumeClaim", "spec": {"volumeName": "pv"}})
    assert not deleted_with_cluster(pvc, {"kind": "PersistentVolumeClaim", "spec": {"storageClassName": "disk"}})
    pv = "kubernetes:core/v1:PersistentVolume"
    assert deleted_with_cluster(pv, {"kind": "PersistentVolume", "spec": {"persistentVolumeReclaimPolicy": "Retain"}})
    assert not deleted_with_cluster(pv, {"kind": "PersistentVolume", "spec": {"persistentVolumeReclaimPolicy": "Delete"}})
    assert not deleted_with_cluster(pvc, {"kind": "PersistentVolumeClaim", "spec": object()}), "unreadable: its own delete"
