"""Pure checks of what a stack exposes or grants beyond its workloads' needs: bucket policies open to anyone,
the API server on the internet, pods with host access, images by tag, RAM policies that grant everything,
internet-facing LoadBalancer Services, GPU-pool labels that understate the pool, and bare Sandboxes with no
egress policy. Plain data in, messages out, like `checks` (whose resource and sentinel helpers they share);
`verl_ack_policy.pack` wires each to the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from verl_ack_policy.checks import (
    GPUS_PER_NODE_LABEL,
    NETWORK_POLICY,
    NODE_POOL,
    Resource,
    Violation,
    _as_int,
    _labels,
    _namespace,
    dig,
    gpus_from_instance_name,
    is_gpu_pool,
    is_unknown,
    k8s_kind,
    pod_specs,
    policy_types,
    selector_matches,
)

CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")


def _statements(document: Any) -> list[Mapping[str, Any]]:
    """Statements of a RAM/OSS policy document given as JSON text or a mapping ([] when unknown or unreadable)."""
    if is_unknown(document) or document is None:
        return []
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    statements = document.get("Statement") if isinstance(document, Mapping) else None
    if isinstance(statements, Mapping):
        statements = [statements]
    return [s for s in statements or [] if isinstance(s, Mapping)]


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


# ============================================================================================== OSS bucket policy
OSS_BUCKET_POLICY = "alicloud:oss/bucketPolicy:BucketPolicy"


def _anyone(principal: Any) -> bool:
    """Principal "*" (OSS bucket policies also accept ["*"] and {"RAM": ["*"]}-style maps of lists)."""
    if isinstance(principal, Mapping):
        return any(_anyone(v) for v in principal.values())
    return "*" in _as_list(principal)


def check_bucket_policy(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No Allow statement for Principal "*": such a statement publishes objects whatever the ACL says (the
    public-access block refuses to store one, but a policy written before it, or with the block off, stays)."""
    if resource_type == OSS_BUCKET_POLICY:
        document = props.get("policy")
    elif resource_type == "alicloud:oss/bucket:Bucket":
        document = props.get("policy")
    else:
        return []
    return [f"policy Statement[{i}] allows {s.get('Action')!r} to Principal '*' (anyone, unauthenticated): name the RAM "
            "roles or users that need access; only Deny statements may use Principal '*'"
            for i, s in enumerate(_statements(document)) if s.get("Effect") == "Allow" and _anyone(s.get("Principal"))]


# ============================================================================================== API server
CLUSTER_TYPES = ("alicloud:cs/managedKubernetes:ManagedKubernetes", "alicloud:cs/kubernetes:Kubernetes")


def stack_of(urn: str) -> str:
    """urn:pulumi:STACK::project::type::name -> STACK."""
    return urn.split(":", 3)[2].split("::", 1)[0] if urn.startswith("urn:pulumi:") else ""


def check_public_api_server(resources: Iterable[Resource], allowed_stacks: Iterable[str] = ()) -> list[Violation]:
    """The API server has no internet endpoint (slbInternetEnabled) unless the stack is allow-listed: the
    endpoint is reachable by anyone, guarded only by credentials and whatever ACL is set outside the program."""
    allowed = set(allowed_stacks)
    return [("slbInternetEnabled is true: the cluster's API server (6443) has an internet endpoint. Set "
             "cluster.public_api: false and run Pulumi from inside the VPC, or restrict the endpoint's listener with "
             "an access-control list (docs/cloud.md) and list this stack in the policy config allowedStacks", r.urn)
            for r in resources if r.type in CLUSTER_TYPES and r.props.get("slbInternetEnabled") is True
            and stack_of(r.urn) not in allowed]


# ============================================================================================== host access
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
RAY_GROUP = "ray.io"


def privileged_namespaces(resources: Iterable[Resource]) -> set[str]:
    """Namespaces the stack itself labels `enforce: privileged` (the multi-node Ray pods' namespace)."""
    out = set()
    for r in resources:
        if r.type == "kubernetes:core/v1:Namespace" and dig(r.props, "metadata", "labels", PSA_ENFORCE) == "privileged":
            name = dig(r.props, "metadata", "name")
            if isinstance(name, str):
                out.add(name)
    return out


def host_access(pod: Mapping[str, Any]) -> list[str]:
    """What a pod spec takes from its node: privileged containers, hostPath volumes, host namespaces."""
    found = [f"{key} is true" for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key) is True]
    found += [f"volumes[{i}] mounts hostPath {dig(v, 'hostPath', 'path')!r}"
              for i, v in enumerate(pod.get("volumes") or []) if isinstance(v, Mapping) and "hostPath" in v]
    for group in CONTAINER_GROUPS:
        for i, c in enumerate(pod.get(group) or []):
            if isinstance(c, Mapping) and dig(c, "securityContext", "privileged") is True:
                found.append(f"{group}[{i}] ({c.get('name')}) is privileged")
    return found


