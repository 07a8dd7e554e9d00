"""The verl-ack policies as pulumi_policy objects: each one wires a pure check from `checks` to the SDK.

`POLICIES` is what `policy/__main__.py` hands to `PolicyPack`. The adapters here only translate: they unwrap
the SDK's property proxies into plain data, read the policy config (with the defaults the config schema
declares), and report each message the check returns.
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

from verl_ack_policy import checks

PACK_NAME = "verl-ack"


def plain(value: Any) -> Any:
    """Plain dicts and lists from the SDK's unknown-checking proxies.

    Reading a proxy's item raises UnknownValueError when the value is unknown during preview; the checks want
    to see the sentinel instead and decide for themselves. `proxy["__target"]` is the proxies' escape hatch
    (pulumi_policy/proxy.py; the SDK's own serialize_properties unwraps with it).
    """
    try:
        value = value["__target"]
    except (KeyError, TypeError, IndexError):
        pass
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


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
    description="OSS buckets are encrypted at rest (AES256 or KMS) and carry no public ACL.",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.OSS_BUCKET,), lambda args, props: checks.check_oss_bucket(props)),
)

oss_bucket_acl_private = ResourceValidationPolicy(
    name="oss-bucket-acl-private",
    description="OSS bucket ACLs are private.",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.OSS_BUCKET_ACL,), lambda args, props: checks.check_oss_bucket_acl(props)),
)

oss_bucket_public_access_blocked = StackValidationPolicy(
    name="oss-bucket-public-access-blocked",
    description="Every OSS bucket has a BucketPublicAccessBlock with blockPublicAccess=true.",
    enforcement_level=MANDATORY,
    validate=_stack_validation(lambda args, resources: checks.check_bucket_public_access_block(resources)),
)

no_literal_secrets = ResourceValidationPolicy(
    name="no-literal-secrets",
    description="No credential in a ConfigMap, a container env literal, or a RayJob entrypoint/runtime env.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: checks.check_no_literal_secrets(args.resource_type, props)),
)

no_secrets_in_stack_outputs = StackValidationPolicy(
    name="no-secrets-in-stack-outputs",
    description="Stack outputs carry no credential (export the name of the Secret that holds it instead).",
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "allowedOutputs": {
            "type": "array", "items": {"type": "string"}, "default": [],
            "description": "Outputs deliberately exported with pulumi.Output.secret. The policy SDK hides the "
                           "secret flag from policies, so those must be listed here to pass.",
        },
    }),
    validate=_stack_validation(lambda args, resources: [
        (message, r.urn)
        for r in resources if r.type == checks.STACK
        for message in checks.check_stack_outputs(r.props, _config(args, "allowedOutputs", []))
    ]),
)

gpu_pool_pay_as_you_go = ResourceValidationPolicy(
    name="gpu-pool-pay-as-you-go",
    description="GPU node pools are pay-as-you-go (PostPaid) and on-demand (no spot).",
    enforcement_level=MANDATORY,
    validate=_resource_validation((checks.NODE_POOL,), lambda args, props: checks.check_gpu_pool_billing(props)),
)

gpu_budget = StackValidationPolicy(
    name="gpu-budget",
    description="All GPU node pools together can scale to at most maxGpus GPUs.",
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
    description="Every RayJob deletes its Ray cluster when it finishes and has an activeDeadlineSeconds.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: (
        checks.check_rayjob_lifecycle(props) if checks.is_rayjob(args.resource_type, props) else [])),
)

sandbox_egress_isolated = StackValidationPolicy(
    name="sandbox-egress-isolated",
    description="SandboxSet pods are selected by an Egress NetworkPolicy that keeps them off the metadata "
                "service (100.100.100.200).",
    enforcement_level=MANDATORY,
    validate=_stack_validation(lambda args, resources: checks.check_sandbox_isolation(resources)),
)

sandbox_pod_hardening = ResourceValidationPolicy(
    name="sandbox-pod-hardening",
    description="Sandbox pods (model-written code) get no API token, no host namespaces or paths, are never "
                "privileged, never escalate, drop every capability (baseline ones may be added back) and run the "
                "runtime's seccomp profile.",
    enforcement_level=MANDATORY,
    validate=_resource_validation(None, lambda args, props: checks.check_sandbox_pod_hardening(
        args.resource_type, props)),
)

no_public_e2b_api = StackValidationPolicy(
    name="no-public-e2b-api",
    description="The E2B API (one static key) is not on an internet-facing ALB unless allowPublic; an allowed one "
                "is HTTPS-only with a TLS >= 1.2 policy and a source allow-list.",
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
    description="Taggable Alibaba Cloud resources carry the cost tags (project and stack by default).",
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
]
