"""Day 2: no accidental rebuilds, and what a new cluster waits for (issue 19 items 8 and 12)."""

from __future__ import annotations

from tests.components.cloud.test_common import EXISTING_VPC, depends_on
from tests.conftest import record

CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"
SNAT = "alicloud:vpc/snatEntry:SnatEntry"


def test_a_new_cluster_waits_for_every_snat_entry_so_acks_own_snat_default_cannot_race_them():
    rec = record("dev")
    cluster = rec.get(CLUSTER, "ack-cluster")
    assert rec.by_type(SNAT) and all(depends_on(cluster, e) for e in rec.by_type(SNAT))


def test_a_cluster_in_a_given_vpc_waits_for_no_snat_entries():
    rec = record("dev", EXISTING_VPC)
    assert not rec.by_type(SNAT)
    rec.get(CLUSTER, "ack-cluster")