def check_host_access(resources: Iterable[Resource], allowed_namespaces: Iterable[str] = (),
                      default_namespace: str = "default") -> list[Violation]:
    """No pod takes host access (privileged, hostPath, hostNetwork/PID/IPC) except the Ray pods in a namespace
    the stack labels privileged (multi-node RDMA needs the host network) and namespaces the config allows.
    Sandbox pods have a stricter policy of their own (sandbox-pod-hardening)."""
    resources = list(resources)
    ray_ok = privileged_namespaces(resources)
    allowed = set(allowed_namespaces)
    violations: list[Violation] = []
    for r in resources:
        if not r.type.startswith("kubernetes:"):
            continue
        api, kind = k8s_kind(r.type, r.props)
        if api.startswith("agents.kruise.io/"):
            continue
        namespace = _namespace(r.props, default_namespace)
        if namespace in allowed or (api.startswith(RAY_GROUP + "/") and namespace in ray_ok):
            continue
        for path, pod in pod_specs(r.type, r.props):
            for what in host_access(pod):
                violations.append((f"{path}: {what}; {kind} pods outside the sandboxes and the Ray namespace get no "
                                   "host access (it is the node's root); drop it or allow the namespace "
                                   "(allowedNamespaces) deliberately", r.urn))
    return violations


