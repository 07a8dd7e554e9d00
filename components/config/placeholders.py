"""Placeholders: the values a shipped stack file carries where only the user's account has the real one.

Defined once, here. A value is a placeholder when it carries the marker the shipped files use and a real id
never has: a run of five zeros (cloud ids are random: ACR `cri-` + 16 letters/digits, Lingjun `i` + 18 digits,
VPC `vpc-` + 21), the counting run `0123456789abcdef`, an all-zero image digest, or a domain reserved for
documentation (RFC 2606/6761: example.com/.net/.org, .example, .test, .invalid, .localhost). The offline plan
renders them and lists them as the "Before your first `up`" checklist (offline/report/checklist.py); a real
`pulumi preview` refuses each, naming the field and where the real value is found
(components/cloud/account_checks.py `refuse_placeholders`). The odds that a real random id holds five zeros in a
row are about 1 in 7,000 for an 18-digit Lingjun id (docs/uncertain-facts.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.config.root import Settings

_ID_MARKER = re.compile(r".*(00000|0123456789abcdef).*")
_ZERO_DIGEST = "sha256:" + "0" * 64
_RESERVED_DOMAIN = re.compile(r"(.*\.)?(example\.(com|net|org)|[^.]+\.(example|test|invalid|localhost))")


@dataclass(frozen=True)
class Placeholder:
    field: str
    value: str
    where: str  # where the user finds the real value


def is_placeholder_id(value: str | None) -> bool:
    return bool(value) and _ID_MARKER.fullmatch(value) is not None


def is_placeholder_domain(value: str | None) -> bool:
    return bool(value) and _RESERVED_DOMAIN.fullmatch(value) is not None


def placeholders(s: Settings) -> list[Placeholder]:
    """Every placeholder the settings hold, in the order of the stack file's sections."""
    found: list[tuple[str, str | None, bool, str]] = []
    lj = s.gpu_pool.lingjun
    if s.gpu_pool.kind == "lingjun" and lj is not None:
        found += [
            ("gpu_pool.lingjun.eflo_cluster_id", lj.eflo_cluster_id, is_placeholder_id(lj.eflo_cluster_id),
             "the Lingjun console (PAI Lingjun intelligent computing) > Clusters: the id of the cluster your "
             "machines were bought into"),
            ("gpu_pool.lingjun.eflo_node_group_id", lj.eflo_node_group_id, is_placeholder_id(lj.eflo_node_group_id),
             "the same console > the cluster's node groups: the id of the group holding the machines")]
        found += [(f"gpu_pool.lingjun.node_ids[{i}]", v, is_placeholder_id(v),
                   "the Lingjun console > the node group > Nodes: the node ids (e01-...), one per node")
                  for i, v in enumerate(lj.node_ids)]
        if sg := lj.security_group_id:
            found.append(("gpu_pool.lingjun.security_group_id", sg, is_placeholder_id(sg),
                          "the Lingjun console > the cluster > network: the nodes' security group (sg-...)"))
    net = s.cluster.network
    if s.cluster.mode == "existing":
        cid = s.cluster.existing_cluster_id
        found.append(("cluster.existing_cluster_id", cid, is_placeholder_id(cid),
                      "the ACK console > Clusters: the cluster id (c...)"))
    if s.cluster.mode == "existing" or net.vpc_id:
        # an existing cluster's network, or the Lingjun machines' own VPC a new cluster is created in
        where = ("the ACK console > the cluster > Basic information" if s.cluster.mode == "existing"
                 else "the VPC console: the VPC and vSwitches the Lingjun node group's machines sit in")
        found.append(("cluster.network.vpc_id", net.vpc_id, is_placeholder_id(net.vpc_id), f"{where}: its VPC"))
        found += [(f"cluster.network.node_vswitch_ids[{i}]", v, is_placeholder_id(v),
                   f"{where}: its node vSwitches, in zones order") for i, v in enumerate(net.node_vswitch_ids)]
        found += [(f"cluster.network.pod_vswitch_ids[{i}]", v, is_placeholder_id(v),
                   f"{where}: the Terway pod vSwitches, in zones order")
                  for i, v in enumerate(net.pod_vswitch_ids)]
    img = s.image
    if img.source == "built" and s.kind != "experiment":
        if img.registry == "enterprise":
            found.append(("image.enterprise_instance_id", img.enterprise_instance_id,
                          is_placeholder_id(img.enterprise_instance_id),
                          "the ACR console > Instances: the Enterprise Edition instance id (cri-...)"))
        found.append(("image.digest", img.digest, img.digest == _ZERO_DIGEST,
                      "the image workflow's output after it pushed the image built from image/ (or "
                      "`docker buildx imagetools inspect <image>`)"))
    if s.sandbox.domain:
        for field in ("domain", "dns_zone"):
            value = getattr(s.sandbox, field)
            found.append((f"sandbox.{field}", value, is_placeholder_domain(value),
                          "a domain you own whose zone is hosted in Alibaba Cloud DNS (Alidns console > Domain "
                          "Names); the wildcard certificate must cover `*.<sandbox.domain>`"))
    return [Placeholder(field, str(value), where) for field, value, marked, where in found if marked]
