"""Node pools: a small CPU `system` pool for controllers, sandboxes, tracking and data jobs, and the GPU pool the
training job runs on (Lingjun nodes joined from an EFLO node group, or pay-as-you-go ECS GPU instances that
the cluster autoscaler scales between `ecs.min_nodes` and `nodes`).

The GPU pool is tainted so only pods tolerating GPU_TAINT_KEY (the training job) land there; the labels and
tolerations every workload uses come from components/wiring.py, exported here as `scheduling`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud

from components.cloud.account_checks import check_lingjun
from components.cloud.network import NetworkRefs
from components.config import Settings
from components.config.cloud import EXCLUSIVE_ENI_LABEL, LINGJUN_NODE_POOL_DOC
from components.wiring import (
    GPU_TAINT_KEY,
    SANDBOX_TAINT_KEY,
    Scheduling,
    gpu_scheduling,
    sandbox_scheduling,
    system_scheduling,
)
from components.workloads.network_policies import RAY_DEFAULT_PORTS

GPUS_PER_NODE_LABEL = "verl-ack/gpus-per-node"
GPU_MODEL_LABEL = "verl-ack/gpu-model"
# A Lingjun pool fills from its EFLO node group, so no NodePool field states its size; this label does, for
# the GPU budget policy (policy/verl_ack_policy) and for readers of `kubectl get nodes -L`.
MAX_NODES_LABEL = "verl-ack/max-nodes"
# Without it a label or taint change reaches only nodes that join later: the running nodes keep the old ones, so the
# workloads' selectors and tolerations stop matching them (SDK cs/node_pool.py: update_nodes "Synchronously update
# node labels and taints"; it only acts on an update).
UPDATE_NODES = True
# A Kubernetes label value (apimachinery): free-text gpu_model becomes a label only when it is one.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def system_pool_labels(s: Settings) -> list[dict]:
    return [{"key": k, "value": v} for k, v in system_scheduling(s).node_selector.items()]


def gpu_pool_labels(s: Settings) -> list[dict]:
    labels = dict(gpu_scheduling(s).node_selector)
    labels[GPUS_PER_NODE_LABEL] = str(s.gpu_pool.gpus_per_node)
    if s.gpu_pool.gpu_model and _LABEL_VALUE.fullmatch(s.gpu_pool.gpu_model):
        labels[GPU_MODEL_LABEL] = s.gpu_pool.gpu_model
    if s.gpu_pool.kind == "lingjun":
        labels[MAX_NODES_LABEL] = str(s.gpu_pool.nodes)
        assert s.gpu_pool.lingjun is not None
        if s.gpu_pool.lingjun.terway_exclusive_eni:
            # ACK supports Lingjun pools in Terway exclusive-ENI mode only; Terway reads the mode from this node
            # label, and only on a new node (docs/cloud.md "Lingjun nodes").
            labels[EXCLUSIVE_ENI_LABEL[0]] = EXCLUSIVE_ENI_LABEL[1]
    return [{"key": k, "value": v} for k, v in labels.items()]


def gpu_pool_taints(s: Settings) -> list[dict]:
    """The taint gpu_scheduling() tolerates; ACK adds its own Lingjun taint to Lingjun nodes."""
    return [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]


def sandbox_pool_labels(s: Settings) -> list[dict]:
    return [{"key": k, "value": v} for k, v in sandbox_scheduling(s).node_selector.items()]


def sandbox_pool_taints(s: Settings) -> list[dict]:
    """The taint sandbox_scheduling() tolerates: nothing but the sandboxes (model-written code) lands there."""
    return [{"key": SANDBOX_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]


def ecs_scaling_config(s: Settings) -> dict:
    """Autoscaled ECS GPU pool: scales to `min_nodes` (0 = no GPU bills while idle) and up to `nodes`."""
    assert s.gpu_pool.ecs is not None
    return {"enable": True, "min_size": s.gpu_pool.ecs.min_nodes, "max_size": s.gpu_pool.nodes, "type": "gpu"}

# Pulumi input names of the Lingjun pool fields the provider sends only at creation and never reads back or updates
# (TF resource_alicloud_cs_kubernetes_node_pool.go: eflo_node_group only in Create; `instances` diffs go to
# AttachInstancesToNodePool, and a removed id to DeleteClusterNodes with release_node=true). A change must replace the
# pool, never "update" it to no effect or release a bought machine.
LINGJUN_REPLACE_ON = ["efloNodeGroup", "instances"]
# What the pool's Read stores that the program does not own (offline/readback.py "node-pool-read"; TF
# resource_alicloud_cs_kubernetes_node_pool.go Read). Every pool: the Read keeps ACK's own ack.aliyun.com tag of the
# scaling group (tagsToMap drops only aliyun*/acs:* keys, :2411-2412), which the program never sends, so it would diff
# on every preview and an update would send the tags without it; ignoring that one key keeps the program's own tags
# applied.
ACK_POOL_TAG_IGNORE = ['tags["ack.aliyun.com"]']
# A Lingjun pool sends none of these (its machines are EFLO nodes, not ECS instances of a scaling group), but the
# Read sets them from $.scaling_group and $.kubernetes_config, Optional and not Computed, so whatever ACK returns is
# a diff. ACK may keep its own Lingjun taint (wiring.LINGJUN_TAINT_KEY) in the pool's taints: an update would then
# send only the program's taint with update_nodes and strip ACK's from the nodes. What ACK returns is not knowable
# offline (docs/uncertain-facts.md), so the pool ignores them: the GPU taint the program sets is a constant, sent at
# creation.
LINGJUN_IGNORE = ["instanceTypes", "tags", "taints", "vswitchIds"]
# The fixed ports the Ray pods listen on (GCS, dashboard and job API, Ray client on the head; metrics and dashboard
# agent on every pod), from KubeRay's defaults for a RayJob that moves none (network_policies.ray_listen_ports; a
# test holds every stack's rendered RayJobs to this list).
RAY_PORTS = RAY_DEFAULT_PORTS


def lingjun_pool_args(s: Settings, cluster_id: pulumi.Input[str]) -> dict:
    """Inputs of the Lingjun pool. No `tags`: the provider puts them on the pool's ECS scaling group only ("Add tags
    only for ECS instances"; read back from $.scaling_group.tags), which a Lingjun pool's EFLO machines are not in,
    so they would tag nothing and could diff forever."""
    lj = s.gpu_pool.lingjun
    assert lj is not None
    return {
        "cluster_id": cluster_id,
        "node_pool_name": f"{s.name}-gpu",
        "type": "lingjun",
        "eflo_node_group": {"cluster_id": lj.eflo_cluster_id, "group_id": lj.eflo_node_group_id},
        # join: attach -> AttachInstancesToNodePool right after the pool is created (a refusal fails `up` here).
        "instances": list(lj.node_ids) if lj.join == "attach" else None,
        "labels": gpu_pool_labels(s),
        "taints": gpu_pool_taints(s),
        "update_nodes": UPDATE_NODES,
    }


def lingjun_pool_options() -> pulumi.ResourceOptions:
    """A node sits in one Lingjun pool only, so the old pool goes first when the node group or the nodes change."""
    return pulumi.ResourceOptions(replace_on_changes=LINGJUN_REPLACE_ON, delete_before_replace=True,
                                  ignore_changes=LINGJUN_IGNORE)


def lingjun_join_warnings(s: Settings) -> list[str]:
    """What `pulumi preview` says about the steps of a Lingjun join that no API of this program performs."""
    lj = s.gpu_pool.lingjun
    assert lj is not None
    out = []
    if lj.join == "console":
        out.append(
            f"gpu_pool.lingjun.join=console: the pool {s.name}-gpu is created EMPTY. After `pulumi up` add the nodes "
            f"{', '.join(lj.node_ids)} by hand: ACK console > Clusters > {s.name} > Nodes > Node Pools > {s.name}-gpu > "
            f"add existing Lingjun nodes ({LINGJUN_NODE_POOL_DOC}). Until then the RayJob waits for GPU nodes.")
    else:
        out.append(
            f"gpu_pool.lingjun.join=attach: the pool attaches {', '.join(lj.node_ids)} through AttachInstancesToNodePool, "
            "whose API page describes ECS instances only; if ACK refuses EFLO node ids, `up` fails at the pool: set "
            "join: console and add the nodes in the ACK console (docs/cloud.md \"Lingjun nodes\").")
    if lj.terway_exclusive_eni:
        out.append(
            "Lingjun nodes run Terway exclusive-ENI pods, which NetworkPolicy does not cover (ACK: exclusive ENI "
            "\"does not support ... NetworkPolicy\"): the Ray pods' policies are not enforced on them; the "
            "security-group rules on gpu_pool.lingjun.security_group_id are the network control there (docs/cloud.md).")
    return out


def ray_port_rule_plan(s: Settings) -> list[dict]:
    """Security-group rules of a Lingjun pool, whose Ray pods NetworkPolicy does not reach: on several nodes they use
    the host network and listen on the nodes' VPC addresses; on one node they run on Terway exclusive ENIs, which
    NetworkPolicy does not cover (docs/facts.md). Per Ray port: accept from the group itself and `ray_admit_cidrs`
    (priority 1), drop from anywhere else (priority 2; an Alibaba rule with a smaller priority number wins, a drop
    wins a tie)."""
    lj = s.gpu_pool.lingjun
    assert lj is not None and lj.security_group_id
    out = []
    for port in RAY_PORTS:
        out.append({"key": f"self-{port}", "port": port, "policy": "accept", "priority": 1,
                    "source_security_group_id": lj.security_group_id})
        for i, cidr in enumerate(lj.ray_admit_cidrs):
            out.append({"key": f"admit{i}-{port}", "port": port, "policy": "accept", "priority": 1, "cidr_ip": cidr})
        out.append({"key": f"drop-{port}", "port": port, "policy": "drop", "priority": 2, "cidr_ip": "0.0.0.0/0"})
    return out


def ray_port_rules(name: str, s: Settings, child: pulumi.ResourceOptions) -> list[alicloud.ecs.SecurityGroupRule]:
    lj = s.gpu_pool.lingjun
    assert lj is not None
    return [alicloud.ecs.SecurityGroupRule(
        f"{name}-ray-{r['key']}", security_group_id=lj.security_group_id, type="ingress", ip_protocol="tcp",
        port_range=f"{r['port']}/{r['port']}", nic_type="intranet", policy=r["policy"], priority=r["priority"],
        source_security_group_id=r.get("source_security_group_id"), cidr_ip=r.get("cidr_ip"),
        description=f"verl-ack {s.name}: Ray port {r['port']} ({r['policy']})", opts=child)
        for r in ray_port_rule_plan(s)]


@dataclass(kw_only=True)
class NodePoolsArgs:
    settings: Settings
    cluster_id: pulumi.Input[str]
    network: NetworkRefs
    tags: dict[str, str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    # Nodes must reach the internet before they join (image pulls): the SNAT entries of a new network.
    egress_ready: list[pulumi.Resource]
    # Which pools this stack owns: a platform stack the system pool (and the cluster-wide autoscaler settings), an
    # experiment stack the GPU pool; a single stack both.
    system: bool = True
    gpu: bool = True


def _cpu_pool(resource_name: str, pool_name: str, args: NodePoolsArgs, pool, *, labels: list[dict],
              opts: pulumi.ResourceOptions, taints: list[dict] | None = None,
              runtime_name: str | None = None) -> alicloud.cs.NodePool:
    """A fixed-size pay-as-you-go CPU pool across the stack's zones (the system pool, the sandbox pool); `pool` is
    its settings section (instance_types, nodes, system_disk_gib). runtime_name None = the cluster's runtime."""
    return alicloud.cs.NodePool(
        resource_name,
        cluster_id=args.cluster_id,
        node_pool_name=pool_name,
        vswitch_ids=[args.network.node_vswitch_ids[z] for z in args.settings.zones],
        instance_types=pool.instance_types,
        instance_charge_type="PostPaid",
        desired_size=str(pool.nodes),  # a string in pulumi_alicloud 4.0.0
        system_disk_category="cloud_essd",
        system_disk_size=pool.system_disk_gib,
        runtime_name=runtime_name,
        labels=labels,
        taints=taints,
        update_nodes=UPDATE_NODES,
        tags=args.tags,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=ACK_POOL_TAG_IGNORE)),
    )