# ============================================================================================== images
def check_image_digests(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every container image is pinned by digest (@sha256:...): a tag can be re-pushed under the same name."""
    problems = []
    for path, pod in pod_specs(resource_type, props):
        for group in CONTAINER_GROUPS:
            for i, c in enumerate(pod.get(group) or []):
                image = c.get("image") if isinstance(c, Mapping) else None
                if isinstance(image, str) and not is_unknown(image) and "@sha256:" not in image:
                    problems.append(f"{path}.{group}[{i}] runs {image!r} by tag; pin it by digest "
                                    "(image@sha256:..., `docker buildx imagetools inspect`)")
    return problems


def image_tag(image: str) -> str | None:
    """The tag of an image reference, or None when it has none (`repo`, `host:5000/repo`, `repo@sha256:...`): a
    tag is what follows the last `:` of the last path component (Docker reference grammar, distribution/reference
    reference.go: `name [":" tag] ["@" digest]`; a registry's port sits before the first `/`)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def check_image_tags(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No container image floats: one with neither a tag nor a digest is pulled as `:latest` (Kubernetes docs,
    Images: "If you don't specify a tag, Kubernetes assumes you mean the tag latest"), and `:latest` is whatever was
    pushed last, so the next node pull (a new pod, an evicted one) may run other code. A digest pins whatever the
    tag says; a version tag passes here (images-pinned-by-digest reports it)."""
    problems = []
    for path, pod in pod_specs(resource_type, props):
        for group in CONTAINER_GROUPS:
            for i, c in enumerate(pod.get(group) or []):
                image = c.get("image") if isinstance(c, Mapping) else None
                if not isinstance(image, str) or is_unknown(image) or "@sha256:" in image:
                    continue
                tag = image_tag(image)
                if tag is None:
                    problems.append(f"{path}.{group}[{i}] runs {image!r} with no tag and no digest, which pulls "
                                    "`:latest`; pin a version tag or a digest")
                elif tag == "latest":
                    problems.append(f"{path}.{group}[{i}] runs {image!r}: `:latest` is whatever was pushed last; "
                                    "pin a version tag or a digest")
    return problems


# ============================================================================================== RAM
RAM_POLICY = "alicloud:ram/policy:Policy"
ATTACHMENTS = ("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment",
               "alicloud:ram/userPolicyAttachment:UserPolicyAttachment",
               "alicloud:ram/groupPolicyAttachment:GroupPolicyAttachment")
# System policies that grant every action (or every RAM action, which grants itself everything else).
ADMIN_POLICIES = frozenset({"AdministratorAccess", "AliyunRAMFullAccess"})
EVERYTHING = frozenset({"*", "*:*", "ram:*"})


def check_ram_least_privilege(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No RAM policy allows every action (`*`, `*:*`) or every RAM action (`ram:*`, which can grant itself the
    rest), and no attachment grants AdministratorAccess or AliyunRAMFullAccess."""
    if resource_type == RAM_POLICY:
        problems = []
        for i, s in enumerate(_statements(props.get("policyDocument") or props.get("document"))):
            if s.get("Effect") != "Allow":
                continue
            broad = sorted(a for a in _as_list(s.get("Action")) if isinstance(a, str) and a in EVERYTHING)
            if broad:
                problems.append(f"policyDocument Statement[{i}] allows Action {', '.join(broad)}: list the actions "
                                "the role needs (docs/ram-policy.json is the deployer's own list)")
        return problems
    if resource_type in ATTACHMENTS:
        name = props.get("policyName")
        if isinstance(name, str) and name in ADMIN_POLICIES:
            return [f"attaches the system policy {name}, which grants every action; attach a custom policy with "
                    "the actions the role needs"]
    return []


# ============================================================================================== Services
SERVICE = "kubernetes:core/v1:Service"
# The cloud controller manager's annotation for the CLB address type: `internet` (its default) or `intranet`; the
# older `alicloud-` prefix is still honoured (Alibaba Cloud ACK, "Configure a Classic Load Balancer by using
# annotations", https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/add-annotations-to-the-yaml-file-of-a-service-to-configure-clb-instances).
ADDRESS_TYPE = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type"
LEGACY_ADDRESS_TYPE = "service.beta.kubernetes.io/alicloud-loadbalancer-address-type"


def check_load_balancer_service(props: Mapping[str, Any], allow_internet: bool = False) -> list[str]:
    """A LoadBalancer Service is intranet unless allowed: without the annotation the CCM buys an internet CLB."""
    if dig(props, "spec", "type") != "LoadBalancer" or allow_internet:
        return []
    annotations = dig(props, "metadata", "annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    address = annotations.get(ADDRESS_TYPE, annotations.get(LEGACY_ADDRESS_TYPE))
    if is_unknown(address) or is_unknown(annotations) or address == "intranet":
        return []
    return [f"a LoadBalancer Service with {ADDRESS_TYPE}={address!r} gets an internet-facing load balancer: set it to "
            "intranet, use a ClusterIP Service, or allow it in the policy config (allowInternet)"]


# ============================================================================================== GPU labels
GPU_RESOURCE = "nvidia.com/gpu"


def _pod_gpus(pod: Mapping[str, Any]) -> int:
    """GPUs a pod needs on one node: the sum over its containers of each one's limit (an extended resource's
    request, when given, equals its limit)."""
    total = 0
    for c in pod.get("containers") or []:
        if isinstance(c, Mapping):
            n = _as_int(dig(c, "resources", "limits", GPU_RESOURCE))
            total += n if n is not None else (_as_int(dig(c, "resources", "requests", GPU_RESOURCE)) or 0)
    return total


def check_gpu_labels(resources: Iterable[Resource]) -> list[Violation]:
    """A GPU pool's verl-ack/gpus-per-node label (what gpu-budget counts) is not below the GPUs its instance type
    has, nor below what a pod scheduled onto the pool requests: a label that understates lets the budget pass a
    pool that rents more GPUs than it says."""
    resources = list(resources)
    pods = [(r, path, pod) for r in resources if r.type.startswith("kubernetes:")
            for path, pod in pod_specs(r.type, r.props)]
    violations: list[Violation] = []
    for pool in (r for r in resources if r.type == NODE_POOL and is_gpu_pool(r.props)):
        labels = _labels(pool.props)
        label = _as_int(labels.get(GPUS_PER_NODE_LABEL))
        if label is None:
            continue
        types = pool.props.get("instanceTypes")
        for t in types if isinstance(types, list) else []:
            n = gpus_from_instance_name(t) if isinstance(t, str) else None
            if n is not None and n > label:
                violations.append((f"label {GPUS_PER_NODE_LABEL}={label} but instance type {t} has {n} GPUs: the budget "
                                   "would undercount the pool; label it with the instance type's count", pool.urn))
        for r, path, pod in pods:
            selector = pod.get("nodeSelector")
            if not isinstance(selector, Mapping) or not selector or any(is_unknown(v) for v in selector.values()):
                continue
            if all(labels.get(k) == v for k, v in selector.items()) and (n := _pod_gpus(pod)) > label:
                violations.append((f"label {GPUS_PER_NODE_LABEL}={label} but {r.urn.rsplit('::', 1)[-1]} {path} requests "
                                   f"{n} {GPU_RESOURCE} on this pool's nodes: the label understates the nodes (or the pod "
                                   "never schedules); label the pool with its real GPUs per node", pool.urn))
    return violations


# ============================================================================================== bare Sandboxes
SANDBOX_KINDS = ("Sandbox",)


def check_bare_sandbox_isolation(resources: Iterable[Resource], default_namespace: str = "default") -> list[Violation]:
    """A bare Sandbox (agents.kruise.io, outside any SandboxSet) runs model-written code like the pool's: it too
    must be selected by an Egress NetworkPolicy."""
    resources = list(resources)
    policies = [r for r in resources if r.type == NETWORK_POLICY]
    violations: list[Violation] = []
    for r in resources:
        if not r.type.startswith("kubernetes:"):
            continue
        api, kind = k8s_kind(r.type, r.props)
        if not (api.startswith("agents.kruise.io/") and kind in SANDBOX_KINDS):
            continue
        labels = dig(r.props, "spec", "template", "metadata", "labels")
        if is_unknown(labels):
            continue
        namespace = _namespace(r.props, default_namespace)
        selected: Optional[bool] = False
        for pol in policies:
            spec = pol.props.get("spec")
            if not isinstance(spec, Mapping) or _namespace(pol.props, default_namespace) != namespace:
                continue
            matched = selector_matches(spec.get("podSelector"), labels if isinstance(labels, Mapping) else {})
            if matched is None:
                selected = None
                break
            if matched and "Egress" in policy_types(spec):
                selected = True
        if selected is False:
            violations.append((f"Sandbox {dig(r.props, 'metadata', 'name')!r} in namespace {namespace!r} is selected by no "
                               "NetworkPolicy with policyTypes [Egress]: its model-written code could reach the metadata "
                               "service and the internet; label its template like the SandboxSet's pods", r.urn))
    return violations
