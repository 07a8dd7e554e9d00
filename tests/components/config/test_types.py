"""Each field type holds one rule: what it accepts, what it refuses, and a message that names the rule and the fix."""

import datetime
import math

import pytest
from pydantic import TypeAdapter, ValidationError

from components.config import Settings
from components.config import types as T

# A shell metacharacter or non-ASCII digit in any of these would reach a shell, a URL or an API unescaped.
HOSTILE = ["$(id)", "`id`", "a;b", "a b", "a'b", 'a"b', "a|b", "a&b", "a>b", "a\nb", "\u0661\u0662", "\uff11", "x\x00"]

TYPES = {
    # type: (good values, bad values, text in the message)
    "ExactVersion": (["3.17.2", "0.9.1", "2.52.1", "5.5.3", "2.0.0rc1", "1.0.post1", "1.0.dev3", "26"],
                     ["3.17.2$(cmd)", "3.17.2`cmd`", ">=5", "~=1.2", "1.2.*", "1.2.3 ", "v1.2.3", "", "1..2",
                      "\u0663.1.2"], "exact version pin"),
    "ReleaseVersion": (["1.7.0", "0.9.1"], ["1.7", "1.7.0rc1", "1.7.0-x", "\u0661.7.0"], "major.minor.patch"),
    "ImageRef": (["verlai/verl:vllm024.latest", "python:3.11-slim", "ghcr.io/mlflow/mlflow:v3.18.0",
                  "registry-cn-hangzhou.ack.aliyuncs.com/acs/agent-runtime:v0.0.1", "localhost:5000/a/b:t",
                  "verlai/verl:vllm024.dev2@sha256:" + "a" * 64],
                 ["verlai/verl", "verlai/verl:$(id)", "Verlai/verl:x", "verlai/verl:x@sha256:abc", "verlai/verl:x y",
                  "https://verlai/verl:x", "verlai/verl:x;id"], "pinned image reference"),
    "ImageDigest": (["sha256:" + "0" * 64], ["sha256:" + "0" * 63, "md5:" + "0" * 64, "sha256:" + "A" * 64], "digest"),
    "Cidr": (["10.0.0.0/8", "192.168.0.0/16"], ["10.0.0.1/8", "10.0.0.0", "::/0", "1\u0660.0.0.0/8", "300.0.0.0/8"],
             "IPv4 CIDR"),
    "CpuQuantity": (["1", "500m", "2.5"], ["0", "0m", "1 ", "1.5.5", "\u0661", "1Gi"], "CPU quantity"),
    "MemoryQuantity": (["2Gi", "512Mi"], ["0Gi", "2G", "2gi", "\u0662Gi"], "memory quantity"),
    "Dns1123Label": (["verl", "sandbox-system", "1a"], ["Verl", "-a", "a-", "a" * 64, "a.b"], "DNS-1123 label"),
    "Dns1035Label": (["sandbox-mcp"], ["1-mcp", "A", "a" * 64], "DNS-1035 label"),
    "Dns1123Subdomain": (["a.b-c.d"], ["A.b", "a..b"], "DNS-1123 subdomain"),
    "RayJobName": (["verl-grpo"], ["1-verl", "verl-" + "x" * 50], "RayJob name"),
    "DomainName": (["sandbox.example.com"], ["example", "https://x.com", "x.com.", "X.com", "x_y.com"], "domain name"),
    "LabelKey": (["app.kubernetes.io/name", "component"], ["-a", "a/b/c", "/a"], "label key"),
    "LabelValue": (["sandbox-manager", ""], ["-a", "a b", "a" * 64], "label value"),
    "EnvVarName": (["NCCL_DEBUG", "_X"], ["1X", "A-B", "A B"], "environment variable name"),
    "ExtendedResourceName": (["rdma/hca", "nvidia.com/gpu"], ["rdma", "RDMA/hca"], "extended resource name"),
    "ResourceCount": (["1", "16"], ["0", "-1", "1.5", "01", "\u0661"], "resource count"),
    "BucketName": (["verl-ack-dev-data"], ["My_Bucket", "ab", "a--b", "-ab", "a" * 64], "OSS bucket name"),
    "KeyPrefix": (["checkpoints/", "a/b/"], ["checkpoints", "/a/", "A/"], "key prefix"),
    "RegionId": (["ap-southeast-1", "cn-hangzhou"], ["ap_southeast", "AP-1", "cn"], "region id"),
    "ZoneId": (["ap-southeast-1a", "cn-hangzhou-h"], ["a", "cn-Hangzhou"], "zone id"),
    "HttpsUrl": (["https://mirrors.aliyun.com/pypi/simple/", "https://openkruise.github.io/charts/"],
                 ["http://x.org/", "https://x.org/$(id)", "https://x.org/ a", "https://x.org/?q='"], "https:// URL"),
    "KubernetesVersion": (["1.34.1-aliyun.1", "1.31.0"], ["1.34", "2.0.0", "1.\u0663\u0664.1"], "Kubernetes version"),
    "KubernetesMinor": (["1.34"], ["1.34.1", "1.3x"], "minor version"),
    "AddonVersion": (["v1.16.8", "1.2.3-aliyun.1", "v2.19.0"], ["latest", "v1;id"], "add-on version"),
    "InstanceType": (["ecs.gn8v.8xlarge"], ["gn8v.8xlarge", "ecs.", "ecs.A"], "ECS instance type"),
    "CasCertificateId": (["12345"], ["12345-cn-hangzhou", "\u0661\u0662"], "CAS certificate id"),
    "EnvironmentName": (["verl-dev"], ["Verl", "1verl", "ab"], "environment name"),
    "PlainName": (["gsm8k-tool-agent", "main"], ["my run", "-x", "a/b"], "plain name"),
    "HydraName": (["qwen2.5-3b-grpo", "run-123"], ["123", "1e5", "true", "null", "nan", "inf", "1.5", "None"], "Hydra"),
    "TagKey": (["team", "cost-center"], ["aliyun-x", "acs:x", "a b"], "tag key"),
    "ClusterId": (["c1234567890abcdef"], ["x1234567890", "c12"], "ACK cluster id"),
    "CloudId": (["i118191730000000000", "key-abc"], ["", " ", "a b"], "must not be empty"),
    "UrlPath": (["/mcp"], ["mcp", "/a b"], "starting with '/'"),
    "DottedKeyPath": (["sandboxManager.domain"], ["sandbox manager/domain", "a..b"], "dotted key path"),
    "VpcId": (["vpc-bp1abc"], ["vpc_1", "bp1abc"], "VPC id"),
    "VSwitchId": (["vsw-node-a"], ["vswitch-1"], "vSwitch id"),
}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_each_type_accepts_its_examples_and_refuses_the_rest_naming_the_rule(name):
    good, bad, text = TYPES[name]
    adapter = TypeAdapter(getattr(T, name))
    for value in good:
        assert adapter.validate_python(value) == value, value
    for value in bad:
        with pytest.raises(ValidationError) as info:
            adapter.validate_python(value)
        assert text in str(info.value), (value, str(info.value))


