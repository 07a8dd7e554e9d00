"""Shared field types and the strict base model: one place for each validation rule.

Every text rule is an `Annotated` type whose message names the value, the rule and the fix. Patterns spell
their character classes out ([0-9], [a-z]): `\\d` and `\\w` also match non-ASCII digits and letters, which
no cloud API, shell or Kubernetes object accepts. Values that reach a shell (versions, image references,
names) admit no shell metacharacter at all, so quoting is a second line of defence, not the only one.
"""

from __future__ import annotations

import datetime
import difflib
import ipaddress
import math
import re
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

# Exported: the workload builders re-check names with the same patterns.
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Ray-on-K8s: the RayJob name feeds the RayCluster and Service names; KubeRay rejects > 47 characters
# (ray-operator controllers/ray/utils/validation.go, 53 - 6 for the generated suffix).
RAYJOB_NAME_MAX = 47
# Strings Hydra (and YAML) read as a number, bool or null; verl's override renderer refuses them as names.
HYDRA_NON_STRING = re.compile(
    r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|true|false|null|none|[-+]?inf|nan", re.IGNORECASE)
# Upper bound of every integer setting that has no tighter one: the largest value Kubernetes and the
# Alibaba Cloud APIs carry (int64), so an accepted number never overflows on the way.
INT64_MAX = 2**63 - 1


class Strict(BaseModel):
    # strict: no silent coercion (YAML `123` is not the text "123", `1.5` not the integer 1, !!binary not text);
    # allow_inf_nan=False: .inf and .nan are no duration, price or coefficient.
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True, strict=True, allow_inf_nan=False)


# --------------------------------------------------------------------------------------------- helpers
def _show(v: str) -> str:
    return repr(v if len(v) <= 80 else v[:77] + "...")


def _text(pattern: str, what: str, fix: str, *, max_len: int | None = None,
          also: Callable[[str], str | None] | None = None) -> AfterValidator:
    """A text rule: `pattern` must match the whole value (ASCII only), else '<value> is not <what>: <fix>'."""
    regex = re.compile(pattern)

    def check(v: str) -> str:
        if not v.isascii() or not regex.fullmatch(v) or (max_len is not None and len(v) > max_len):
            raise ValueError(f"{_show(v)} is not {what}: {fix}")
        extra = also(v) if also else None
        if extra:
            raise ValueError(f"{_show(v)} is not {what}: {extra}")
        return v

    return AfterValidator(check)


# --------------------------------------------------------------------------------------------- network
def _cidr(v: str) -> str:
    if not v.isascii() or not re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}", v):
        raise ValueError(f"{_show(v)} is not an IPv4 CIDR block: write address/prefix, e.g. 10.1.0.0/16")
    try:
        ipaddress.IPv4Network(v, strict=True)
    except ValueError as err:
        raise ValueError(f"{_show(v)} is not an IPv4 CIDR block ({err}); use the network address, e.g. "
                         "10.1.0.0/16") from None
    return v


Cidr = Annotated[str, AfterValidator(_cidr), Field(description="An IPv4 CIDR block, e.g. 10.1.0.0/16.")]
Port = Annotated[int, Field(ge=1, le=65535)]
VpcId = Annotated[str, _text(r"vpc-[a-z0-9]{1,64}", "a VPC id", "copy it from the VPC console, e.g. vpc-bp1abc")]
VSwitchId = Annotated[str, _text(r"vsw-[a-z0-9][a-z0-9-]{0,63}", "a vSwitch id",
                                 "copy it from the VPC console, e.g. vsw-bp1abc")]
# The regions the provider knows (aliyun/terraform-provider-alicloud@ace5bcf alicloud/connectivity/regions.go
# ValidRegions, lines 66-79; docs/facts.md "Regions and zones"). A region opened later is refused until added here.
REGIONS = (
    "cn-hangzhou", "cn-qingdao", "cn-beijing", "cn-shenzhen", "cn-hongkong", "cn-shanghai", "cn-zhangjiakou",
    "cn-huhehaote", "cn-chengdu", "cn-heyuan", "cn-wulanchabu", "cn-guangzhou", "cn-nanjing", "cn-fuzhou",
    "cn-zhongwei", "us-west-1", "us-east-1", "us-southeast-1", "na-south-1", "ap-northeast-1", "ap-northeast-2",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
    "ap-southeast-8", "ap-south-1", "me-east-1", "me-central-1", "eu-central-1", "eu-west-1", "rus-west-1",
    "cn-north-2-gov-1", "cn-shenzhen-finance-1", "cn-szfinance", "cn-shenzhen-finance", "cn-shanghai-finance-1-pub",
    "cn-shanghai-finance-1", "cn-hangzhou-finance", "cn-hzfinance", "cn-hzjbp", "cn-beijing-finance-1",
    "cn-beijing-finance-1-pub")


