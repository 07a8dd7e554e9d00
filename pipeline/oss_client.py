"""Build an alibabacloud-oss-v2 client from the environment, and the small object helpers the
upload, staging and teardown code share.

Credentials, first match wins:

1. RRSA. ACK's ack-pod-identity-webhook injects ALIBABA_CLOUD_ROLE_ARN,
   ALIBABA_CLOUD_OIDC_PROVIDER_ARN and ALIBABA_CLOUD_OIDC_TOKEN_FILE into pods whose service
   account asks for it. oss-v2 has no OIDC provider of its own, so the pod needs the
   `alibabacloud-credentials` package, whose OIDCRoleArnCredentialsProvider calls STS
   AssumeRoleWithOIDC and refreshes the STS token before it expires. This is the pairing the SDK's
   guide prescribes ("OIDC角色SSO" in
   https://github.com/aliyun/alibabacloud-oss-python-sdk-v2/blob/master/DEVGUIDE-CN.md).
   STS is called in OSS_REGION; set ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED=true to use the VPC
   STS endpoint from nodes without public egress (read by alibabacloud-credentials itself).
2. OSS_ACCESS_KEY_ID / OSS_ACCESS_KEY_SECRET (and optional OSS_SESSION_TOKEN), the variables
   oss-v2's own EnvironmentVariableCredentialsProvider reads; in a pod they come from a Secret.
3. ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET (and optional
   ALIBABA_CLOUD_SECURITY_TOKEN), the names the aliyun CLI uses on a laptop.
4. ALICLOUD_ACCESS_KEY / ALICLOUD_SECRET_KEY (and optional ALICLOUD_SECURITY_TOKEN), the names the
   Pulumi/Terraform alicloud provider reads.

Secrets are never printed: errors name the variables, never their values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import alibabacloud_oss_v2 as oss

RRSA_VARS = ("ALIBABA_CLOUD_ROLE_ARN", "ALIBABA_CLOUD_OIDC_PROVIDER_ARN", "ALIBABA_CLOUD_OIDC_TOKEN_FILE")
OSS_KEY_VARS = ("OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET")
ALIBABA_KEY_VARS = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET")
# The Pulumi/Terraform alicloud provider's own names: the README's cloud path exports these for `pulumi up`,
# so teardown on the same shell works without renaming them.
ALICLOUD_KEY_VARS = ("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY")

# A training run's job may upload many GiB; the SDK default of 3 attempts gives up too early on a
# flaky link. Each attempt backs off with full jitter (SDK default: 0.2 s base, 20 s cap).
DEFAULT_MAX_ATTEMPTS = 5

CRC_BLOCK = 1024 * 1024

CredentialsSource = Literal["rrsa", "oss_access_key", "alibaba_cloud_access_key", "alicloud_provider_key"]


class CredentialsMissing(RuntimeError):
    """No usable credentials in the environment; the message names the variables to set."""


def credentials_source(env: Mapping[str, str]) -> CredentialsSource:
    """Which credentials the environment provides (see the module docstring for the order)."""
    rrsa_set = [v for v in RRSA_VARS if env.get(v)]
    if rrsa_set and len(rrsa_set) < len(RRSA_VARS):
        # Half an RRSA setup is a misconfigured service account; falling back to keys would hide it.
        missing = ", ".join(v for v in RRSA_VARS if not env.get(v))
        raise CredentialsMissing(f"RRSA is partly configured: {missing} not set (all of {', '.join(RRSA_VARS)} are "
                                 "needed; check the pod's service account annotation for ack-pod-identity-webhook)")
    if rrsa_set:
        return "rrsa"
    if all(env.get(v) for v in OSS_KEY_VARS):
        return "oss_access_key"
    if all(env.get(v) for v in ALIBABA_KEY_VARS):
        return "alibaba_cloud_access_key"
    if all(env.get(v) for v in ALICLOUD_KEY_VARS):
        return "alicloud_provider_key"
    raise CredentialsMissing(
        "no OSS credentials: set RRSA (" + ", ".join(RRSA_VARS) + "), or " + " and ".join(OSS_KEY_VARS)
        + ", or " + " and ".join(ALIBABA_KEY_VARS) + ", or " + " and ".join(ALICLOUD_KEY_VARS))


def adapt_credentials_provider(provider) -> oss.credentials.CredentialsProvider:
    """Wrap an alibabacloud-credentials provider (get_credentials() returning an object with
    get_access_key_id/get_access_key_secret/get_security_token) as an oss-v2 provider.

    oss-v2 calls the provider before every request; the wrapped provider caches and refreshes the
    STS token itself, so this stays cheap.
    """

    def fetch() -> oss.credentials.Credentials:
        c = provider.get_credentials()
        return oss.credentials.Credentials(
            access_key_id=c.get_access_key_id(),
            access_key_secret=c.get_access_key_secret(),
            security_token=c.get_security_token(),
        )

    return oss.credentials.CredentialsProviderFunc(func=fetch)


def rrsa_credentials_provider(env: Mapping[str, str], region: str) -> oss.credentials.CredentialsProvider:
    # Imported here: only pods that use RRSA need the package (see docs/pipeline.md for the pin).
    try:
        from alibabacloud_credentials.provider import OIDCRoleArnCredentialsProvider
    except ImportError as err:
        raise CredentialsMissing(
            "RRSA variables are set but the alibabacloud-credentials package is not installed; "
            "pip install alibabacloud-credentials (pinned in docs/pipeline.md)") from err
    provider = OIDCRoleArnCredentialsProvider(
        role_arn=env["ALIBABA_CLOUD_ROLE_ARN"],
        oidc_provider_arn=env["ALIBABA_CLOUD_OIDC_PROVIDER_ARN"],
        oidc_token_file_path=env["ALIBABA_CLOUD_OIDC_TOKEN_FILE"],
        role_session_name=env.get("ALIBABA_CLOUD_ROLE_SESSION_NAME") or "verl-ack",
        sts_region_id=region,
    )
    return adapt_credentials_provider(provider)


def credentials_provider_from_env(env: Mapping[str, str], region: str) -> oss.credentials.CredentialsProvider:
    source = credentials_source(env)
    if source == "rrsa":
        return rrsa_credentials_provider(env, region)
    if source == "oss_access_key":
        return oss.credentials.StaticCredentialsProvider(
            env["OSS_ACCESS_KEY_ID"], env["OSS_ACCESS_KEY_SECRET"], env.get("OSS_SESSION_TOKEN") or None)
    if source == "alibaba_cloud_access_key":
        return oss.credentials.StaticCredentialsProvider(
            env["ALIBABA_CLOUD_ACCESS_KEY_ID"], env["ALIBABA_CLOUD_ACCESS_KEY_SECRET"],
            env.get("ALIBABA_CLOUD_SECURITY_TOKEN") or None)
    return oss.credentials.StaticCredentialsProvider(
        env["ALICLOUD_ACCESS_KEY"], env["ALICLOUD_SECRET_KEY"], env.get("ALICLOUD_SECURITY_TOKEN") or None)


def make_client(
    *,
    region: str,
    credentials_provider: oss.credentials.CredentialsProvider,
    endpoint: str | None = None,
    use_internal_endpoint: bool = False,
    retryer: oss.retry.StandardRetryer | None = None,
) -> oss.Client:
    """An OSS client. `endpoint` wins over `use_internal_endpoint`; an IP endpoint (a test server)
    makes the SDK switch to path-style addressing by itself."""
    cfg = oss.config.load_default()
    cfg.region = region
    cfg.credentials_provider = credentials_provider
    cfg.retryer = retryer or oss.retry.StandardRetryer(max_attempts=DEFAULT_MAX_ATTEMPTS)
    if endpoint:
        cfg.endpoint = endpoint
    elif use_internal_endpoint:
        # oss-<region>-internal.aliyuncs.com: reachable from the cluster's VPC without NAT, no traffic fee.
        cfg.use_internal_endpoint = True
    return oss.Client(cfg)


def truthy(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean; use true or false")


def client_from_env(env: Mapping[str, str] | None = None) -> oss.Client:
    """The client an in-cluster job uses: OSS_REGION (required), OSS_ENDPOINT (optional override),
    OSS_INTERNAL_ENDPOINT (default true: use the region's internal endpoint when OSS_ENDPOINT is unset)."""
    env = os.environ if env is None else env
    region = require(env, "OSS_REGION")
    return make_client(
        region=region,
        credentials_provider=credentials_provider_from_env(env, region),
        endpoint=env.get("OSS_ENDPOINT") or None,
        use_internal_endpoint=truthy(env.get("OSS_INTERNAL_ENDPOINT"), True),
    )


def require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise KeyError(f"environment variable {name} is required")
    return value


def normalize_prefix(prefix: str) -> str:
    """'' stays ''; otherwise no leading '/' and exactly one trailing '/'."""
    prefix = prefix.strip().lstrip("/")
    return prefix.rstrip("/") + "/" if prefix else ""


@dataclass(frozen=True)
class ObjectStat:
    key: str
    size: int
    crc64: str | None
    etag: str | None = None


def is_not_found(err: Exception) -> bool:
    inner = err.unwrap() if isinstance(err, oss.exceptions.OperationError) else err
    return isinstance(inner, oss.exceptions.ServiceError) and inner.status_code == 404


def head(client: oss.Client, bucket: str, key: str) -> ObjectStat | None:
    """Size and CRC64 of an object, or None when it does not exist (any other error propagates)."""
    try:
        r = client.head_object(oss.HeadObjectRequest(bucket=bucket, key=key))
    except oss.exceptions.OperationError as err:
        if is_not_found(err):
            return None
        raise
    return ObjectStat(key=key, size=int(r.content_length), crc64=r.hash_crc64, etag=r.etag)


def list_objects(client: oss.Client, bucket: str, prefix: str) -> list[ObjectStat]:
    """Every object under `prefix` (size and ETag; listings carry no CRC64), sorted by key."""
    out = []
    paginator = client.list_objects_v2_paginator()
    for page in paginator.iter_page(oss.ListObjectsV2Request(bucket=bucket, prefix=prefix)):
        for o in page.contents or []:
            out.append(ObjectStat(key=o.key, size=int(o.size), crc64=None, etag=o.etag))
    return sorted(out, key=lambda o: o.key)


def get_text(client: oss.Client, bucket: str, key: str) -> str | None:
    try:
        r = client.get_object(oss.GetObjectRequest(bucket=bucket, key=key))
    except oss.exceptions.OperationError as err:
        if is_not_found(err):
            return None
        raise
    return r.body.content.decode("utf-8")


def crc64_of_bytes(data: bytes) -> str:
    from alibabacloud_oss_v2.crc import Crc64

    c = Crc64(0)
    c.update(data)
    return str(c.sum64())


def crc64_of_file(path: str | os.PathLike) -> str:
    """CRC-64/ECMA-182 as OSS reports it in x-oss-hash-crc64ecma (unsigned decimal string)."""
    from alibabacloud_oss_v2.crc import Crc64

    c = Crc64(0)
    with open(path, "rb") as f:
        while block := f.read(CRC_BLOCK):
            c.update(block)
    return str(c.sum64())
