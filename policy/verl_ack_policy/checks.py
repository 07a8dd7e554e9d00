"""Pure checks behind the verl-ack policy pack: plain data in, violation messages out.

Every function here takes resource properties as plain dicts/lists (camelCase keys, as Pulumi hands them to a
policy pack) and returns a list of messages, one per violation; an empty list means compliant. They know nothing
about `pulumi_policy`, so tests call them directly; `verl_ack_policy.pack` adapts them to the SDK's callbacks.

A property that is not known yet (a computed value during `pulumi preview`) arrives as one of the SDK's
"unknown" sentinel strings. A check never reports a violation on an unknown value: it cannot know, and the
same policy runs again on `pulumi up` with the real value.

Longer than 500 lines because it is the pack's whole rule set: one short section per policy, all sharing the
sentinel and resource helpers at the top, loaded by the pack's own virtualenv; the sections are independent
and read top to bottom.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Optional

import yaml

# The sentinels pulumi_policy substitutes for values that are unknown during preview
# (pulumi_policy/proxy.py, UNKNOWN_*_VALUE). tests/test_policy.py pins them to the installed SDK.
UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
    "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
    "e48ece36-62e2-4504-bad9-02848725956a",  # archive
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
})


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in UNKNOWN_SENTINELS


def dig(obj: Any, *path: str | int) -> Any:
    """obj[path[0]][path[1]]..., or None when a step is missing or not a container."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(obj, list) or key >= len(obj):
                return None
        elif not isinstance(obj, Mapping):
            return None
        elif key not in obj:
            return None
        obj = obj[key]
    return obj


# ============================================================================================== OSS
OSS_BUCKET = "alicloud:oss/bucket:Bucket"
OSS_BUCKET_ACL = "alicloud:oss/bucketAcl:BucketAcl"
OSS_PUBLIC_ACCESS_BLOCK = "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock"
# OSS server-side encryption algorithms (pulumi_alicloud oss BucketServerSideEncryptionRule.sse_algorithm).
SSE_ALGORITHMS = ("AES256", "KMS")


def check_oss_bucket(props: Mapping[str, Any]) -> list[str]:
    """A bucket holds datasets, model weights and checkpoints: encrypted at rest and never public."""
    problems = []
    rule = props.get("serverSideEncryptionRule")
    algorithm = dig(rule, "sseAlgorithm")
    if not is_unknown(rule) and not is_unknown(algorithm) and algorithm not in SSE_ALGORITHMS:
        problems.append(
            f"serverSideEncryptionRule.sseAlgorithm is {algorithm!r}; set server_side_encryption_rule="
            '{"sse_algorithm": "AES256"} (or "KMS") so objects are encrypted at rest')
    acl = props.get("acl")
    if acl is not None and not is_unknown(acl) and acl != "private":
        problems.append(
            f"acl is {acl!r}; a bucket of training data and checkpoints must be private "
            "(drop the deprecated acl argument and add oss.BucketAcl(acl='private'))")
    return problems


def check_oss_bucket_acl(props: Mapping[str, Any]) -> list[str]:
    acl = props.get("acl")
    if is_unknown(acl) or acl == "private":
        return []
    return [f"acl is {acl!r}; only 'private' is allowed (public-read exposes checkpoints and datasets)"]


# ============================================================================================== secrets
# Key words that make a literal value suspicious. A key is split into words (camelCase, '-', '_', '.'),
# so HF_TOKEN, apiKey and E2B-API-KEY match while TOKENIZERS_PARALLELISM (verl's default env) does not.
# Short forms count too: PW, DB_PASS, PGPASSWORD's PWD, a CREDENTIALS literal.
SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "apikey", "accesskey", "privatekey",
                          "pw", "pwd", "pass", "passphrase", "credential", "credentials"})