def zone_example(region: str) -> str:
    """A zone id of `region` in Alibaba's two spellings: a numbered region appends the letter (ap-southeast-1a),
    any other appends '-' and the letter (cn-hangzhou-h)."""
    return f"{region}a" if region[-1].isdigit() else f"{region}-h"


def zone_in_region(zone: str, region: str) -> bool:
    """Whether `zone` is spelled as a zone of `region` (one letter after it, as zone_example); whether the
    account's region has that zone is read at preview time (components/cloud/account_checks.py)."""
    sep = "" if region[-1].isdigit() else "-"
    return re.fullmatch(re.escape(region + sep) + "[a-z]", zone) is not None


def _region(v: str) -> str:
    if v not in REGIONS:
        near = difflib.get_close_matches(v, REGIONS, n=1, cutoff=0.7) if v.isascii() else []
        hint = f"did you mean {near[0]}? " if near else ""
        raise ValueError(f"{_show(v)} is not an Alibaba Cloud region id: {hint}use one like ap-southeast-1 or "
                         "cn-hangzhou (the provider's list: components/config/types.py REGIONS)")
    return v


RegionId = Annotated[str, AfterValidator(_region)]
ZoneId = Annotated[str, _text(r"[a-z]{2}(-[a-z0-9]+)+", "an Alibaba Cloud zone id",
                              "use one like ap-southeast-1a or cn-hangzhou-h", max_len=40)]

# --------------------------------------------------------------------------------------------- DNS names
_dns1123_label = _text(DNS1123_LABEL.pattern, "a DNS-1123 label", "use at most 63 lowercase letters, digits or '-', "
                       "starting and ending with a letter or digit", max_len=63)
Dns1123Label = Annotated[str, _dns1123_label]
# Empty means "the built-in name" (ACK add-on roles).
Dns1123LabelOrEmpty = Annotated[str, AfterValidator(lambda v: _dns1123_label.func(v) if v else v)]
Dns1035Label = Annotated[str, _text(DNS1035.pattern, "a DNS-1035 label",
                                    "it must start with a letter (Kubernetes refuses a Service name that starts with "
                                    "a digit) and hold at most 63 lowercase letters, digits or '-'", max_len=63)]
Dns1123Subdomain = Annotated[str, _text(DNS1123_SUBDOMAIN.pattern, "a DNS-1123 subdomain",
                                        "use at most 253 lowercase letters, digits, '-' or '.'", max_len=253)]
RayJobName = Annotated[str, _text(DNS1035.pattern, "a valid RayJob name",
                                  f"KubeRay needs a DNS-1035 label of at most {RAYJOB_NAME_MAX} characters "
                                  "(lowercase letters, digits, '-', starting with a letter)", max_len=RAYJOB_NAME_MAX)]
DomainName = Annotated[str, _text(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+",
                                  "a domain name", "use a lowercase DNS name with at least one dot, e.g. "
                                  "sandbox.example.com (no scheme, port or trailing dot)", max_len=253)]
_storage_class = _text(DNS1123_SUBDOMAIN.pattern, "a StorageClass name", "use a DNS-1123 subdomain such as "
                       "alicloud-disk-topology-alltype (`kubectl get storageclass` lists them)", max_len=253)
StorageClassName = Annotated[str, _storage_class]
# Empty passes here so the section's own rule ("tracking.enabled needs storage_class") names the problem.
StorageClassNameOrEmpty = Annotated[str, AfterValidator(lambda v: _storage_class.func(v) if v else v)]

# --------------------------------------------------------------------------------------------- Kubernetes
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
# Kubernetes label syntax (apimachinery validation: qualified name key, value <= 63 characters).
LabelKey = Annotated[str, _text(rf"({DNS1123_SUBDOMAIN.pattern}/)?{_LABEL_NAME}", "a Kubernetes label key",
                                "use [prefix/]name: a DNS subdomain prefix and a name of at most 63 letters, digits, "
                                "'-', '_' or '.', e.g. app.kubernetes.io/name", max_len=317)]
