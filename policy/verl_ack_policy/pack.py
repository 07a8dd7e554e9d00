"""The verl-ack policies as pulumi_policy objects: each one wires a pure check from `checks` to the SDK.

`POLICIES` is what `policy/__main__.py` hands to `PolicyPack`. The adapters here only translate: they unwrap
the SDK's property proxies into plain data, read the policy config (with the defaults the config schema
declares), and report each message the check returns.

Each description says what the policy guarantees of every stack that passes it; tests/test_policy.py's mutation
test breaks the recorded dev stack once per guarantee and checks the policy that claims it reports the break.
Advisory policies name, in their description, why they are not mandatory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from verl_ack_policy import checks, exposure

PACK_NAME = "verl-ack"


def plain(value: Any) -> Any:
    """Plain dicts and lists from the SDK's unknown-checking proxies.

    Reading a proxy's item raises UnknownValueError when the value is unknown during preview; the checks want
    to see the sentinel instead and decide for themselves. `proxy["__target"]` is the proxies' escape hatch
    (pulumi_policy/proxy.py; the SDK's own serialize_properties unwraps with it).
    """
    if value is None or isinstance(value, (str, bytes, int, float)):  # no proxy wraps a scalar: skip the probe
        return value
    try:
        value = value["__target"]
    except (KeyError, TypeError, IndexError):
        pass
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


def _names_config(key: str, description: str) -> PolicyConfigSchema:
    """The one setting an allow-listing policy takes: a list of names (stacks, namespaces, outputs), empty by
    default."""
    return PolicyConfigSchema(properties={
        key: {"type": "array", "items": {"type": "string"}, "default": [], "description": description}})


def _config(args: ResourceValidationArgs | StackValidationArgs, key: str, default: Any) -> Any:
    # The CLI fills in schema defaults when it configures the pack; a direct call (tests, older CLIs) may not.
    value = (args.get_config() or {}).get(key)
    return default if value is None else value


def _resources(args: StackValidationArgs) -> list[checks.Resource]:
    def urns(deps: list[PolicyResource]) -> tuple[str, ...]:
        return tuple(d.urn for d in deps)

    return [checks.Resource(type=r.resource_type, urn=r.urn, props=plain(r.props),
                            property_dependencies={k: urns(v) for k, v in (r.property_dependencies or {}).items()})
            for r in args.resources]


def _resource_validation(types: tuple[str, ...] | None,
                         check: Callable[[ResourceValidationArgs, dict], list[str]]):
    """A validate callback that runs `check` on resources of the given types (all types when None)."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if types is not None and args.resource_type not in types:
            return
        for message in check(args, plain(args.props)):
            report_violation(message, None)

    return validate


def _stack_validation(check: Callable[[StackValidationArgs, list[checks.Resource]], list[checks.Violation]]):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for message, urn in check(args, _resources(args)):
            report_violation(message, urn)

    return validate


MANDATORY = EnforcementLevel.MANDATORY

oss_bucket_private_encrypted = ResourceValidationPolicy(
    name="oss-bucket-private-encrypted",
    description="Guarantees every OSS bucket is encrypted at rest (AES256 or KMS) and has no public ACL of its own.",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.OSS_BUCKET,), lambda args, props: checks.check_oss_bucket(props)),
)

oss_bucket_acl_private = ResourceValidationPolicy(
    name="oss-bucket-acl-private",
    description="Guarantees every OSS BucketAcl is private.",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.OSS_BUCKET_ACL,), lambda args, props: checks.check_oss_bucket_acl(props)),
)

oss_bucket_public_access_blocked = StackValidationPolicy(
    name="oss-bucket-public-access-blocked",
    description="Guarantees every OSS bucket has a BucketPublicAccessBlock with blockPublicAccess=true.",
    enforcement_level=MANDATORY,
    validate=_stack_validation(lambda args, resources: checks.check_bucket_public_access_block(resources)),
)

no_literal_secrets = ResourceValidationPolicy(
    name="no-literal-secrets",
    description="Guarantees no credential (by its name, short forms like PW or *_PASS included, or by its shape: "
                "tokens, AccessKey ids and secrets, private keys, URLs with a password) is written in a ConfigMap, "
                "a Helm release's values, a container's env literals, command or args, or a RayJob's entrypoint or "
                "runtime env.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: checks.check_no_literal_secrets(args.resource_type, props)),
)

