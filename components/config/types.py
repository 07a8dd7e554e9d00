"""Shared field types and the strict base model: one place for each validation rule."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# OSS bucket naming rules: 3-63 characters, lowercase letters, digits and hyphens, starting and ending
# with a letter or digit (https://www.alibabacloud.com/help/en/oss/user-guide/bucket-naming-conventions).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+(-\d+)?$")
# Ray-on-K8s: the RayJob name feeds the RayCluster and Service names; KubeRay rejects > 47 characters
# (ray-operator controllers/ray/utils/validation.go, 53 - 6 for the generated suffix).
RAYJOB_NAME_MAX = 47


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


def _cidr(v: str) -> str:
    ipaddress.ip_network(v, strict=True)
    return v


Cidr = Annotated[str, Field(description="An IPv4 CIDR block, e.g. 10.1.0.0/16.")]
Port = Annotated[int, Field(ge=1, le=65535)]
# Kubernetes label syntax (apimachinery validation: qualified name key, value <= 63 characters).
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
CPU_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\d+m)$")
MEMORY_QUANTITY = re.compile(r"^\d+(Ki|Mi|Gi|Ti)$")
PIN = re.compile(r"^\d+(\.\d+)*([a-z]+\d+)?(\.post\d+)?$")


def _quantity(v: str, pattern: re.Pattern, what: str) -> str:
    if not pattern.fullmatch(v) or re.fullmatch(r"0+(\.0+)?m?|0+(Ki|Mi|Gi|Ti)", v):
        raise ValueError(f"{v!r} is not {what} (and not zero)")
    return v


# Kubernetes resource quantities as settings types: one rule, every CPU/memory field.
CpuQuantity = Annotated[str, AfterValidator(lambda v: _quantity(v, CPU_QUANTITY, "a CPU quantity like 1, 500m or 2.5"))]
MemoryQuantity = Annotated[str, AfterValidator(lambda v: _quantity(v, MEMORY_QUANTITY, "a memory quantity like 2Gi or 512Mi"))]


def _storage_class(v: str) -> str:
    if not DNS1123_SUBDOMAIN.fullmatch(v):
        raise ValueError(f"{v!r} is not a StorageClass name (DNS-1123 subdomain)")
    return v


StorageClassName = Annotated[str, AfterValidator(_storage_class)]
# Empty passes here so the section's own rule ("tracking.enabled needs storage_class") names the problem.
StorageClassNameOrEmpty = Annotated[str, AfterValidator(lambda v: _storage_class(v) if v else v)]