LabelValue = Annotated[str, _text(rf"({_LABEL_NAME})?", "a Kubernetes label value",
                                  "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter "
                                  "or digit")]
EnvVarName = Annotated[str, _text(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable name",
                                  "use letters, digits and '_', not starting with a digit", max_len=256)]
ExtendedResourceName = Annotated[str, _text(rf"{DNS1123_SUBDOMAIN.pattern}/{_LABEL_NAME}",
                                            "an extended resource name",
                                            "use <domain>/<name>, e.g. rdma/hca (the device plugin's name)",
                                            max_len=317)]
ResourceCount = Annotated[str, _text(r"[1-9][0-9]{0,8}", "a resource count",
                                     "write a positive whole number in quotes, e.g. '1' (extended resources are "
                                     "counts)")]


def _quantity(pattern: str, what: str) -> AfterValidator:
    regex = re.compile(pattern)

    def check(v: str) -> str:
        if not v.isascii() or not regex.fullmatch(v) or re.fullmatch(r"0+(\.0+)?m?|0+(Ki|Mi|Gi|Ti)", v):
            raise ValueError(f"{_show(v)} is not {what} (and not zero)")
        return v

    return AfterValidator(check)


# Kubernetes resource quantities as settings types: one rule, every CPU/memory field.
CpuQuantity = Annotated[str, _quantity(r"[0-9]{1,6}(\.[0-9]{1,3})?|[0-9]{1,9}m",
                                       "a CPU quantity like 1, 500m or 2.5")]
MemoryQuantity = Annotated[str, _quantity(r"[0-9]{1,9}(Ki|Mi|Gi|Ti)", "a memory quantity like 2Gi or 512Mi")]

# --------------------------------------------------------------------------------------------- versions
# A pip pin is spliced into Ray's runtime_env, which KubeRay passes inside a double-quoted bash word: only
# [0-9A-Za-z.] may appear, so `$(...)`, backticks and quotes cannot. PEP 440 release segments plus an optional
# pre-release, post and dev segment (https://peps.python.org/pep-0440/), e.g. 1.2.3, 2.0.0rc1, 1.0.post1.
ExactVersion = Annotated[str, _text(r"[0-9]{1,6}(\.[0-9]{1,6}){0,5}((a|b|rc)[0-9]{1,6})?(\.post[0-9]{1,6})?"
                                    r"(\.dev[0-9]{1,6})?", "an exact version pin",
                                    "write one release like 3.17.2 (optionally rc1/.post1/.dev1), not a range; only "
                                    "digits, letters and '.'")]
# Versions the program compares numerically (KubeRay feature gates, RayCluster rayVersion, chart versions).
ReleaseVersion = Annotated[str, _text(r"[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}", "a major.minor.patch release",
                                      "write an exact version like 1.7.0 (pins, not ranges)")]
KubernetesVersion = Annotated[str, _text(r"1\.[0-9]{1,3}\.[0-9]{1,3}(-aliyun\.[0-9]{1,3})?",
                                         "an ACK Kubernetes version", "use one like 1.34.1-aliyun.1")]
KubernetesMinor = Annotated[str, _text(r"1\.[0-9]{1,3}", "a Kubernetes minor version",
                                       "quote it, e.g. \"1.34\" (unquoted, YAML reads 1.30 as the number 1.3)")]
AddonVersion = Annotated[str, _text(r"v?[0-9]{1,6}(\.[0-9]{1,6}){0,3}([-+][0-9A-Za-z][0-9A-Za-z.-]{0,40})?",
                                    "an add-on version", "use the version string ACK lists, e.g. v1.16.8 or "
                                    "1.2.3-aliyun.1 (cs.get_kubernetes_addons)")]

# --------------------------------------------------------------------------------------------- images
# A registry host has a dot or a port, or is localhost (else the first path part is a Docker Hub namespace).
_LABEL = r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?"
_HOST = rf"(localhost|{_LABEL}(\.{_LABEL})+|{_LABEL}(?=:))(:[0-9]{{1,5}})?"
_PATH = r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
RegistryHost = Annotated[str, _text(_HOST, "a registry host", "use host[:port], e.g. "
                                    "registry-vpc.cn-hangzhou.aliyuncs.com (no scheme or path)", max_len=253)]