SECRET_WORD_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key")})
# A key whose last word names a *reference* to a secret (SECRET_NAME, TOKEN_PATH, secretKeyRef,
# PASSWORD_FILE) carries a pointer, not the secret itself.
REFERENCE_WORDS = frozenset({
    "name", "names", "ref", "path", "file", "dir", "url", "uri", "endpoint", "type", "id", "ttl", "length",
    "header", "env", "enabled", "expiry", "expires",
})
# A value that is only a variable reference ($(HF_TOKEN) in Kubernetes env, ${HF_TOKEN} in templates) is
# filled in at run time from somewhere else.
_VARIABLE_REFERENCE = re.compile(r"^\$(\([A-Za-z_][A-Za-z0-9_]*\)|\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")
# Value shapes of credentials this project handles, whatever key they hide under.
SECRET_VALUE_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an Alibaba Cloud AccessKey id", re.compile(r"\bLTAI[A-Za-z0-9]{12,30}\b")),
    ("a PEM private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("an API key (sk-...)", re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    # scheme://user:password@host (postgresql://, mysql://, redis://, https://): the password is in the value,
    # whatever the key; a password that is only a variable ($(PW), ${PW}) is filled in at run time.
    ("a URL with a password", re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:(?!\$[({]?[A-Za-z_])[^\s/@]+@")),
    # An AccessKey secret is 30 letters and digits: no Alibaba page states the length, secret scanners do (gitleaks'
    # rule alibaba-secret-key, [a-z0-9]{30} case-insensitive; docs/uncertain-facts.md). As a whole value mixing
    # upper- and lower-case letters and digits it is taken for one whatever key it hides under (a hash is hex, a
    # name has separators).
    ("an Alibaba Cloud AccessKey secret",
     re.compile(r"^(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{30}$")),
)


def key_words(key: str) -> list[str]:
    """'E2B-API-KEY' -> ['e2b', 'api', 'key']; 'adminApiKey' -> ['admin', 'api', 'key']."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", key)
    spaced = re.sub(r"([0-9])([A-Z][a-z])", r"\1 \2", spaced)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_key(key: str) -> bool:
    words = key_words(key)
    if not words or words[-1] in REFERENCE_WORDS:
        return False
    if SECRET_WORDS.intersection(words):
        return True
    return any(pair in SECRET_WORD_PAIRS for pair in zip(words, words[1:], strict=False))


# "-----BEGIN" base64-encoded starts with this (whatever follows): a kubeconfig's client-key-data, a Secret's data.
_BASE64_PEM = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}")


def _base64_pem_kind(value: str) -> Optional[str]:
    for match in _BASE64_PEM.finditer(value):
        head = match.group(0)[:120]
        try:
            decoded = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
        except ValueError:
            continue
        if re.search(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----", decoded):
            return "a base64-encoded PEM private key"
    return None


def secret_value_kind(value: str) -> Optional[str]:
    """What kind of credential the string contains, or None."""
    for kind, pattern in SECRET_VALUE_PATTERNS:
        if pattern.search(value):
            return kind
    return _base64_pem_kind(value)


def _is_literal(value: Any) -> bool:
    return (isinstance(value, str) and value.strip() != "" and not is_unknown(value)
            and not _VARIABLE_REFERENCE.match(value.strip()) and value.strip().lower() not in ("true", "false"))


def secret_in_pair(key: str, value: Any) -> Optional[str]:
    """Why (key, value) looks like a literal credential, or None."""
    if not isinstance(value, str) or is_unknown(value):
        return None
    kind = secret_value_kind(value)
    if kind:
        return f"value looks like {kind}"
    if is_secret_key(key) and _is_literal(value):
        return "the name says it is a credential and the value is a literal"
    return None


def _parse_document(text: str) -> Any:
    """A ConfigMap value that is a JSON or YAML document, parsed; anything else comes back unchanged."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return doc if isinstance(doc, (dict, list)) else text


def find_secrets(obj: Any, path: str = "", parse_strings: bool = False) -> list[str]:
    """Literal credentials anywhere in a nested structure, as 'path: reason' messages.

    With parse_strings, string values that are JSON/YAML documents (a ConfigMap's mcp_server.json) are
    searched too, so {"headers": {"E2B-API-KEY": "..."}} inside a file is caught.
    """
    found: list[str] = []
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(value, str):
                reason = secret_in_pair(str(key), value)
                if reason:
                    found.append(f"{sub}: {reason}")
                    continue
                if parse_strings and not is_unknown(value):
                    doc = _parse_document(value)
                    if not isinstance(doc, str):
                        found.extend(find_secrets(doc, sub, parse_strings=False))
            else:
                found.extend(find_secrets(value, sub, parse_strings))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found.extend(find_secrets(value, f"{path}[{i}]", parse_strings))
    elif isinstance(obj, str) and not is_unknown(obj):
        kind = secret_value_kind(obj)
        if kind:
            found.append(f"{path}: value looks like {kind}")
    return found


CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
K8S_SECRET = "kubernetes:core/v1:Secret"
# Helm releases and charts: their values are stored in the release (a Secret of the release, readable by
# whoever can read the namespace's Secrets, and in the Pulumi state) and often rendered into ConfigMaps.
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")
_K8S_TOKEN = re.compile(r"^kubernetes:(?P<api>[^:]+):(?P<kind>[^:]+)$")


def k8s_kind(resource_type: str, props: Mapping[str, Any]) -> tuple[str, str]:
    """(apiVersion, kind) of a Kubernetes resource, from its type token or, failing that, its body."""
    match = _K8S_TOKEN.match(resource_type)
    if match and "/" in match["api"]:  # kubernetes:apps/v1:Deployment, kubernetes:ray.io/v1:RayJob
        return match["api"].removeprefix("core/"), match["kind"]
    # generic tokens (kubernetes:yaml:..., a CustomResource registered under a non-group token)
    return str(props.get("apiVersion") or ""), str(props.get("kind") or "")


def pod_specs(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, podSpec) of every pod template a workload resource carries."""
    api, kind = k8s_kind(resource_type, props)
    group = api.split("/")[0] if "/" in api else ""
    spec = props.get("spec")
    candidates: list[tuple[str, Any]] = []
    if kind == "Pod":
        candidates.append(("spec", spec))
    elif kind == "PodTemplate":
        candidates.append(("template.spec", dig(props, "template", "spec")))
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController") or (
            group == "agents.kruise.io" and kind in ("SandboxSet", "Sandbox", "SandboxTemplate")):
        candidates.append(("spec.template.spec", dig(spec, "template", "spec")))
    elif kind == "CronJob":
        candidates.append(("spec.jobTemplate.spec.template.spec", dig(spec, "jobTemplate", "spec", "template", "spec")))
    elif group == "ray.io" and kind in ("RayJob", "RayCluster", "RayService"):
        cluster, prefix = {
            "RayJob": (dig(spec, "rayClusterSpec"), "spec.rayClusterSpec"),
            "RayCluster": (spec, "spec"),
            "RayService": (dig(spec, "rayClusterConfig"), "spec.rayClusterConfig"),
        }[kind]
        candidates.append((f"{prefix}.headGroupSpec.template.spec", dig(cluster, "headGroupSpec", "template", "spec")))
        workers = dig(cluster, "workerGroupSpecs")
        for i, _ in enumerate(workers if isinstance(workers, list) else []):
            candidates.append((f"{prefix}.workerGroupSpecs[{i}].template.spec",
                               dig(workers, i, "template", "spec")))
        if kind == "RayJob":
            candidates.append(("spec.submitterPodTemplate.spec", dig(spec, "submitterPodTemplate", "spec")))
    for path, pod in candidates:
        if isinstance(pod, Mapping):
            yield path, pod


def check_container_env(pod_path: str, pod: Mapping[str, Any]) -> list[str]:
    """Literal credentials in env[].value, command or args of every container of a pod spec."""
    problems = []
    for group in ("initContainers", "containers", "ephemeralContainers"):
        containers = pod.get(group)
        for i, container in enumerate(containers if isinstance(containers, list) else []):
            if not isinstance(container, Mapping):
                continue
            where = f"{pod_path}.{group}[{i}]"
            env = container.get("env")
            for j, var in enumerate(env if isinstance(env, list) else []):
                if not isinstance(var, Mapping) or "value" not in var:
                    continue  # valueFrom (secretKeyRef, fieldRef) is how credentials should arrive
                reason = secret_in_pair(str(var.get("name", "")), var["value"])
                if reason:
                    problems.append(
                        f"{where}.env[{j}] ({var.get('name')}): {reason}; put it in a Secret and use valueFrom.secretKeyRef")
            for arg_field in ("command", "args"):
                words = container.get(arg_field)
                for k, word in enumerate(words if isinstance(words, list) else []):
                    kind = secret_value_kind(word) if isinstance(word, str) else None
                    if kind:
                        problems.append(f"{where}.{arg_field}[{k}]: value looks like {kind}; read it from a Secret")
    return problems


def check_rayjob_submission(props: Mapping[str, Any]) -> list[str]:
    """Credentials in a RayJob's entrypoint or runtimeEnvYAML env_vars (both end up in the job's metadata)."""
    problems = []
    spec = props.get("spec")
    entrypoint = dig(spec, "entrypoint")
    if isinstance(entrypoint, str) and (kind := secret_value_kind(entrypoint)):
        problems.append(f"spec.entrypoint: value looks like {kind}")
    runtime_env = dig(spec, "runtimeEnvYAML")
    if isinstance(runtime_env, str) and not is_unknown(runtime_env):
        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError:
            parsed = runtime_env
        problems.extend(f"spec.runtimeEnvYAML: {m}" for m in find_secrets(parsed, "runtime_env"))
    return problems


def check_no_literal_secrets(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No credential in a ConfigMap, a Helm release's values, a container env literal or argument, or a RayJob's
    submission."""
    if resource_type == K8S_SECRET or not resource_type.startswith("kubernetes:"):
        return []
    problems: list[str] = []
    if resource_type == CONFIG_MAP:
        problems.extend(find_secrets(props.get("data") or {}, "data", parse_strings=True))
    if resource_type in HELM_TYPES:
        problems.extend(f"{m}; pass it from a Secret (the chart's existingSecret-style value)"
                        for m in find_secrets(props.get("values") or {}, "values", parse_strings=True))
    for pod_path, pod in pod_specs(resource_type, props):
        problems.extend(check_container_env(pod_path, pod))
    if is_rayjob(resource_type, props):
        problems.extend(check_rayjob_submission(props))
    return problems


STACK = "pulumi:pulumi:Stack"


def check_stack_outputs(outputs: Mapping[str, Any], allowed: Iterable[str] = ()) -> list[str]:
    """Credentials in stack outputs.

    pulumi_policy unwraps secret values before a policy sees them (deserialize_properties with
    proxy_secrets=False in Analyze/AnalyzeStack), so an Output.secret export is indistinguishable from a
    plaintext one here. Outputs that are deliberately exported as secrets are listed in `allowed`.
    """
    allowed = set(allowed)
    # parse_strings: a kubeconfig (YAML or JSON) exported as one string carries its credential under a key
    # (users[].user.client-key-data, .token), which only a parsed document shows.
    return find_secrets({k: v for k, v in outputs.items() if k not in allowed}, parse_strings=True)


# ============================================================================================== GPU pools
NODE_POOL = "alicloud:cs/nodePool:NodePool"
# The program labels each GPU pool with its GPUs per node; the policy trusts that first.
GPUS_PER_NODE_LABEL = "verl-ack/gpus-per-node"
# A pool whose size no NodePool field states (a Lingjun pool fills from its EFLO node group) declares its
# maximum node count in this label; fields that state a size win over it.
MAX_NODES_LABEL = "verl-ack/max-nodes"
# ECS GPU instance families are named gn* (ebmgn* for bare metal, sgn*/vgn* for vGPU shares), e.g. ecs.gn7i,
# ecs.gn8v, ecs.ebmgn7e (the families ACK's verl guide lists; see ../shared/research/alicloud.md §2c).
_GPU_INSTANCE = re.compile(r"^ecs\.(ebm)?[sv]?gn\d")
# "ecs.gn7i-4x.16xlarge": the -Nx infix is the GPU count.
_N_GPUS_INFIX = re.compile(r"-(\d+)x\.")
# "ecs.gn7i-c8g1.2xlarge": one GPU per c vCPUs; an Nxlarge size has 4N vCPUs.
_VCPUS_PER_GPU = re.compile(r"-c(\d+)g1\.(\d*)xlarge$")
# Bare-metal GPU shapes and unknown shapes: assume the largest single-node count, so the budget errs on the
# side of refusing; set the verl-ack/gpus-per-node label for an exact figure.
CONSERVATIVE_GPUS_PER_NODE = 8
DEFAULT_MAX_GPUS = 16


def is_gpu_instance_type(instance_type: str) -> bool:
    return bool(_GPU_INSTANCE.match(instance_type))


def gpus_from_instance_name(instance_type: str) -> Optional[int]:
    """GPUs of an ECS GPU instance type when its name says (the -Nx infix or -cNg1 ratio), else None."""
    if match := _N_GPUS_INFIX.search(instance_type):
        return int(match[1])
    if match := _VCPUS_PER_GPU.search(instance_type):
        vcpus = 4 * int(match[2] or 1)
        return max(1, -(-vcpus // int(match[1])))
    return None


def gpus_per_instance(instance_type: str) -> int:
    """GPUs of an ECS GPU instance type, from its name; CONSERVATIVE_GPUS_PER_NODE when the name does not say."""
    n = gpus_from_instance_name(instance_type)
    return CONSERVATIVE_GPUS_PER_NODE if n is None else n


def _labels(props: Mapping[str, Any]) -> dict[str, Any]:
    labels = props.get("labels")
    return {str(lbl.get("key")): lbl.get("value") for lbl in (labels if isinstance(labels, list) else [])
            if isinstance(lbl, Mapping)}


def is_gpu_pool(props: Mapping[str, Any]) -> bool:
    types = props.get("instanceTypes")
    return (props.get("type") == "lingjun"
            or GPUS_PER_NODE_LABEL in _labels(props)
            or dig(props, "scalingConfig", "type") in ("gpu", "gpushare")
            or any(isinstance(t, str) and is_gpu_instance_type(t) for t in (types if isinstance(types, list) else [])))


def check_gpu_pool_billing(props: Mapping[str, Any]) -> list[str]:
    """GPU pools are pay-as-you-go and on-demand: teardown must be able to stop the bill, and a training step
    must not lose its GPUs to a spot reclaim."""
    if not is_gpu_pool(props):
        return []
    problems = []
    charge = props.get("instanceChargeType")
    if charge == "PrePaid":
        problems.append("instanceChargeType is PrePaid; GPU pools must be PostPaid so `pulumi destroy` stops the bill")
    spot = props.get("spotStrategy")
    if spot not in (None, "NoSpot") and not is_unknown(spot):
        problems.append(f"spotStrategy is {spot!r}; use NoSpot: a reclaimed spot GPU kills the training step")
    if dig(props, "scalingConfig", "type") == "spot":
        problems.append("scalingConfig.type is 'spot'; GPU pools must use on-demand instances")
    pools = props.get("spotInstancePools")
    if isinstance(pools, int) and not isinstance(pools, bool) and pools > 0:
        problems.append("spotInstancePools is set; GPU pools must not mix in spot instances")
    return problems


@dataclass(frozen=True)
class GpuPoolSize:
    gpus_per_node: Optional[int]  # None: unknown during preview
    max_nodes: Optional[int]      # None: unknown during preview
    problem: Optional[str] = None  # set when the size cannot be determined at all


def _as_int(value: Any) -> Optional[int]:
    if value is None or is_unknown(value) or isinstance(value, bool):
        return None
    try:
        return int(value)  # desired_size is a string in pulumi_alicloud 4.0.0
    except (TypeError, ValueError):
        return None


def gpu_pool_size(props: Mapping[str, Any]) -> GpuPoolSize:
    """Upper bound of a GPU pool: nodes it may scale to, and GPUs per node."""
    label = _labels(props).get(GPUS_PER_NODE_LABEL)
    types = props.get("instanceTypes")
    if label is not None:
        per_node = _as_int(label)
        if per_node is None and not is_unknown(label):
            return GpuPoolSize(None, None, f"label {GPUS_PER_NODE_LABEL}={label!r} is not an integer")
    elif is_unknown(types):
        per_node = None
    elif isinstance(types, list) and types:
        known = [t for t in types if isinstance(t, str)]
        per_node = max((gpus_per_instance(t) for t in known), default=None) if len(known) == len(types) else None
    else:
        per_node = CONSERVATIVE_GPUS_PER_NODE  # Lingjun pools carry no instance types

    scaling = props.get("scalingConfig")
    for raw in (dig(scaling, "maxSize"), props.get("desiredSize"), props.get("nodeCount")):
        if raw is not None:
            return GpuPoolSize(per_node, _as_int(raw))
    instances = props.get("instances")
    if isinstance(instances, list):
        return GpuPoolSize(per_node, len(instances))
    declared = _labels(props).get(MAX_NODES_LABEL)
    if declared is not None:
        if _as_int(declared) is None and not is_unknown(declared):
            return GpuPoolSize(None, None, f"label {MAX_NODES_LABEL}={declared!r} is not an integer")
        return GpuPoolSize(per_node, _as_int(declared))
    if is_unknown(scaling) or is_unknown(instances):
        return GpuPoolSize(per_node, None)
    return GpuPoolSize(per_node, None, f"no scalingConfig.maxSize, desiredSize, nodeCount, instances or "
                                       f"{MAX_NODES_LABEL} label: the pool's size is unbounded as far as the budget can tell")


@dataclass(frozen=True)
class Resource:
    """What a stack check needs of a resource; the adapter builds it from pulumi_policy's PolicyResource."""
    type: str
    urn: str
    props: Mapping[str, Any]
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


Violation = tuple[str, Optional[str]]  # (message, urn or None for the stack as a whole)


def check_gpu_budget(resources: Iterable[Resource], max_gpus: int = DEFAULT_MAX_GPUS) -> list[Violation]:
    """Sum of (max nodes x GPUs per node) over all GPU pools stays within max_gpus."""
    total = 0
    parts = []
    violations: list[Violation] = []
    for r in resources:
        if r.type != NODE_POOL or not is_gpu_pool(r.props):
            continue
        size = gpu_pool_size(r.props)
        if size.problem:
            violations.append((size.problem, r.urn))
            continue
        if size.gpus_per_node is None or size.max_nodes is None:
            continue  # unknown until the update; checked again then
        total += size.gpus_per_node * size.max_nodes
        parts.append(f"{r.urn.rsplit('::', 1)[-1]}: {size.max_nodes} x {size.gpus_per_node}")
    if total > max_gpus:
        violations.append((
            f"GPU pools may scale to {total} GPUs ({', '.join(parts)}), over the budget of {max_gpus}; "
            "lower the pools' max size or raise the policy config gpu-budget.maxGpus deliberately", None))
    return violations


# ============================================================================================== RayJob
RAYJOB = "kubernetes:ray.io/v1:RayJob"


def is_rayjob(resource_type: str, props: Mapping[str, Any]) -> bool:
    """A RayJob, whether typed (kubernetes:ray.io/v1:RayJob, also what apiextensions.CustomResource registers)
    or generic with apiVersion ray.io/* in its body."""
    if not resource_type.startswith("kubernetes:"):
        return False
    api, kind = k8s_kind(resource_type, props)
    return kind == "RayJob" and api.startswith("ray.io/")


def check_rayjob_lifecycle(props: Mapping[str, Any]) -> list[str]:
    """A RayJob deletes its GPU cluster when done and cannot run forever (KubeRay's own knobs for both)."""
    spec = props.get("spec")
    if is_unknown(spec):
        return []
    problems = []
    shutdown = dig(spec, "shutdownAfterJobFinishes")
    if shutdown is not True and not is_unknown(shutdown):
        problems.append("spec.shutdownAfterJobFinishes must be true, or the Ray cluster keeps its GPUs after the job ends")
    deadline = dig(spec, "activeDeadlineSeconds")
    if not is_unknown(deadline):
        seconds = _as_int(deadline)
        if seconds is None or seconds <= 0:
            problems.append(
                f"spec.activeDeadlineSeconds is {deadline!r}; set a positive limit so a hung job stops billing")
    return problems


# ============================================================================================== sandboxes
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SANDBOX_SET = "kubernetes:agents.kruise.io/v1alpha1:SandboxSet"
# The ECS metadata service: from a pod it hands out the node's RAM role credentials.
METADATA_ADDRESS = ipaddress.ip_address("100.100.100.200")


def selector_matches(selector: Any, labels: Mapping[str, str]) -> Optional[bool]:
    """Kubernetes LabelSelector semantics; None when the selector is not known yet."""
    if is_unknown(selector):
        return None
    if not selector:
        return True  # the empty selector selects every pod in the namespace
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    """Effective policyTypes: explicit, or Kubernetes' default (Ingress, plus Egress when egress rules exist)."""
    explicit = spec.get("policyTypes")
    if isinstance(explicit, list):
        return [str(t) for t in explicit]
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def egress_allows_metadata(spec: Mapping[str, Any]) -> list[str]:
    """Ways a NetworkPolicy's egress rules let pods reach 100.100.100.200 (ports are ignored on purpose:
    the check is about the address)."""
    leaks = []
    for i, rule in enumerate(spec.get("egress") or []):
        peers = rule.get("to") if isinstance(rule, Mapping) else None
        if not peers:
            leaks.append(f"egress[{i}] has no `to`, so it allows every destination including {METADATA_ADDRESS}")
            continue
        for j, peer in enumerate(peers):
            block = peer.get("ipBlock") if isinstance(peer, Mapping) else None
            if not isinstance(block, Mapping) or is_unknown(block.get("cidr")):
                continue
            try:
                cidr = ipaddress.ip_network(block.get("cidr"), strict=False)
            except (TypeError, ValueError):
                continue
            if METADATA_ADDRESS not in cidr:
                continue
            excepted = False
            for exc in block.get("except") or []:
                try:
                    excepted = excepted or METADATA_ADDRESS in ipaddress.ip_network(exc, strict=False)
                except (TypeError, ValueError):
                    continue
            if not excepted:
                leaks.append(f"egress[{i}].to[{j}].ipBlock {cidr} contains {METADATA_ADDRESS} without excepting it")
    return leaks


def _namespace(props: Mapping[str, Any], default: str) -> str:
    ns = dig(props, "metadata", "namespace")
    return ns if isinstance(ns, str) and ns else default


def check_sandbox_isolation(resources: Iterable[Resource], default_namespace: str = "default") -> list[Violation]:
    """Every SandboxSet's pods are selected by an Egress NetworkPolicy and none lets them reach the metadata
    service: sandboxes run model-written code, which must not pick up the node's RAM credentials."""
    resources = list(resources)
    policies = [r for r in resources if r.type == NETWORK_POLICY]
    violations: list[Violation] = []
    for sbs in (r for r in resources if r.type == SANDBOX_SET):
        namespace = _namespace(sbs.props, default_namespace)
        name = dig(sbs.props, "metadata", "name")
        labels = dig(sbs.props, "spec", "template", "metadata", "labels")
        if is_unknown(labels) or is_unknown(dig(sbs.props, "metadata", "namespace")):
            continue
        labels = labels if isinstance(labels, Mapping) else None
        selecting = []
        for pol in policies:
            spec = pol.props.get("spec")
            if not isinstance(spec, Mapping) or _namespace(pol.props, default_namespace) != namespace:
                continue
            selector = spec.get("podSelector")
            # templateRef SandboxSets carry no labels here; only an empty podSelector certainly selects them
            matched = selector_matches(selector, labels) if labels is not None else (
                None if is_unknown(selector) else not selector)
            if matched is None:
                break  # cannot tell during preview; checked again on update
            if matched and "Egress" in policy_types(spec):
                selecting.append(pol)
        else:
            if not selecting:
                violations.append((
                    f"SandboxSet {name!r} in namespace {namespace!r} has no NetworkPolicy with policyTypes [Egress] "
                    "whose podSelector matches its pod template labels; sandboxes could reach the metadata "
                    f"service {METADATA_ADDRESS} and the internet", sbs.urn))
            for pol in selecting:
                for leak in egress_allows_metadata(pol.props["spec"]):
                    violations.append((
                        f"NetworkPolicy {dig(pol.props, 'metadata', 'name')!r} (selects SandboxSet {name!r}): {leak}; "
                        f"add {METADATA_ADDRESS}/32 to the ipBlock's except list", pol.urn))
    return violations


def check_bucket_public_access_block(resources: Iterable[Resource]) -> list[Violation]:
    """Every OSS bucket has a BucketPublicAccessBlock with blockPublicAccess=true, so a later ACL or bucket
    policy mistake cannot publish it."""
    resources = list(resources)
    blocks = [r for r in resources if r.type == OSS_PUBLIC_ACCESS_BLOCK]
    violations: list[Violation] = []
    for bucket in (r for r in resources if r.type == OSS_BUCKET):
        names = {bucket.props.get("bucket"), bucket.props.get("id")} - {None}
        covered = undecided = False
        for block in blocks:
            target = block.props.get("bucket")
            linked = bucket.urn in block.property_dependencies.get("bucket", ()) or (
                isinstance(target, str) and target in names and not is_unknown(target))
            if not linked:
                undecided = undecided or (is_unknown(target) and not block.property_dependencies.get("bucket"))
                continue
            enabled = block.props.get("blockPublicAccess")
            if enabled is True or is_unknown(enabled):
                covered = True
            else:
                violations.append((f"blockPublicAccess is {enabled!r}; it must be true", block.urn))
                covered = True  # reported on the block itself
        if not covered and not undecided:
            violations.append((
                "this bucket has no oss.BucketPublicAccessBlock(block_public_access=True); add one so no ACL "
                "or bucket policy can make it public", bucket.urn))
    return violations


# ============================================================================================== sandbox pods
# Capabilities the baseline Pod Security Standard lets a container add
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Capabilities").
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def _known(value: Any) -> bool:
    return not is_unknown(value)


def check_sandbox_pod_hardening(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Sandbox pods run model-written code: no Kubernetes API token, no host namespace or path, never privileged,
    no privilege escalation, every capability dropped (a root image may add back baseline ones), and the
    runtime's seccomp profile. Unknown values during preview are not violations."""
    api, kind = k8s_kind(resource_type, props)
    if not (api.startswith("agents.kruise.io/") and kind in ("SandboxSet", "Sandbox", "SandboxTemplate")):
        return []
    problems = []
    for path, pod in pod_specs(resource_type, props):
        token = pod.get("automountServiceAccountToken")
        if _known(token) and token is not False:
            problems.append(f"{path}.automountServiceAccountToken is {token!r}; set it to false: sandboxes need no "
                            "Kubernetes API credentials")
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(key) is True:
                problems.append(f"{path}.{key} is true; a sandbox must not share the node's namespaces")
        for i, vol in enumerate(pod.get("volumes") or []):
            if isinstance(vol, Mapping) and "hostPath" in vol:
                problems.append(f"{path}.volumes[{i}] mounts a hostPath; sandboxes get no node filesystem")
        pod_seccomp = dig(pod, "securityContext", "seccompProfile", "type")
        for group in ("initContainers", "containers", "ephemeralContainers"):
            containers = pod.get(group)
            for i, c in enumerate(containers if isinstance(containers, list) else []):
                if not isinstance(c, Mapping):
                    continue
                where = f"{path}.{group}[{i}] ({c.get('name')})"
                sc = c.get("securityContext")
                if is_unknown(sc):
                    continue
                sc = sc if isinstance(sc, Mapping) else {}
                if sc.get("privileged") is True:
                    problems.append(f"{where} is privileged")
                escalation = sc.get("allowPrivilegeEscalation")
                if _known(escalation) and escalation is not False:
                    problems.append(f"{where}: set securityContext.allowPrivilegeEscalation: false")
                caps = sc.get("capabilities")
                drop = dig(caps, "drop")
                if _known(caps) and _known(drop) and "ALL" not in (drop or []):
                    problems.append(f"{where}: drop every capability (securityContext.capabilities.drop: [ALL])")
                add = dig(caps, "add")
                if isinstance(add, list):
                    extra = sorted(a for a in add if _known(a) and a not in BASELINE_CAPABILITIES)
                    if extra:
                        problems.append(f"{where} adds {', '.join(extra)}, beyond the baseline Pod Security Standard")
                seccomp = dig(sc, "seccompProfile", "type") or pod_seccomp
                if _known(seccomp) and seccomp not in ("RuntimeDefault", "Localhost"):
                    problems.append(f"{where}: seccomp profile is {seccomp!r}; set securityContext.seccompProfile "
                                    "type RuntimeDefault on the pod")
    return problems


# ============================================================================================== E2B API exposure
ALB_LOAD_BALANCER = "alicloud:alb/loadBalancer:LoadBalancer"
ALB_CONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"
# ALB TLS security policies that accept nothing older than TLS 1.2 (ALB "TLS security policies" table).
TLS12_POLICIES = frozenset({"tls_cipher_policy_1_2", "tls_cipher_policy_1_2_strict",
                            "tls_cipher_policy_1_2_strict_with_1_3"})


def _public_listener_problems(listeners: Any) -> list[str]:
    problems = []
    for i, ls in enumerate(listeners if isinstance(listeners, list) else []):
        if not isinstance(ls, Mapping) or is_unknown(ls.get("protocol")):
            continue
        where = f"spec.listeners[{i}] ({ls.get('port')}/{ls.get('protocol')})"
        if ls.get("protocol") != "HTTPS":
            problems.append(f"{where}: an internet-facing E2B API listens on HTTPS only (its key would cross the "
                            "internet in clear text)")
            continue
        policy = ls.get("securityPolicyId")
        if _known(policy) and policy not in TLS12_POLICIES:
            problems.append(f"{where}: securityPolicyId {policy!r} allows TLS below 1.2; use one of "
                            f"{', '.join(sorted(TLS12_POLICIES))}")
        acl = ls.get("aclConfig")
        if is_unknown(acl):
            continue
        entries = dig(acl, "aclEntries") or dig(acl, "aclIds")
        if dig(acl, "aclType") != "White" or not entries:
            problems.append(f"{where}: an internet-facing E2B API needs a source allow-list (aclConfig aclType "
                            "White with aclEntries: sandbox.api_allowed_cidrs)")
    return problems


def check_e2b_exposure(resources: Iterable[Resource], allow_public: bool = False) -> list[Violation]:
    """No internet-facing E2B API unless allowed (`allowPublic`); an allowed one listens on HTTPS only with a
    TLS >= 1.2 policy and a whitelist ACL. Internet-facing: an alb.LoadBalancer with addressType Internet, or an
    AlbConfig whose own ALB (no config.id) has addressType Internet."""
    resources = list(resources)
    configs = [r for r in resources if r.type == ALB_CONFIG]
    violations: list[Violation] = []
    public_albs = [r for r in resources if r.type == ALB_LOAD_BALANCER and r.props.get("addressType") == "Internet"]
    public_configs = [c for c in configs if dig(c.props, "spec", "config", "addressType") == "Internet"
                      and not dig(c.props, "spec", "config", "id")]
    for alb in public_albs:
        fronting = [c for c in configs if alb.urn in c.property_dependencies.get("spec", ())
                    or dig(c.props, "spec", "config", "id") in {alb.props.get("id"), alb.urn}]
        if not allow_public:
            violations.append(("an internet-facing ALB serves the E2B API (one static key); training needs only the "
                               "in-cluster MCP Service: use sandbox.public_api: false (an intranet ALB), or allow it "
                               "in the policy config (allowPublic)", alb.urn))
        for cfg in fronting:
            violations += [(m, cfg.urn) for m in _public_listener_problems(dig(cfg.props, "spec", "listeners"))]
    for cfg in public_configs:
        if not allow_public:
            violations.append(("this AlbConfig creates an internet-facing ALB for the E2B API; use addressType "
                               "Intranet or allow it in the policy config (allowPublic)", cfg.urn))
        violations += [(m, cfg.urn) for m in _public_listener_problems(dig(cfg.props, "spec", "listeners"))]
    return violations


# ============================================================================================== tags
DEFAULT_REQUIRED_TAGS = ("project", "stack")
# Resource types this project creates that accept `tags` in pulumi_alicloud 4.0.0
# (tests/test_policy.py checks each against the installed SDK).
TAGGABLE_TYPES = frozenset({
    "alicloud:vpc/network:Network",
    "alicloud:vpc/switch:Switch",
    "alicloud:vpc/natGateway:NatGateway",
    "alicloud:ecs/eipAddress:EipAddress",
    "alicloud:ecs/securityGroup:SecurityGroup",
    "alicloud:cs/managedKubernetes:ManagedKubernetes",
    NODE_POOL,
    OSS_BUCKET,
    "alicloud:alb/loadBalancer:LoadBalancer",
    "alicloud:ram/role:Role",
    "alicloud:cas/serviceCertificate:ServiceCertificate",
    "alicloud:kms/key:Key",
    "alicloud:eflo/cluster:Cluster",
})


def check_cost_tags(resource_type: str, props: Mapping[str, Any],
                    required: Iterable[str] = DEFAULT_REQUIRED_TAGS) -> list[str]:
    """Cost tags let the bill be split by project and stack."""
    if not resource_type.startswith("alicloud:") or (resource_type not in TAGGABLE_TYPES and "tags" not in props):
        return []
    tags = props.get("tags")
    if is_unknown(tags):
        return []
    present = set(tags) if isinstance(tags, Mapping) else set()
    missing = [t for t in required if t not in present]
    if not missing:
        return []
    return [f"tags lack {', '.join(missing)}; pass settings.cloud_tags(stack) so the bill can be split by project and stack"]
