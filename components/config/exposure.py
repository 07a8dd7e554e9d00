"""Rules that keep a stack file from opening the cluster: CIDRs that would admit the internet to ports that
carry no authentication, system namespaces that would be labelled privileged or filled with Ray pods, and
credential-shaped values in settings that are written in plaintext onto every cloud resource and into the plan.

Pure functions over plain values, so the root model's validators (root.py, one per rule, each named for it) and
the tests call the same code.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

# Where the admitted sources of the Ray head ports and of host-network Ray pods can sit: the private ranges a VPC
# is built from (RFC 1918) and the shared address space (RFC 6598) that Alibaba Cloud uses inside VPCs. A CIDR
# reaching outside them admits internet addresses to the Ray job API (8265, behind only the job token), GCS (6379) and
# the client port (10001), or to MLflow through its NetworkPolicy.
PRIVATE_RANGES = tuple(ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                           "100.64.0.0/10"))

# Namespaces that are not the stack's to take over. Kubernetes' initial namespaces and its reserved `kube-` prefix
# ("Avoid creating namespaces with the prefix kube-, since it is reserved for Kubernetes system namespaces",
# kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/), and the add-on namespaces this program
# installs controllers into (components/cloud/addons.py KUBERAY_NAMESPACE, components/cloud/identity.py
# CSI_FUSE_NAMESPACE; tests/test_stacks.py keeps the two lists equal).
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
ADDON_NAMESPACES = frozenset({"kuberay-system", "ack-csi-fuse"})
RESERVED_NAMESPACE_PREFIX = "kube-"

# The credential shapes of the job.env rule (root.py SECRET_ENV_VALUE), searched anywhere in a value: a tag value
# is short and may carry the credential after other text.
SECRET_VALUE = re.compile(r"(?<![A-Za-z0-9])(hf_|ghp_|gho_|github_pat_|sk-|LTAI|AKIA|xox[abp]-|glpat-)[A-Za-z0-9_-]{12,}|"
                          r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def outside_private_ranges(cidr: str) -> bool:
    """Whether the CIDR holds any address outside the VPC-internal ranges (0.0.0.0/0 holds them all)."""
    net = ipaddress.IPv4Network(cidr, strict=False)
    return not any(net.subnet_of(private) for private in PRIVATE_RANGES)


def world_open_problems(field: str, cidrs: Iterable[str], what: str) -> list[str]:
    """One message per CIDR of `field` that reaches outside the private ranges."""
    return [f"{field} lists {cidr}, which includes internet addresses: {what}. List only the VPC-internal CIDRs "
            f"(inside {', '.join(str(r) for r in PRIVATE_RANGES)}) of the vSwitches that need access"
            for cidr in cidrs if outside_private_ranges(cidr)]


def system_namespace_problem(field: str, name: str) -> str | None:
    if name in SYSTEM_NAMESPACES or name.startswith(RESERVED_NAMESPACE_PREFIX):
        return (f"{field} {name!r} is a Kubernetes system namespace (default, or the reserved kube- prefix): the "
                "program labels its namespaces with a Pod Security level (privileged for the Ray namespace), deletes "
                "them on destroy and fills them with its pods; give the stack a namespace of its own")
    if name in ADDON_NAMESPACES:
        return (f"{field} {name!r} is the namespace of an add-on this program installs (KubeRay operator, OSS "
                "CSI-FUSE); give the stack a namespace of its own")
    return None


def secret_value_problems(field: str, values: Iterable[str]) -> list[str]:
    return [f"{field} holds a value shaped like a credential (an AccessKey id, token or private key): tags and "
            "other settings are written in plaintext onto every cloud resource, into the state and into the plan; "
            "remove it, rotate the credential, and pass credentials as secret config (`pulumi config set --secret`)"
            for value in values if SECRET_VALUE.search(value)]