ImageRepository = Annotated[str, _text(rf"({_HOST}/)?{_PATH}", "an image repository",
                                       "use [registry/]namespace/repository in lowercase, e.g. "
                                       "registry.cn-hangzhou.aliyuncs.com/team/verl (no tag)", max_len=255)]
ImageTag = Annotated[str, _text(_TAG, "an image tag", "use at most 128 letters, digits, '_', '.' or '-', not "
                                "starting with '.' or '-'")]
# [registry/]repository:tag[@sha256:<64 hex>]: a tag is required (versions are pinned) and nothing in it is a
# shell metacharacter (https://github.com/distribution/reference/blob/main/reference.go).
ImageRef = Annotated[str, _text(rf"({_HOST}/)?{_PATH}:{_TAG}(@sha256:[0-9a-f]{{64}})?", "a pinned image reference",
                                "use [registry/]repository:tag[@sha256:<64 hex digits>], e.g. "
                                "verlai/verl:vllm024.dev2", max_len=512)]
ImageDigest = Annotated[str, _text(r"sha256:[0-9a-f]{64}", "an image digest",
                                   "use sha256:<64 lowercase hex digits> (`docker buildx imagetools inspect <image>`)")]
AcrName = Annotated[str, _text(r"[a-z0-9][a-z0-9._-]{1,63}", "a valid ACR name",
                               "use 2-64 lowercase letters, digits, '.', '_' or '-'")]

# --------------------------------------------------------------------------------------------- cloud
# OSS bucket naming rules: 3-63 characters, lowercase letters, digits and hyphens, starting and ending
# with a letter or digit (https://www.alibabacloud.com/help/en/oss/user-guide/bucket-naming-conventions).
BucketName = Annotated[str, _text(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", "a valid OSS bucket name",
                                  "use 3-63 characters, lowercase letters, digits and single hyphens, starting and "
                                  "ending with a letter or digit",
                                  also=lambda v: "use single hyphens ('--' is refused)" if "--" in v else None)]
KeyPrefix = Annotated[str, _text(r"([a-z0-9][a-z0-9._-]{0,99}/){1,8}", "an object key prefix",
                                 "use one like 'checkpoints/' (lowercase, ends with '/', no leading '/')")]
# A prefix of any object the program's own names may produce (project and experiment names and the staged model
# folders keep their capitals), e.g. a run's global_step_N/ folder or a model directory.
ObjectPrefix = Annotated[str, _text(r"([A-Za-z0-9][A-Za-z0-9._-]{0,99}/){1,16}", "a bucket key prefix",
                                    "use one like 'checkpoints/<project>/<experiment>/global_step_40/' (ends with "
                                    "'/', no leading '/'; letters, digits, '.', '_' or '-' in each folder name)")]
CloudId = Annotated[str, _text(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", "a cloud resource id",
                               "it must not be empty or hold spaces: copy the id from the console (letters, "
                               "digits, '_', '.', ':' or '-')")]
ClusterId = Annotated[str, _text(r"c[0-9a-z]{8,40}", "an ACK cluster id",
                                 "use c followed by 8-40 lowercase letters/digits, e.g. c1234567890abcdef")]
InstanceType = Annotated[str, _text(r"ecs\.[a-z0-9][a-z0-9.-]{0,62}", "an ECS instance type",
                                    "they start with 'ecs.', e.g. ecs.gn8v.8xlarge")]
CasCertificateId = Annotated[str, _text(r"[0-9]{1,20}", "a CAS certificate id",
                                        "digits only, without a -cn-hangzhou style suffix (certificate_id_suffix "
                                        "adds it)")]
EnvironmentName = Annotated[str, _text(r"[a-z][a-z0-9-]{1,22}[a-z0-9]", "a valid environment name",
                                       "use 3-24 lowercase letters, digits or '-', starting with a letter")]
TagKey = Annotated[str, _text(r"[A-Za-z0-9_.:/=+@-]{1,128}", "an Alibaba Cloud tag key",
                              "use 1-128 letters, digits or _ . : / = + - @",
                              also=lambda v: "tag keys may not start with aliyun or acs:" if
                              v.lower().startswith(("aliyun", "acs:")) else None)]
TagValue = Annotated[str, _text(r"[A-Za-z0-9_.:/=+@ -]{0,128}", "an Alibaba Cloud tag value",
                                "use at most 128 letters, digits, spaces or _ . : / = + - @")]
