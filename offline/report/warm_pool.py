"""The warm sandbox pool's cold start: when the SandboxSet's first sandboxes answer, from the recorded graph.

The warm pool is ready once the code-interpreter image is on the sandbox nodes and a pod has started
(`latency.sandbox_start_minutes`: envd init and the startup probe). The pull starts when the image-pull DaemonSet
(components/workloads/sandbox/image_pull.py) is created, else with the SandboxSet's own pods. A registry's VPC
endpoint in the stack's region (`registry-vpc.<region>.aliyuncs.com`, `<instance>-registry-vpc.<region>.cr.
aliyuncs.com`, `registry-<region>-vpc.ack.aliyuncs.com`) is pulled at the node's rate; any other host (another
region, a public endpoint, a registry outside Alibaba Cloud) is reached through the NAT, whose bandwidth the
sandbox nodes share. The first rollout's first tool call claims a sandbox, so a pool that is ready after verl's
start delays the first step (offline/report/latency/).

Pure functions of (recording, settings); every number is a modelled ESTIMATE (docs/latency.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from components.config import Settings
from components.model.wait import mbit_minutes, nat_cap_mbps

SANDBOXSET_TYPE = "kubernetes:agents.kruise.io/v1alpha1:SandboxSet"
SANDBOX_PULL_ROLE = "sandbox-image-pull"  # components/workloads/sandbox/image_pull.py SANDBOX_IMAGE_PULL_ROLE

# Hosts whose name gives their region and whether they are a VPC endpoint: ACK's public registry
# (registry-<region>[-vpc].ack.aliyuncs.com), ACR Personal (registry[-vpc].<region>.aliyuncs.com) and ACR
# Enterprise (<instance>-registry[-vpc].<region>.cr.aliyuncs.com).
_ACK_HOST = re.compile(r"registry-(?P<region>[a-z]+-[a-z0-9-]+?)(?P<vpc>-vpc)?\.ack\.aliyuncs\.com")
_ACR_HOST = re.compile(r"(?:[a-z0-9-]+-)?registry(?P<vpc>-vpc)?(?:-[a-z]+)*\.(?P<region>[a-z0-9-]+)\.(?:cr\.)?aliyuncs\.com")


def in_region_endpoint(host: str, region: str) -> bool:
    """Whether `host` is a registry's VPC endpoint in `region` (pulled inside the VPC, no NAT)."""
    match = _ACK_HOST.fullmatch(host) or _ACR_HOST.fullmatch(host)
    return bool(match and match["vpc"] and match["region"] == region)


@dataclass(frozen=True)
class WarmPool:
    image: str
    via_nat: bool
    mbps: float  # per sandbox node
    pull_start: float  # minutes from the start of `pulumi up`
    pull_minutes: float
    ready: float  # the first warm sandboxes answer


def sandbox_nodes(s: Settings) -> int:
    pool = s.sandbox.dedicated_pool or s.system_pool
    return pool.nodes


def warm_pool(s: Settings, recording, finish) -> Optional[WarmPool]:
    """The warm pool's timing, or None when the graph has no SandboxSet. `finish(urn)` is the schedule's finish."""
    sets = recording.by_type(SANDBOXSET_TYPE)
    if not sets:
        return None
    pulls = [r for r in recording.resources
             if ((r.inputs.get("metadata") or {}).get("labels") or {}).get("verl-ack/role") == SANDBOX_PULL_ROLE]
    image = s.sandbox_image()
    host = image.split("/", 1)[0]
    L = s.latency
    via_nat = not in_region_endpoint(host, s.region)
    rate = L.node_pull_mbps
    cap = nat_cap_mbps(s)
    if via_nat and cap is not None:
        rate = min(rate, cap / sandbox_nodes(s))
    minutes = mbit_minutes(L.sandbox_image_gib * 2**30, rate)
    created = finish(sets[0].urn)
    start = finish(pulls[0].urn) if pulls else created
    return WarmPool(image, via_nat, rate, start, minutes, max(created, start + minutes) + L.sandbox_start_minutes)
