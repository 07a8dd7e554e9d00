"""Who may touch the bucket: least-privilege RAM roles assumed through the cluster's RRSA OIDC provider, and the
workload Namespace with its ServiceAccounts annotated for ack-pod-identity-webhook.

One role per service account, each trusted only for `system:serviceaccount:<namespace>:<name>` and each
allowed only its key prefixes:

| role  | service account                     | read                          | write            |
|-------|-------------------------------------|-------------------------------|------------------|
| csi   | ack-csi-fuse/csi-fuse-ossfs         | datasets, models, checkpoints,| checkpoints,     |
|       |                                     | tracking (when enabled)       | tracking         |
| data  | <job ns>/DATASET_SERVICE_ACCOUNT    | datasets, models              | datasets, models |
| train | <ray ns>/TRAINING_SERVICE_ACCOUNT   | datasets, models, this        | this experiment's|
|       |                                     | experiment's checkpoints      | checkpoints      |
| mlflow| <job ns>/TRACKING_SERVICE_ACCOUNT   | tracking                      | tracking         |

The webhook's names are from ACK's component page (https://www.alibabacloud.com/help/en/
container-service-for-kubernetes/latest/ack-pod-identity-webhook): namespace label
`pod-identity.alibabacloud.com/injection: "on"`, service account annotation
`pod-identity.alibabacloud.com/role-name`. With `storage.auth: access_key` no role is created and
the service accounts carry no annotation (pods then use the AccessKey Secret components/cloud/storage.py makes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.config import Settings
from components.wiring import (
    DATASET_SERVICE_ACCOUNT,
    TRACKING_CLIENT_LABEL,
    TRACKING_SERVICE_ACCOUNT,
    TRAINING_SERVICE_ACCOUNT,
    WorkloadIdentity,
    checkpoint_key_prefix,
    job_namespace_pod_security,
    pod_security_labels,
    ray_namespace,
    ray_namespace_pod_security,
)

# The OSS CSI driver runs ossfs in fuse pods under this fixed namespace/service account and assumes the PV's
# `roleName` for them (alibaba-cloud-csi-driver pkg/oss/controllerserver.go, fuse_pod_manager.go).
CSI_FUSE_NAMESPACE = "ack-csi-fuse"
CSI_FUSE_SERVICE_ACCOUNT = "csi-fuse-ossfs"
INJECTION_LABEL = "pod-identity.alibabacloud.com/injection"
ROLE_NAME_ANNOTATION = "pod-identity.alibabacloud.com/role-name"
STS_AUDIENCE = "sts.aliyuncs.com"
# A custom RAM policy keeps at most five versions and, by default, does not drop the oldest, so the sixth document
# change fails (https://help.aliyun.com/en/ram/manage-custom-policy-versions; Pulumi's ram.Policy docs). This value
# deletes the oldest non-default version instead (SDK pulumi_alicloud 4.0.0 ram/policy.py: rotate_strategy).
POLICY_ROTATE_STRATEGY = "DeleteOldestNonDefaultVersionWhenLimitExceeded"

OSS_READ = ("oss:GetObject",)
OSS_WRITE = ("oss:PutObject", "oss:DeleteObject", "oss:AbortMultipartUpload", "oss:ListParts")
OSS_LIST = ("oss:ListObjects",)


@dataclass(frozen=True)
class RoleSpec:
    key: str
    role_name: str
    namespace: str
    service_account: str
    read: tuple[str, ...]
    write: tuple[str, ...]
    description: str

    @property
    def subject(self) -> str:
        return service_account_subject(self.namespace, self.service_account)


def service_account_subject(namespace: str, service_account: str) -> str:
    return f"system:serviceaccount:{namespace}:{service_account}"


# RAM role and policy names: at most 64 characters (RAM CreateRole RoleName; CreatePolicy PolicyName is 128).
RAM_ROLE_NAME_MAX = 64
# The longest suffix this module appends to a role prefix: `-oss-csi` and the policy's `-oss`.
_LONGEST_SUFFIX = len("-oss-csi") + len("-oss")


def ram_name_prefix(s: Settings) -> str:
    """`<name>-<region>` (RAM is global per account: two regions with the same `name` would collide on
    EntityAlreadyExists.Role), or `<name>` for stacks created before the region was added (storage.ram_names)."""
    prefix = s.name if s.storage.ram_names == "legacy" else f"{s.name}-{s.region}"
    if len(prefix) + _LONGEST_SUFFIX > RAM_ROLE_NAME_MAX:
        raise ValueError(f"name + region: RAM role names would exceed {RAM_ROLE_NAME_MAX} characters "
                         f"({prefix!r} + {_LONGEST_SUFFIX}); shorten `name`")
    return prefix


def role_specs(s: Settings) -> list[RoleSpec]:
    """The RRSA roles of this stack (none with storage.auth=access_key)."""
    if s.storage.auth != "rrsa":
        return []
    p = ram_name_prefix(s)
    st = s.storage
    ns = s.job.namespace
    data_rw = (st.datasets_prefix, st.models_prefix)
    # The fuse pods serve every OSS volume of the cluster: datasets and models read-only, checkpoints and (with
    # tracking) the MLflow artifact volume read-write (components/workloads/training/volumes.py, components/workloads/tracking.py).
    csi_rw = (st.checkpoints_prefix, *((st.tracking_prefix,) if s.tracking.enabled else ()))
    specs = [
        RoleSpec("csi", f"{p}-oss-csi", CSI_FUSE_NAMESPACE, CSI_FUSE_SERVICE_ACCOUNT,
                 read=(*data_rw, *csi_rw), write=csi_rw,
                 description="OSS CSI fuse pods: read datasets/models, read-write checkpoints and tracking (RRSA)"),
        RoleSpec("data", f"{p}-data", ns, DATASET_SERVICE_ACCOUNT, read=data_rw, write=data_rw,
                 description="Dataset and model staging jobs: write datasets and models (RRSA)"),
        # Only its own experiment's checkpoints: a run (or code it executes) cannot read, overwrite or delete
        # another experiment's under the same checkpoints_prefix.
        RoleSpec("train", f"{p}-train", ray_namespace(s), TRAINING_SERVICE_ACCOUNT,
                 read=(*data_rw, checkpoint_key_prefix(s)), write=(checkpoint_key_prefix(s),),
                 description="Training pods: read datasets/models, read-write this experiment's checkpoints (RRSA)"),
    ]
    if s.tracking.enabled:
        specs.append(RoleSpec("mlflow", f"{p}-mlflow", ns, TRACKING_SERVICE_ACCOUNT,
                              read=(st.tracking_prefix,), write=(st.tracking_prefix,),
                              description="MLflow tracking server: read-write tracking artifacts (RRSA)"))
    return specs


def trust_policy(oidc_provider_arn: str, issuer_url: str, subject: str) -> dict:
    """RAM trust policy: only tokens of this cluster's OIDC provider, for STS, for exactly this service account
    (ACK RRSA guide: https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/
    use-rrsa-to-authorize-pods-to-access-different-cloud-services)."""
    return {
        "Version": "1",
        "Statement": [{
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Federated": [oidc_provider_arn]},
            "Condition": {"StringEquals": {"oidc:aud": STS_AUDIENCE, "oidc:iss": issuer_url, "oidc:sub": subject}},
        }],
    }


def oss_policy(s: Settings, bucket: str, read: tuple[str, ...], write: tuple[str, ...]) -> dict:
    """RAM policy: object access only under the given prefixes, listing only with those prefixes."""
    prefixes = sorted(set(read) | set(write))
    statements = [
        {"Effect": "Allow", "Action": list(OSS_LIST), "Resource": [f"acs:oss:*:*:{bucket}"],
         "Condition": {"StringLike": {"oss:Prefix": [v for p in prefixes for v in (p.rstrip("/"), f"{p}*")]}}},
        {"Effect": "Allow", "Action": list(OSS_READ), "Resource": [f"acs:oss:*:*:{bucket}/{p}*" for p in sorted(read)]},
    ]
    if write:
        statements.append({"Effect": "Allow", "Action": list(OSS_WRITE),
                           "Resource": [f"acs:oss:*:*:{bucket}/{p}*" for p in sorted(write)]})
    if s.storage.sse_algorithm == "KMS" and s.storage.kms_key_id:
        # Objects encrypted with a customer KMS key need the key to be read and written.
        statements.append({"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                           "Resource": [f"acs:kms:{s.region}:*:key/{s.storage.kms_key_id}"]})
    return {"Version": "1", "Statement": statements}


def namespace_manifest(s: Settings) -> dict:
    """The job namespace's metadata: Pod Security Admission enforces what its pods meet (baseline where the Ray pods
    share it, restricted where RDMA Ray pods have their own; wiring.job_namespace_pod_security) and warns and audits
    below restricted."""
    labels = pod_security_labels(job_namespace_pod_security(s), s)
    if s.storage.auth == "rrsa":
        labels[INJECTION_LABEL] = "on"
    if ray_namespace(s) == s.job.namespace and s.kind != "platform":
        labels[TRACKING_CLIENT_LABEL] = "true"  # the Ray pods here log to MLflow (a platform runs none)
    return {"name": s.job.namespace, "labels": labels}


def ray_namespace_manifest(s: Settings) -> dict | None:
    """The RDMA Ray pods' own namespace (wiring.ray_namespace), enforcing privileged; None where the Ray pods share
    the job namespace. The training service account there assumes its RRSA role, so the webhook label goes on too."""
    if ray_namespace(s) == s.job.namespace:
        return None
    labels = pod_security_labels(ray_namespace_pod_security(s), s)
    if s.storage.auth == "rrsa":
        labels[INJECTION_LABEL] = "on"
    labels[TRACKING_CLIENT_LABEL] = "true"  # the Ray pods here log to MLflow
    return {"name": ray_namespace(s), "labels": labels}


def workload_service_accounts(s: Settings) -> list[str]:
    out = [DATASET_SERVICE_ACCOUNT, TRAINING_SERVICE_ACCOUNT]
    if s.tracking.enabled:
        out.append(TRACKING_SERVICE_ACCOUNT)
    return out


@dataclass(kw_only=True)
class IdentityArgs:
    settings: Settings
    bucket_name: pulumi.Input[str]  # the policies name the bucket; a new bucket need not exist yet
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer_url: pulumi.Input[str]
    tags: dict[str, str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    k8s_provider: pulumi.ProviderResource
    # Which roles (RoleSpec.key) and their service accounts this stack owns; None = all. A platform owns the
    # cluster-wide CSI role and MLflow's, an experiment its data and training roles (components/platform.py).
    roles: tuple[str, ...] | None = None


class Identity(pulumi.ComponentResource):
    """RRSA RAM roles + policies, the job Namespace and its ServiceAccounts."""

    workload: WorkloadIdentity
    csi_role_name: pulumi.Output[str] | None

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:identity:Identity", name, None, opts)
        s = args.settings
        cloud = pulumi.ResourceOptions(parent=self, provider=args.provider)
        kube = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)

        self.roles: dict[str, alicloud.ram.Role] = {}
        for spec in role_specs(s):
            if args.roles is not None and spec.key not in args.roles:
                continue
            role = alicloud.ram.Role(
                f"{name}-role-{spec.key}",
                role_name=spec.role_name,
                description=spec.description,
                assume_role_policy_document=pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer_url).apply(
                    lambda a, sub=spec.subject: json.dumps(trust_policy(a[0], a[1], sub), sort_keys=True)),
                max_session_duration=3600,
                tags=args.tags,
                opts=cloud,
            )
            policy = alicloud.ram.Policy(
                f"{name}-policy-{spec.key}",
                policy_name=f"{spec.role_name}-oss",
                description=pulumi.Output.concat(spec.description, "; bucket ", args.bucket_name),
                policy_document=pulumi.Output.from_input(args.bucket_name).apply(
                    lambda b, sp=spec: json.dumps(oss_policy(s, b, sp.read, sp.write), sort_keys=True)),
                # Each document change (a prefix, the bucket) adds a policy version; see POLICY_ROTATE_STRATEGY.
                rotate_strategy=POLICY_ROTATE_STRATEGY,
                opts=cloud,
            )
            alicloud.ram.RolePolicyAttachment(
                f"{name}-attach-{spec.key}", role_name=role.role_name, policy_name=policy.policy_name,
                policy_type="Custom", opts=cloud)
            self.roles[spec.key] = role
        self.csi_role_name = self.roles["csi"].role_name if "csi" in self.roles else None

        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata=namespace_manifest(s), opts=kube)
        # The Ray pods' privileged namespace belongs with the training service account (a platform runs no Ray pods).
        ray_ns = ray_namespace_manifest(s) if args.roles is None or "train" in args.roles else None
        self.ray_namespace = k8s.core.v1.Namespace(f"{name}-ray-namespace", metadata=ray_ns, opts=kube) \
            if ray_ns else None
        namespaces = {s.job.namespace: self.namespace, **({ray_ns["name"]: self.ray_namespace} if ray_ns else {})}
        sa_namespaces = {TRAINING_SERVICE_ACCOUNT: ray_namespace(s)}
        sa_roles = {DATASET_SERVICE_ACCOUNT: "data", TRAINING_SERVICE_ACCOUNT: "train", TRACKING_SERVICE_ACCOUNT: "mlflow"}
        self.service_accounts: dict[str, k8s.core.v1.ServiceAccount] = {}
        for sa in workload_service_accounts(s):
            if args.roles is not None and sa_roles[sa] not in args.roles:
                continue
            role = self.roles.get(sa_roles[sa])
            sa_ns = sa_namespaces.get(sa, s.job.namespace)
            metadata: dict = {"name": sa, "namespace": sa_ns}
            if role is not None:
                metadata["annotations"] = {ROLE_NAME_ANNOTATION: role.role_name}
            self.service_accounts[sa] = k8s.core.v1.ServiceAccount(
                f"{name}-sa-{sa_roles[sa]}", metadata=metadata,
                # The namespace is named by a plain string; the explicit edge orders create and delete.
                opts=pulumi.ResourceOptions.merge(kube, pulumi.ResourceOptions(depends_on=[namespaces[sa_ns]])))

        self.workload = WorkloadIdentity(namespace=s.job.namespace, ray_namespace=ray_namespace(s),
                                         resources=[*namespaces.values(), *self.service_accounts.values()],
                                         namespaces=list(namespaces.values()))
        self.register_outputs({"namespace": s.job.namespace,
                               "roles": {k: r.role_name for k, r in self.roles.items()}})
