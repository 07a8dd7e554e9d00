"""Placeholders: the values a shipped stack file carries where only the user's account has the real one.

Declared once, in the stack file: a `# replace` comment on the line of a setting (`# replace: where to find the
real value` when this module does not know where). The "Before your first `up`" checklist lists every declared
line (`declared_placeholders`, offline/report/checklist.py), so a placeholder marked in the file cannot be missing
from the checklist; tests hold every value recognised below to carry the mark too.

Recognised by value, here (what a real `pulumi preview` refuses, as it sees no comments): a value is a
placeholder when it carries the marker the shipped files use and a real id never has: a run of five zeros (cloud
ids are random: ACR `cri-` + 16 letters/digits, Lingjun `i` + 18 digits, VPC `vpc-` + 21), the counting run
`0123456789abcdef`, an all-zero image digest, or a domain reserved for documentation (RFC 2606/6761:
example.com/.net/.org, .example, .test, .invalid, .localhost). The offline plan lists them in the checklist too
(a copy of a stack file without its comments); a real `pulumi preview` refuses each, naming the field and where
the real value is found (components/cloud/account_checks.py `refuse_placeholders`). The odds that a real random
id holds five zeros in a
row are about 1 in 7,000 for an 18-digit Lingjun id (docs/uncertain-facts.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

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


# `# replace`, `# replace: the CIDRs of ...`, `# replace with your cluster id` after a setting on its line.
_REPLACE_MARK = re.compile(r"(?:^|\s)#\s*replace\b[\s:]*(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class Declared:
    field: str  # the setting's dotted name under verl-ack:settings
    value: str  # as written in the file
    note: str  # the comment after `replace`, often where the real value is found


def _value_text(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return "[" + ", ".join(_value_text(n) for n in node.value) + "]"
    return "{...}"


def declared_placeholders(text: str) -> list[Declared]:
    """Every setting a stack file's text marks `# replace` on its own line, in file order."""
    try:
        doc = yaml.compose(text)
    except yaml.YAMLError:
        return []  # the loader reports what is wrong with the file
    by_line: dict[int, tuple[str, yaml.Node]] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        for key, value in node.value:
            here = (*path, str(key.value))
            by_line[key.start_mark.line] = (".".join(here), value)
            walk(value, here)

    walk(doc, ())
    out = []
    for i, line in enumerate(text.splitlines()):
        mark = _REPLACE_MARK.search(line)
        if not mark or i not in by_line or line.lstrip().startswith("#"):
            continue
        name, value = by_line[i]
        for prefix in ("config.verl-ack:settings.", "config.settings."):
            if name.startswith(prefix):
                out.append(Declared(name[len(prefix):], _value_text(value), mark.group(1).strip()))
    return out
