"""The VPC a new cluster lives in: node and Terway pod vSwitches per zone, and an Enhanced NAT gateway with a
pay-as-you-go EIP so nodes and pods can pull images, models and datasets from the internet.

Created only for `cluster.mode: new` without `cluster.network.vpc_id`; otherwise `network_refs` returns the
ids from the settings and nothing is declared (an existing VPC keeps whatever egress it has).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.guards import rebuild_guard
from components.config import Settings


@dataclass
class NetworkRefs:
    """Where the cluster, its node pools and the ALB are placed. Zone-keyed, in `settings.zones` order."""

    vpc_id: pulumi.Input[str]
    node_vswitch_ids: dict[str, pulumi.Input[str]]
    pod_vswitch_ids: dict[str, pulumi.Input[str]] = field(default_factory=dict)


def creates_network(s: Settings) -> bool:
    """A VPC is created only for a new cluster that was not given one."""
    return s.cluster.mode == "new" and s.cluster.network.vpc_id is None


def existing_network_refs(s: Settings) -> NetworkRefs:
    """The VPC and vSwitches named in the settings (validated: one vSwitch id per zone, zones order)."""
    net = s.cluster.network
    assert net.vpc_id is not None, "settings validation guarantees vpc_id when no network is created"
    return NetworkRefs(
        vpc_id=net.vpc_id,
        node_vswitch_ids=dict(zip(s.zones, net.node_vswitch_ids, strict=False)),
        pod_vswitch_ids=dict(zip(s.zones, net.pod_vswitch_ids, strict=False)),
    )


def vswitch_plan(s: Settings) -> list[dict]:
    """The vSwitches a new VPC gets: one node and one Terway pod vSwitch per zone (CIDRs from the settings)."""
    net = s.cluster.network
    out = []
    for zone, node_cidr, pod_cidr in zip(s.zones, net.node_cidrs, net.pod_cidrs, strict=False):
        out.append({"role": "node", "zone": zone, "cidr": node_cidr, "name": f"{s.name}-node-{zone}"})
        out.append({"role": "pod", "zone": zone, "cidr": pod_cidr, "name": f"{s.name}-pod-{zone}"})
    return out


@dataclass(kw_only=True)
class NetworkArgs:
    settings: Settings
    tags: dict[str, str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider


class Network(pulumi.ComponentResource):
    """VPC + vSwitches + Enhanced NAT gateway + EIP + SNAT entries for every vSwitch."""

    refs: NetworkRefs

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:network:Network", name, None, opts)
        s = args.settings
        net = s.cluster.network
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)

        # Protected (components/cloud/guards.py): a CIDR or zone change would replace them under a cluster that
        # still uses them; teardown.py lifts the guard for an intended destroy.
        guarded = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=rebuild_guard()))
        self.vpc = alicloud.vpc.Network(
            f"{name}-vpc", vpc_name=f"{s.name}-vpc", cidr_block=net.vpc_cidr, tags=args.tags, opts=guarded)

        self.vswitches: dict[tuple[str, str], alicloud.vpc.Switch] = {}
        for v in vswitch_plan(s):
            self.vswitches[(v["role"], v["zone"])] = alicloud.vpc.Switch(
                f"{name}-{v['role']}-{v['zone']}", vpc_id=self.vpc.id, zone_id=v["zone"], cidr_block=v["cidr"],
                vswitch_name=v["name"], tags=args.tags, opts=guarded)
        first_zone = s.zones[0]

        # Enhanced NAT (the only type ACK supports) is billed per hour and per LCU; PayAsYouGo so destroy stops
        # the bill. The cluster asks for new_nat_gateway=False, but the provider drops a false value (GetOk), so
        # CreateCluster runs with ACK's default snat_entry=true: whether ACK then reuses this gateway or adds its
        # own is unverified (docs/facts-provider.md; docs/uncertain-facts.md).
        self.nat = alicloud.vpc.NatGateway(
            f"{name}-nat", vpc_id=self.vpc.id, vswitch_id=self.vswitches[("node", first_zone)].id,
            nat_type="Enhanced", payment_type="PayAsYouGo", internet_charge_type="PayByLcu", network_type="internet",
            nat_gateway_name=f"{s.name}-nat", tags=args.tags, opts=child)
        self.eip = alicloud.ecs.EipAddress(
            f"{name}-nat-eip", address_name=f"{s.name}-nat-eip", bandwidth=str(net.nat_bandwidth_mbps),
            internet_charge_type="PayByTraffic", payment_type="PayAsYouGo", tags=args.tags, opts=child)
        self.eip_association = alicloud.ecs.EipAssociation(
            f"{name}-nat-eip-assoc", allocation_id=self.eip.id, instance_id=self.nat.id, instance_type="Nat",
            opts=child)
        self.snat_entries = []
        for (role, zone), vsw in self.vswitches.items():
            self.snat_entries.append(alicloud.vpc.SnatEntry(
                f"{name}-snat-{role}-{zone}", snat_table_id=self.nat.snat_table_ids, source_vswitch_id=vsw.id,
                snat_ip=self.eip.ip_address, snat_entry_name=f"{s.name}-{role}-{zone}",
                # An SNAT entry may only use an EIP already bound to this NAT gateway.
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.eip_association]))))

        self.refs = NetworkRefs(
            vpc_id=self.vpc.id,
            node_vswitch_ids={z: self.vswitches[("node", z)].id for z in s.zones},
            pod_vswitch_ids={z: self.vswitches[("pod", z)].id for z in s.zones},
        )
        # Nodes need egress before they join (image pulls): whoever waits for the network waits for SNAT.
        self.egress_ready: list[pulumi.Resource] = list(self.snat_entries)
        self.register_outputs({"vpc_id": self.vpc.id, "nat_gateway_id": self.nat.id, "nat_ip": self.eip.ip_address})
