"""The OSS bucket for datasets, models, checkpoints and tracking artifacts.

A new bucket is private (ACL private + Block Public Access), encrypted at rest, versioned, reachable over HTTPS only
(a bucket policy; `storage.require_https`) and, with `storage.vpc_only`, for object data only from the cluster's VPC;
it logs its own access under `storage.access_log_prefix` (`storage.access_logging`), and cleans up after itself
(incomplete multipart uploads, the scratch prefix, old object versions, old access logs). It is KEPT on `pulumi destroy`
by default (`storage.keep_on_destroy`: protect + retain_on_delete, also on its ACL and public-access block so a
kept bucket stays private). An existing bucket (`storage.mode: existing`) is used by name and never touched.

`refs` is the hand-over to the volumes and jobs: bucket name, intranet endpoint, how pods authenticate (RRSA
role of the CSI fuse pods, or the `storage.auth: access_key` fallback Secret in the job namespace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.config import Settings
from components.wiring import StorageRefs, oss_endpoint

# Keys the OSS CSI driver reads from a nodePublishSecretRef Secret (alibaba-cloud-csi-driver docs/oss.md).
ACCESS_KEY_SECRET_NAME = "oss-access-key"
# Object data actions the VPC condition covers. Bucket configuration (what Pulumi calls) stays reachable from
# anywhere the caller's RAM permissions allow.
OBJECT_DATA_ACTIONS = ("oss:GetObject", "oss:PutObject", "oss:DeleteObject")


def creates_bucket(s: Settings) -> bool:
    return s.storage.mode == "new"


def lifecycle_rules(s: Settings) -> list[dict]:
    """Rules that stop forgotten bytes from billing. Each action appears in one rule only (OSS refuses rules
    with overlapping prefixes and the same action)."""
    st = s.storage
    bucket_wide: dict = {"id": "abort-multipart", "prefix": "", "enabled": True,
                         "abort_multipart_uploads": [{"days": st.abort_multipart_days}]}
    if st.versioning:
        bucket_wide["id"] = "abort-multipart-and-old-versions"
        bucket_wide["noncurrent_version_expirations"] = [{"days": st.noncurrent_expire_days}]
    scratch = {"id": "expire-scratch", "prefix": st.scratch_prefix, "enabled": True,
               "expirations": [{"days": st.scratch_expire_days}]}
    rules = [bucket_wide, scratch]
    if st.access_logging:
        rules.append({"id": "expire-access-logs", "prefix": st.access_log_prefix, "enabled": True,
                      "expirations": [{"days": st.access_log_expire_days}]})
    return rules


def bucket_policy(s: Settings, bucket: str, vpc_id: Optional[str] = None) -> Optional[dict]:
    """The bucket policy of a new bucket, or None when it would say nothing. Deny statements only: with principal
    `*` and a condition they bind every caller, the bucket owner included (OSS bucket policy docs:
    https://www.alibabacloud.com/help/en/oss/user-guide/bucket-policy/). Condition keys: acs:SecureTransport
    (Cloud Config rule oss-bucket-only-https-enabled) and acs:SourceVpc (OSS "VPC policies and bucket policies"
    tutorial)."""
    st = s.storage
    resources = [f"acs:oss:*:*:{bucket}", f"acs:oss:*:*:{bucket}/*"]
    statements = []
    if st.require_https:
        statements.append({"Effect": "Deny", "Principal": ["*"], "Action": ["oss:*"], "Resource": resources,
                           "Condition": {"Bool": {"acs:SecureTransport": ["false"]}}})
    if st.vpc_only:
        if vpc_id is None:
            raise ValueError("storage.vpc_only needs the cluster's VPC id")
        statements.append({"Effect": "Deny", "Principal": ["*"], "Action": list(OBJECT_DATA_ACTIONS),
                           "Resource": [f"acs:oss:*:*:{bucket}/*"],
                           "Condition": {"StringNotEquals": {"acs:SourceVpc": [vpc_id]}}})
    return {"Version": "1", "Statement": statements} if statements else None


def encryption_rule(s: Settings) -> dict:
    rule = {"sse_algorithm": s.storage.sse_algorithm}
    if s.storage.kms_key_id:
        rule["kms_master_key_id"] = s.storage.kms_key_id
    return rule


def keep_options(s: Settings) -> dict:
    """Resource options of the bucket and its guards: kept on destroy unless keep_on_destroy is false."""
    keep = s.storage.keep_on_destroy
    return {"protect": keep, "retain_on_delete": keep}


@dataclass(kw_only=True)
class StorageArgs:
    settings: Settings
    tags: dict[str, str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    k8s_provider: pulumi.ProviderResource
    csi_role_name: pulumi.Input[str] | None = None  # RRSA role of the CSI fuse pods (components/cloud/identity.py)
    access_key_id: pulumi.Output[str] | None = None  # secret; storage.auth=access_key only
    access_key_secret: pulumi.Output[str] | None = None  # secret
    # The job Namespace (components/cloud/identity.py): the access-key Secret lives in it.
    namespace_ready: list[pulumi.Resource] = field(default_factory=list)
    # The cluster's VPC (storage.vpc_only: object data only from there).
    vpc_id: Optional[pulumi.Input[str]] = None


class Storage(pulumi.ComponentResource):
    """OSS bucket (new, private, encrypted, kept) or an existing bucket's name; the fallback AccessKey Secret."""

    refs: StorageRefs

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:storage:Storage", name, None, opts)
        s = args.settings
        st = s.storage
        keep = pulumi.ResourceOptions(parent=self, provider=args.provider, **keep_options(s))
        self.provider = args.provider  # the experiment's task files go to this bucket through the same provider

        self.bucket: alicloud.oss.Bucket | None = None
        self.policy: alicloud.oss.BucketPolicy | None = None
        self.logging: alicloud.oss.BucketLogging | None = None
        bucket_name: pulumi.Input[str] = st.bucket_name
        if creates_bucket(s):
            self.bucket = alicloud.oss.Bucket(
                f"{name}-bucket",
                bucket=st.bucket_name,
                storage_class="Standard",
                redundancy_type="LRS",
                # Only an explicit keep_on_destroy: false lets destroy empty and delete the bucket.
                force_destroy=not st.keep_on_destroy,
                versioning={"status": "Enabled"} if st.versioning else None,
                server_side_encryption_rule=encryption_rule(s),
                lifecycle_rules=lifecycle_rules(s),
                tags=args.tags,
                # The separate BucketPolicy and BucketLogging resources own these. The Bucket's own inline
                # `policy` and `logging` are Optional, not Computed, and its Read fills them from the live bucket
                # (terraform-provider-alicloud alicloud/resource_alicloud_oss_bucket.go Read :910-932, :715-731),
                # so without this the next bucket update sends DELETE ?policy and DeleteBucketLogging (:1528-1533,
                # :1208-1211): the HTTPS-only rule and the access log would silently go.
                opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(ignore_changes=["policy", "logging"])),
            )
            bucket_name = self.bucket.bucket
            # `bucket=self.bucket.bucket` (an Output) already orders these after the bucket; no depends_on needed.
            guard = keep
            self.acl = alicloud.oss.BucketAcl(f"{name}-acl", bucket=self.bucket.bucket, acl="private", opts=guard)
            self.public_access_block = alicloud.oss.BucketPublicAccessBlock(
                f"{name}-public-access-block", bucket=self.bucket.bucket, block_public_access=True, opts=guard)
            if st.require_https or st.vpc_only:
                self.policy = alicloud.oss.BucketPolicy(
                    f"{name}-policy", bucket=self.bucket.bucket,
                    policy=pulumi.Output.all(self.bucket.bucket, args.vpc_id).apply(
                        lambda a: json.dumps(bucket_policy(s, a[0], a[1]), sort_keys=True)),
                    opts=guard)
            if st.access_logging:
                # Into the bucket itself: no second bucket to keep private, and the lifecycle rule expires them.
                self.logging = alicloud.oss.BucketLogging(
                    f"{name}-logging", bucket=self.bucket.bucket, target_bucket=self.bucket.bucket,
                    target_prefix=st.access_log_prefix, opts=guard)

        self.access_key_secret: k8s.core.v1.Secret | None = None
        if st.auth == "access_key":
            assert args.access_key_id is not None and args.access_key_secret is not None  # components/config/secrets.py
            self.access_key_secret = k8s.core.v1.Secret(
                f"{name}-access-key",
                metadata={"name": ACCESS_KEY_SECRET_NAME, "namespace": s.job.namespace},
                type="Opaque",
                string_data={"akId": args.access_key_id, "akSecret": args.access_key_secret},
                # Lives in the job Namespace, which is named by a plain string.
                opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=args.namespace_ready),
            )

        self.refs = StorageRefs(
            bucket_name=bucket_name,
            endpoint=oss_endpoint(s.region),
            auth=st.auth,
            csi_role_name=args.csi_role_name if st.auth == "rrsa" else None,
            access_key_secret_name=ACCESS_KEY_SECRET_NAME if st.auth == "access_key" else None,
        )
        self.register_outputs({"bucket": bucket_name, "endpoint": self.refs.endpoint})