no_secrets_in_stack_outputs = StackValidationPolicy(
    name="no-secrets-in-stack-outputs",
    description="Guarantees no stack output carries a credential, except outputs listed in allowedOutputs: a value "
                "with a credential's shape (a PEM private key, a token), and inside a string that is a JSON or YAML "
                "document (a kubeconfig) a credential's key (`client-key-data`, `token`, `password`) with a "
                "literal value.",
    enforcement_level=MANDATORY,
    config_schema=_names_config("allowedOutputs", "Outputs deliberately exported with pulumi.Output.secret. The policy "
                                "SDK hides the secret flag from policies, so those must be listed here to pass."),
    validate=_stack_validation(lambda args, resources: [
        (message, r.urn)
        for r in resources if r.type == checks.STACK
        for message in checks.check_stack_outputs(r.props, _config(args, "allowedOutputs", []))
    ]),
)

gpu_pool_pay_as_you_go = ResourceValidationPolicy(
    name="gpu-pool-pay-as-you-go",
    description="Guarantees every GPU node pool is pay-as-you-go (PostPaid) and on-demand (no spot).",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.NODE_POOL,), lambda args, props: checks.check_gpu_pool_billing(props)),
)

gpu_budget = StackValidationPolicy(
    name="gpu-budget",
    description="Guarantees all GPU node pools together can scale to at most maxGpus GPUs.",
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "maxGpus": {
            "type": "integer", "minimum": 0, "default": checks.DEFAULT_MAX_GPUS,
            "description": "Upper bound of sum(max nodes x GPUs per node) over the stack's GPU pools.",
        },
    }),
    validate=_stack_validation(lambda args, resources: checks.check_gpu_budget(
        resources, int(_config(args, "maxGpus", checks.DEFAULT_MAX_GPUS)))),
)

rayjob_cleans_up = ResourceValidationPolicy(
    name="rayjob-cleans-up",
    description="Guarantees every RayJob deletes its Ray cluster when it finishes and has a positive "
                "activeDeadlineSeconds.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: (
        checks.check_rayjob_lifecycle(props) if checks.is_rayjob(args.resource_type, props) else [])),
)

sandbox_egress_isolated = StackValidationPolicy(
    name="sandbox-egress-isolated",
    description="Guarantees every SandboxSet's and every bare Sandbox's pods are selected by an Egress "
                "NetworkPolicy, and none that selects a SandboxSet's lets them reach the metadata service "
                "(100.100.100.200).",
    enforcement_level=MANDATORY,
    validate=_stack_validation(lambda args, resources: checks.check_sandbox_isolation(resources)
                               + exposure.check_bare_sandbox_isolation(resources)),
)

sandbox_pod_hardening = ResourceValidationPolicy(
    name="sandbox-pod-hardening",
    description="Guarantees sandbox pods (model-written code) get no API token, no host namespaces or paths, are "
                "never privileged, never escalate, drop every capability (baseline ones may be added back) and run "
                "the runtime's seccomp profile.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: checks.check_sandbox_pod_hardening(
        args.resource_type, props)),
)

no_public_e2b_api = StackValidationPolicy(
    name="no-public-e2b-api",
    description="Guarantees the E2B API (one static key) is on no internet-facing ALB unless allowPublic; an "
                "allowed one is HTTPS-only with a TLS >= 1.2 policy and a source allow-list.",
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allowPublic": {
            "type": "boolean", "default": False,
            "description": "Allow an internet-facing E2B API (a stack with sandbox.public_api: true); it must still "
                           "be HTTPS-only, TLS >= 1.2 and allow-listed.",
        },
    }),
    validate=_stack_validation(lambda args, resources: checks.check_e2b_exposure(
        resources, bool(_config(args, "allowPublic", False)))),
)

cost_tags = ResourceValidationPolicy(
    name="cost-tags",
    description="Reports taggable Alibaba Cloud resources without the cost tags (project and stack by default). "
                "Advisory: a missing tag splits the bill wrongly but exposes nothing.",
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=PolicyConfigSchema(properties={
        "requiredTags": {
            "type": "array", "items": {"type": "string"}, "default": list(checks.DEFAULT_REQUIRED_TAGS),
            "description": "Tag keys every taggable resource must carry.",
        },
    }),
    validate=_resource_validation(None, lambda args, props: checks.check_cost_tags(
        args.resource_type, props, _config(args, "requiredTags", checks.DEFAULT_REQUIRED_TAGS))),
)

oss_bucket_policy_not_public = ResourceValidationPolicy(
    name="oss-bucket-policy-not-public",
    description="Guarantees no OSS bucket policy allows anything to Principal '*' (only Deny statements may name it).",
    enforcement_level=MANDATORY,
    validate=_resource_validation((exposure.OSS_BUCKET_POLICY, checks.OSS_BUCKET),
                                  lambda args, props: exposure.check_bucket_policy(args.resource_type, props)),
)