HttpsUrl = Annotated[str, _text(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?", "an https:// URL",
                                "use https://host/path without spaces, quotes or query strings, e.g. "
                                "https://mirrors.aliyun.com/pypi/simple/", max_len=2048)]
UrlPath = Annotated[str, _text(r"/[A-Za-z0-9._~/-]{0,255}", "a URL path",
                               "use a path starting with '/' of letters, digits and . _ ~ / -, e.g. /mcp")]
DottedKeyPath = Annotated[str, _text(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*){0,15}", "a dotted key path",
                                     "use one like sandboxManager.domain", max_len=256)]
PackageName = Annotated[str, _text(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?", "a pip package name",
                                   "use the name on PyPI, e.g. huggingface-hub")]
# A word that becomes part of a path and a Hydra override on the job's command line.
PlainName = Annotated[str, _text(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", "a plain name",
                                 "use at most 100 letters, digits, '.', '_' or '-' (it becomes a path and a "
                                 "shell word)")]


def _not_hydra_literal(v: str) -> str:
    if HYDRA_NON_STRING.fullmatch(v):
        raise ValueError(f"{_show(v)} is not usable as a name: YAML and Hydra read it as a number, bool or null; "
                         f"add a letter, e.g. run-{v}")
    return v


# A name verl receives as a Hydra override value: a plain name that Hydra does not read as something else.
HydraName = Annotated[PlainName, AfterValidator(_not_hydra_literal)]


def _plain_text(max_len: int) -> AfterValidator:
    def check(v: str) -> str:
        if len(v) > max_len:
            raise ValueError(f"text of {len(v)} characters is too long: use at most {max_len}")
        if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in v):
            raise ValueError(f"{_show(v)} holds a control character or an unpaired surrogate: write printable text")
        return v

    return AfterValidator(check)


# Free text shown in the plan or stored in an object, never in a shell or a name.
ShortText = Annotated[str, _plain_text(64)]
EnvValue = Annotated[str, _plain_text(4096)]


# --------------------------------------------------------------------------------------------- dates & JSON
def _iso_date(v: Any) -> Any:
    # YAML reads an unquoted 2024-05-01 as a date; the field's format is that date's ISO text.
    if isinstance(v, datetime.datetime):
        raise ValueError("give a date (YYYY-MM-DD), not a timestamp")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, str):
        if not v.isascii() or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", v):
            raise ValueError(f"{_show(v)} is not a date: write YYYY-MM-DD, e.g. 2025-01-31")
        try:
            datetime.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"{_show(v)} is not a calendar date: write YYYY-MM-DD, e.g. 2025-01-31") from None
    return v


IsoDate = Annotated[str, BeforeValidator(_iso_date)]

JSON_MAX_DEPTH = 32


def _json_value(v: Any, where: str = "", depth: int = 0) -> Any:
    if depth > JSON_MAX_DEPTH:
        raise ValueError(f"{where or 'value'} nests deeper than {JSON_MAX_DEPTH} levels; flatten it")
    if v is None or isinstance(v, bool) or isinstance(v, str):
        if isinstance(v, str):
            _plain_text(65536).func(v)
        return v
    if isinstance(v, int):
        if abs(v) > INT64_MAX:
            raise ValueError(f"{where or 'value'}: {v} does not fit in 64 bits; use a smaller number")
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{where or 'value'}: {v} is not a finite number")
        return v
    if isinstance(v, list):
        return [_json_value(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise ValueError(f"{where or 'mapping'} has the key {k!r} ({type(k).__name__}); JSON keys are text: "
                                 "quote it")
        return {k: _json_value(x, f"{where}.{k}" if where else k, depth + 1) for k, x in v.items()}
    raise ValueError(f"{where or 'value'} is a YAML {type(v).__name__}, which JSON cannot carry; write a string, "
                     "number, bool, list or mapping")


def _json_object(v: Any) -> Any:
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping (a JSON object), not {type(v).__name__}")
    return _json_value(v)


# A JSON object passed on to an API as is (e.g. an add-on's config).
JsonObject = Annotated[dict[str, Any], BeforeValidator(_json_object)]


def mapping(v: Any, what: str) -> dict:
    """`v` as a dict for a before-validator that merges defaults; a clear error for any other shape."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{what} must be a mapping (key: value lines), not a {type(v).__name__}")
    return dict(v)