class NodePools(pulumi.ComponentResource):
    """System pool + GPU pool (+ the cluster autoscaler's settings for an autoscaled ECS GPU pool)."""

    gpu_scheduling: Scheduling

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:nodepools:NodePools", name, None, opts)
        s = args.settings
        gp = s.gpu_pool
        # New nodes pull images and bootstrap over the internet: the NAT's SNAT entries must exist first.
        child = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.egress_ready)

        self.system: alicloud.cs.NodePool | None = None
        self.gpu: alicloud.cs.NodePool | None = None
        self.autoscaler: alicloud.cs.AutoscalingConfig | None = None
        self.sandbox: alicloud.cs.NodePool | None = None
        self.ray_port_rules: list[alicloud.ecs.SecurityGroupRule] = []
        self.lingjun_checked: pulumi.Output[list[str]] | None = None
        if args.system:
            self._system_pool(name, args, child)
            if s.sandbox.dedicated_pool is not None:
                self._sandbox_pool(name, args, child)
        if args.gpu:
            self._gpu_pool(name, args, child)
        if args.system and gp.kind == "ecs" and s.cluster.mode == "new":
            # Node autoscaling is a cluster-wide setting; only a cluster this stack owns gets it configured.
            self.autoscaler = alicloud.cs.AutoscalingConfig(
                f"{name}-autoscaler", cluster_id=args.cluster_id, scale_up_from_zero=True,
                scale_down_enabled=True, opts=pulumi.ResourceOptions(parent=self, provider=args.provider))

        self.gpu_scheduling = gpu_scheduling(s)
        # Pods need a node to run on. Everything but training runs on the system pool, so it waits for that
        # pool only; only the training job waits for the GPU pool. A false edge to the GPU pool would put
        # add-ons, data staging and sandboxes behind the slowest resource and leave GPUs idle meanwhile
        # (tests/test_graph.py guards this).
        self.system_ready: list[pulumi.Resource] = [self.system] if self.system else []
        self.gpu_ready: list[pulumi.Resource] = [self.gpu] if self.gpu else []
        # The SandboxSet's pods wait for the pool they run on (sandbox.dedicated_pool).
        self.sandbox_ready: list[pulumi.Resource] = [self.sandbox] if self.sandbox else []
        self.register_outputs({
            **({"system_pool_id": self.system.node_pool_id} if self.system else {}),
            **({"gpu_pool_id": self.gpu.node_pool_id} if self.gpu else {})})

    def _system_pool(self, name: str, args: NodePoolsArgs, child: pulumi.ResourceOptions) -> None:
        s = args.settings
        self.system = _cpu_pool(f"{name}-system", f"{s.name}-system", args, s.system_pool,
                                labels=system_pool_labels(s), opts=child)

    def _sandbox_pool(self, name: str, args: NodePoolsArgs, child: pulumi.ResourceOptions) -> None:
        """Sandboxes run model-written code: on their own tainted nodes they share no kernel with the controllers,
        MLflow or the data jobs (and with runtime_name Sandboxed-Container.runv each one gets a kernel of its own)."""
        s = args.settings
        dp = s.sandbox.dedicated_pool
        assert dp is not None
        self.sandbox = _cpu_pool(f"{name}-sandbox", f"{s.name}-sandbox", args, dp, labels=sandbox_pool_labels(s),
                                 taints=sandbox_pool_taints(s), runtime_name=dp.runtime_name, opts=child)

    def _gpu_pool(self, name: str, args: NodePoolsArgs, child: pulumi.ResourceOptions) -> None:
        s = args.settings
        gp = s.gpu_pool
        if gp.kind == "lingjun":
            assert gp.lingjun is not None
            self.gpu = alicloud.cs.NodePool(
                f"{name}-gpu", **lingjun_pool_args(s, args.cluster_id),
                opts=pulumi.ResourceOptions.merge(child, lingjun_pool_options()))
            for msg in lingjun_join_warnings(s):
                pulumi.log.warn(msg, resource=self.gpu)
            # The machines the pool joins, read from the account at preview (placeholders are refused first).
            self.lingjun_checked = check_lingjun(s, pulumi.ResourceOptions(parent=self, provider=args.provider))
            if gp.lingjun.security_group_id:
                self.ray_port_rules = ray_port_rules(name, s, child)
        else:
            assert gp.ecs is not None
            self.gpu = alicloud.cs.NodePool(
                f"{name}-gpu",
                cluster_id=args.cluster_id,
                node_pool_name=f"{s.name}-gpu",
                vswitch_ids=[args.network.node_vswitch_ids[gp.zone]],
                instance_types=gp.ecs.instance_types,
                instance_charge_type="PostPaid",  # pay-as-you-go: a scaled-in node stops billing
                spot_strategy="NoSpot",  # a reclaimed spot node kills the whole synchronous training job
                scaling_config=ecs_scaling_config(s),
                system_disk_category=gp.ecs.system_disk_category,
                system_disk_size=gp.ecs.system_disk_gib,
                labels=gpu_pool_labels(s),
                taints=gpu_pool_taints(s),
                update_nodes=UPDATE_NODES,
                tags=args.tags,
                # The autoscaler owns the node count; Pulumi must not reset it on the next `up`.
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    ignore_changes=["desired_size", *ACK_POOL_TAG_IGNORE])),
            )