no_public_api_server = StackValidationPolicy(
    name="no-public-api-server",
    description="Reports a cluster whose API server has an internet endpoint (slbInternetEnabled), unless its stack "
                "is in allowedStacks. Advisory: the dev, multinode and dev-platform stacks ship cluster.public_api: "
                "true so Pulumi can reach the cluster from outside the VPC; make it mandatory where it must not be.",
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=_names_config("allowedStacks", "Stacks whose public API endpoint is deliberate (restricted by an ACL "
                                "outside the program)."),
    validate=_stack_validation(lambda args, resources: exposure.check_public_api_server(
        resources, _config(args, "allowedStacks", []))),
)

no_host_access = StackValidationPolicy(
    name="no-host-access",
    description="Guarantees no pod is privileged, mounts a hostPath or shares the node's network, PID or IPC "
                "namespace, except the Ray pods in a namespace the stack labels privileged (multi-node RDMA) and "
                "namespaces in allowedNamespaces; sandbox pods are held to sandbox-pod-hardening.",
    enforcement_level=MANDATORY,
    config_schema=_names_config("allowedNamespaces", "Namespaces whose pods may take host access (a node agent installed "
                                "deliberately)."),
    validate=_stack_validation(lambda args, resources: exposure.check_host_access(
        resources, _config(args, "allowedNamespaces", []))),
)

images_pinned_by_digest = ResourceValidationPolicy(
    name="images-pinned-by-digest",
    description="Reports every container image pulled by tag rather than by digest (@sha256:...). Advisory: the "
                "shipped stacks pull the verl, sandbox, MLflow and helper images by version tag (the training "
                "image's tag is its content hash); make it mandatory once every image has a digest setting.",
    enforcement_level=EnforcementLevel.ADVISORY,
    validate=_resource_validation(None, lambda args, props: exposure.check_image_digests(args.resource_type, props)),
)

no_floating_images = ResourceValidationPolicy(
    name="no-floating-image-tags",
    description="Guarantees no container image (a Deployment's, a Job's, a RayJob's head, worker and submitter "
                "templates, a SandboxSet's, any pod template) is pulled by `:latest` or with neither a tag nor a "
                "digest (which pulls `:latest`): a re-push would change what the next pod runs. Version tags pass "
                "here; images-pinned-by-digest reports them.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: exposure.check_image_tags(args.resource_type, props)),
)

ram_least_privilege = ResourceValidationPolicy(
    name="ram-least-privilege",
    description="Guarantees no RAM policy allows Action '*', '*:*' or 'ram:*', and no policy attachment grants "
                "AdministratorAccess or AliyunRAMFullAccess.",
    enforcement_level=MANDATORY,
    validate=_resource_validation((exposure.RAM_POLICY, *exposure.ATTACHMENTS),
                                  lambda args, props: exposure.check_ram_least_privilege(args.resource_type, props)),
)

no_internet_load_balancer_service = ResourceValidationPolicy(
    name="no-internet-load-balancer-service",
    description="Guarantees no Kubernetes Service of type LoadBalancer gets an internet-facing load balancer (the "
                "address-type annotation must say intranet) unless allowInternet.",
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allowInternet": {
            "type": "boolean", "default": False,
            "description": "Allow internet-facing LoadBalancer Services.",
        },
    }),
    validate=_resource_validation((exposure.SERVICE,), lambda args, props: exposure.check_load_balancer_service(
        props, bool(_config(args, "allowInternet", False)))),
)

gpu_labels_truthful = StackValidationPolicy(
    name="gpu-labels-truthful",
    description="Guarantees every GPU pool's verl-ack/gpus-per-node label (what gpu-budget counts) is at least the "
                "GPUs its instance type has and what any pod scheduled onto the pool requests.",
    enforcement_level=MANDATORY,
    validate=_stack_validation(lambda args, resources: exposure.check_gpu_labels(resources)),
)

POLICIES = [
    oss_bucket_private_encrypted,
    oss_bucket_acl_private,
    oss_bucket_public_access_blocked,
    no_literal_secrets,
    no_secrets_in_stack_outputs,
    gpu_pool_pay_as_you_go,
    gpu_budget,
    rayjob_cleans_up,
    sandbox_egress_isolated,
    sandbox_pod_hardening,
    no_public_e2b_api,
    cost_tags,
    oss_bucket_policy_not_public,
    no_public_api_server,
    no_host_access,
    images_pinned_by_digest,
    no_floating_images,
    ram_least_privilege,
    no_internet_load_balancer_service,
    gpu_labels_truthful,
]