@pytest.mark.parametrize("name", sorted(n for n in TYPES if n not in ("LabelValue",)))
def test_no_text_type_admits_a_shell_metacharacter_or_a_non_ascii_digit(name):
    adapter = TypeAdapter(getattr(T, name))
    for value in HOSTILE:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)
        with pytest.raises(ValidationError):
            adapter.validate_python(TYPES[name][0][0] + value)


def test_no_pattern_in_the_settings_package_uses_backslash_d_or_backslash_w():
    # \d and \w match non-ASCII digits and letters (e.g. '\u0663'); every rule spells its class out.
    from pathlib import Path

    import components.config as package
    for path in Path(package.__file__).parent.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for bad in ("\\d", "\\w"):
            assert f'r"{bad}' not in text and f"{bad}+" not in text and f"{bad}*" not in text and \
                f"{bad}{{" not in text, f"{path.name} uses {bad}"


def test_an_unquoted_yaml_date_is_the_iso_text_and_a_timestamp_or_bad_date_is_refused():
    adapter = TypeAdapter(T.IsoDate)
    assert adapter.validate_python(datetime.date(2025, 1, 31)) == "2025-01-31"
    assert adapter.validate_python("2025-01-31") == "2025-01-31"
    for bad, text in ((datetime.datetime(2025, 1, 31, 12, 0), "not a timestamp"), ("2025-02-30", "calendar date"),
                      ("31.01.2025", "YYYY-MM-DD"), ("\u0662025-01-31", "YYYY-MM-DD")):
        with pytest.raises(ValidationError, match=text):
            adapter.validate_python(bad)


@pytest.mark.parametrize("value,text", [
    ({"a": {1, 2}}, "JSON cannot carry"), ({"a": b"x"}, "JSON cannot carry"), ({1: "a"}, "JSON keys are text"),
    ({"a": math.nan}, "finite"), ({"a": 2**70}, "64 bits"), ({"a": datetime.date(2024, 1, 1)}, "JSON cannot carry"),
    ([1, 2], "must be a mapping"), ({"a": "\ud800"}, "surrogate"),
])
def test_a_json_object_setting_refuses_what_json_cannot_carry(value, text):
    with pytest.raises(ValidationError, match=text):
        TypeAdapter(T.JsonObject).validate_python(value)


def test_every_number_in_the_settings_has_an_upper_bound():
    """Past int64 (or with no bound at all) a number overflows in Kubernetes, the cloud APIs or the estimates."""
    def numbers(schema, path=""):
        if isinstance(schema, dict):
            if schema.get("type") in ("integer", "number"):
                yield path, schema
            for key, sub in schema.items():
                yield from numbers(sub, f"{path}.{key}")
        elif isinstance(schema, list):
            for i, sub in enumerate(schema):
                yield from numbers(sub, f"{path}[{i}]")

    schema = Settings.model_json_schema()
    unbounded = [p for p, s in numbers(schema) if "maximum" not in s and "exclusiveMaximum" not in s
                 and "additionalProperties" not in p]  # map values: bounded by their section's own rule
    assert unbounded == []
    assert all(s.get("maximum", 0) <= T.INT64_MAX for _, s in numbers(schema))


def test_the_settings_refuse_coercion_inf_and_nan_everywhere():
    assert Settings.model_config["strict"] is True and Settings.model_config["allow_inf_nan"] is False
