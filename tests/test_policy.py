"""The policy pack (policy/): each policy with a compliant and a violating resource, through the pure check and
through pulumi_policy's own validate callback with hand-built args (props wrapped in the SDK's real
unknown-checking proxy, so preview-time unknowns behave as they will under the CLI)."""

from __future__ import annotations

import base64
import copy
import json
import re
import runpy
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import proxy as sdk_proxy
from pulumi_policy.proxy import unknown_checking_proxy

REPO = Path(__file__).resolve().parent.parent
POLICY_DIR = REPO / "policy"
if str(POLICY_DIR) not in sys.path:
    sys.path.insert(0, str(POLICY_DIR))

from verl_ack_policy import checks, pack  # noqa: E402
from verl_ack_policy import exposure as policy_exposure  # noqa: E402

UNKNOWN = sdk_proxy.UNKNOWN_STRING_VALUE
HF_TOKEN = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7"
ACCESS_KEY_ID = "LTAI" + "5tAbCdEfGhIjKlMnOpQrSt"
PEM_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----"
OPENAI_KEY = "sk-proj-" + "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1"


def urn(resource_type: str, name: str) -> str:
    return f"urn:pulumi:dev::verl-ack::{resource_type}::{name}"


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def validate_resource(policy: ResourceValidationPolicy, resource_type: str, props: dict,
                      config: dict | None = None) -> list[str]:
    """Run a resource policy the way the analyzer does and collect what it reports."""
    reports: list[str] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(copy.deepcopy(props)),
                                  urn(resource_type, "res"), "res", _opts(), None, config)
    policy.validate(args, lambda message, u=None: reports.append(message))
    return reports


def stack_resource(resource_type: str, name: str, props: dict,
                   property_dependencies: dict[str, list[PolicyResource]] | None = None) -> PolicyResource:
    return PolicyResource(resource_type, unknown_checking_proxy(copy.deepcopy(props)), urn(resource_type, name), name,
                          _opts(), None, None, [], property_dependencies or {})


def validate_stack(policy: StackValidationPolicy, resources: list[PolicyResource],
                   config: dict | None = None) -> list[tuple[str, str | None]]:
    reports: list[tuple[str, str | None]] = []
    policy.validate(StackValidationArgs(resources, config), lambda message, u=None: reports.append((message, u)))
    return reports


def as_checks(resources: list[PolicyResource]) -> list[checks.Resource]:
    return pack._resources(StackValidationArgs(resources))


# ============================================================================================== plumbing
def test_unknown_sentinels_are_the_ones_the_installed_sdk_uses():
    sdk = {v for k, v in vars(sdk_proxy).items() if k.startswith("UNKNOWN_") and k.endswith("_VALUE")}
    assert checks.UNKNOWN_SENTINELS == sdk


def test_plain_unwraps_proxies_without_tripping_on_unknown_values():
    proxied = unknown_checking_proxy({"spec": {"a": [1, {"b": UNKNOWN}]}, "c": UNKNOWN})
    with pytest.raises(sdk_proxy.UnknownValueError):
        proxied["c"]  # what a naive check would hit during preview
    assert pack.plain(proxied) == {"spec": {"a": [1, {"b": UNKNOWN}]}, "c": UNKNOWN}


# Advisory only where a shipped stack needs it (each description says why).
ADVISORY = {"cost-tags", "no-public-api-server", "images-pinned-by-digest"}


def test_policy_names_are_unique_and_only_the_three_with_a_reason_are_advisory():
    names = [p.name for p in pack.POLICIES]
    assert len(names) == len(set(names))
    levels = {p.name: p.enforcement_level for p in pack.POLICIES}
    assert {n for n, level in levels.items() if level == EnforcementLevel.ADVISORY} == ADVISORY
    assert {levels[n] for n in set(levels) - ADVISORY} == {EnforcementLevel.MANDATORY}


@pytest.mark.parametrize("policy", pack.POLICIES, ids=lambda p: p.name)
def test_each_policy_says_what_it_guarantees_and_an_advisory_one_why_it_is_not_mandatory(policy):
    if policy.name in ADVISORY:
        assert policy.description.startswith("Reports ") and "Advisory: " in policy.description
    else:
        assert policy.description.startswith("Guarantees ")


@pytest.mark.parametrize("policy", [p for p in pack.POLICIES if p.config_schema], ids=lambda p: p.name)
def test_policy_config_schemas_are_valid_json_schema_and_their_defaults_validate(policy):
    schema = {"type": "object", "properties": policy.config_schema.properties}
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = {k: v["default"] for k, v in policy.config_schema.properties.items()}
    jsonschema.validate(defaults, schema)


def test_main_hands_every_policy_to_one_mandatory_pack(monkeypatch):
    import pulumi_policy

    made = {}
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kw: made.update(kw))  # the real one serves forever
    runpy.run_path(str(POLICY_DIR / "__main__.py"), run_name="__main__")
    assert made["name"] == "verl-ack"
    assert made["enforcement_level"] == EnforcementLevel.MANDATORY
    assert [p.name for p in made["policies"]] == [p.name for p in pack.POLICIES]


def test_policy_pack_project_file_runs_python_from_its_own_virtualenv():
    doc = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert doc["runtime"]["name"] == "python"
    assert doc["runtime"]["options"]["virtualenv"] == ".venv"
    assert re.fullmatch(r"\d+\.\d+\.\d+", doc["version"])


def _pins(path: Path) -> dict[str, str]:
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", path.read_text(), re.MULTILINE)}


def test_policy_requirements_pin_the_same_versions_as_the_program_and_the_tests():
    policy = _pins(POLICY_DIR / "requirements.txt")
    project = {**_pins(REPO / "requirements.txt"), **_pins(REPO / "requirements-dev.txt")}
    assert set(policy) == {"pulumi", "pulumi-policy", "pyyaml"}
    assert {k: project[k] for k in policy} == policy


# ============================================================================================== OSS
GOOD_BUCKET = {"bucket": "verl-data", "serverSideEncryptionRule": {"sseAlgorithm": "AES256"},
               "tags": {"project": "verl-ack", "stack": "dev"}}


def test_an_encrypted_private_bucket_passes():
    assert checks.check_oss_bucket(GOOD_BUCKET) == []
    assert checks.check_oss_bucket({**GOOD_BUCKET, "serverSideEncryptionRule": {"sseAlgorithm": "KMS"}}) == []
    assert validate_resource(pack.oss_bucket_private_encrypted, checks.OSS_BUCKET, GOOD_BUCKET) == []


def test_a_bucket_without_server_side_encryption_is_refused():
    props = {"bucket": "verl-data"}
    assert "sseAlgorithm" in checks.check_oss_bucket(props)[0]
    assert len(validate_resource(pack.oss_bucket_private_encrypted, checks.OSS_BUCKET, props)) == 1


def test_a_bucket_with_a_public_acl_is_refused():
    props = {**GOOD_BUCKET, "acl": "public-read"}
    assert "public-read" in checks.check_oss_bucket(props)[0]
    assert len(validate_resource(pack.oss_bucket_private_encrypted, checks.OSS_BUCKET, props)) == 1


def test_an_encryption_rule_unknown_during_preview_is_not_a_violation():
    assert validate_resource(pack.oss_bucket_private_encrypted, checks.OSS_BUCKET,
                             {"serverSideEncryptionRule": {"sseAlgorithm": UNKNOWN}}) == []


def test_bucket_acl_must_be_private():
    assert validate_resource(pack.oss_bucket_acl_private, checks.OSS_BUCKET_ACL, {"bucket": "b", "acl": "private"}) == []
    assert checks.check_oss_bucket_acl({"bucket": "b", "acl": "public-read-write"})
    assert len(validate_resource(pack.oss_bucket_acl_private, checks.OSS_BUCKET_ACL,
                                 {"bucket": "b", "acl": "public-read"})) == 1


def test_a_bucket_with_a_linked_public_access_block_passes():
    bucket = stack_resource(checks.OSS_BUCKET, "data", {"bucket": UNKNOWN, **{"serverSideEncryptionRule": {}}})
    block = stack_resource(checks.OSS_PUBLIC_ACCESS_BLOCK, "data-pab", {"bucket": UNKNOWN, "blockPublicAccess": True},
                           property_dependencies={"bucket": [bucket]})
    assert validate_stack(pack.oss_bucket_public_access_blocked, [bucket, block]) == []


def test_a_public_access_block_found_by_bucket_name_also_counts():
    bucket = stack_resource(checks.OSS_BUCKET, "data", {"bucket": "verl-data"})
    block = stack_resource(checks.OSS_PUBLIC_ACCESS_BLOCK, "pab", {"bucket": "verl-data", "blockPublicAccess": True})
    assert checks.check_bucket_public_access_block(as_checks([bucket, block])) == []


def test_a_bucket_without_a_public_access_block_is_refused_with_its_urn():
    bucket = stack_resource(checks.OSS_BUCKET, "data", {"bucket": "verl-data"})
    other = stack_resource(checks.OSS_PUBLIC_ACCESS_BLOCK, "pab", {"bucket": "another", "blockPublicAccess": True})
    reports = validate_stack(pack.oss_bucket_public_access_blocked, [bucket, other])
    assert [u for _, u in reports] == [bucket.urn]


def test_a_public_access_block_that_does_not_block_is_refused_on_the_block():
    bucket = stack_resource(checks.OSS_BUCKET, "data", {"bucket": "verl-data"})
    block = stack_resource(checks.OSS_PUBLIC_ACCESS_BLOCK, "pab", {"bucket": "verl-data", "blockPublicAccess": False})
    assert [u for _, u in validate_stack(pack.oss_bucket_public_access_blocked, [bucket, block])] == [block.urn]


# ============================================================================================== secrets
def configmap(data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data}


def deployment(env: list[dict], args: list[str] | None = None) -> dict:
    container = {"name": "c", "image": "x", "env": env, **({"args": args} if args else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [container]}}}}


def rayjob(worker_env: list[dict] | None = None, **spec) -> dict:
    pod = {"containers": [{"name": "ray-worker", "image": "x", "env": worker_env or []}]}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "verl"},
            "spec": {"shutdownAfterJobFinishes": True, "activeDeadlineSeconds": 86400,
                     "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                                        "workerGroupSpecs": [{"groupName": "gpu", "template": {"spec": pod}}]},
                     **spec}}


@pytest.mark.parametrize("key, value", [
    ("HF_TOKEN", "a-token-from-the-website"),
    ("E2B-API-KEY", "0b5f0f0c-9c4e-4c39-8e1c-6d8f1f2f6b4a"),
    ("adminApiKey", "some-key"),
    ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "abc"),
    ("password", "hunter2"),
    ("anything", HF_TOKEN),
    ("anything", ACCESS_KEY_ID),
    ("anything", PEM_KEY),
    ("anything", OPENAI_KEY),
])
def test_a_literal_credential_is_found_by_its_name_or_its_shape(key, value):
    assert checks.secret_in_pair(key, value)


@pytest.mark.parametrize("key, value", [
    ("TOKENIZERS_PARALLELISM", "true"),          # verl's default env: "token" is only part of a word
    ("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "true"),
    ("HF_TOKEN", ""),                              # empty: nothing to leak
    ("HF_TOKEN", "$(HF_TOKEN)"),                   # Kubernetes dependent env var, filled from elsewhere
    ("E2B-API-KEY", "${E2B_API_KEY}"),             # a template placeholder
    ("HF_TOKEN", UNKNOWN),                         # computed during preview
    ("secretName", "hf-token"),                    # a reference, not the secret
    ("TOKEN_PATH", "/var/run/secrets/token"),
    ("max_tokens", "1024"),
    ("disk-category", "sk-like-but-not-a-key"),
])
def test_names_and_values_that_only_resemble_credentials_pass(key, value):
    assert checks.secret_in_pair(key, value) is None


def test_a_configmap_with_an_api_key_inside_a_json_file_is_refused():
    mcp = '{"mcpServers": {"kruise": {"url": "http://sm:8082/mcp", "headers": {"E2B-API-KEY": "k-123"}}}}'
    props = configmap({"mcp_server.json": mcp, "TOKENIZERS_PARALLELISM": "true"})
    found = checks.check_no_literal_secrets(checks.CONFIG_MAP, props)
    assert found == ["data.mcp_server.json.mcpServers.kruise.headers.E2B-API-KEY: "
                     "the name says it is a credential and the value is a literal"]
    assert len(validate_resource(pack.no_literal_secrets, checks.CONFIG_MAP, props)) == 1


def test_a_configmap_of_settings_without_credentials_passes():
    props = configmap({"trainer.yaml": "trainer:\n  logger: [console, mlflow]\n", "NCCL_DEBUG": "WARN"})
    assert validate_resource(pack.no_literal_secrets, checks.CONFIG_MAP, props) == []


def test_a_pem_private_key_in_a_configmap_is_refused():
    assert checks.check_no_literal_secrets(checks.CONFIG_MAP, configmap({"tls.key": PEM_KEY}))


def test_a_secret_resource_is_where_credentials_belong():
    props = {"apiVersion": "v1", "kind": "Secret", "stringData": {"HF_TOKEN": HF_TOKEN}}
    assert validate_resource(pack.no_literal_secrets, checks.K8S_SECRET, props) == []


def test_an_env_literal_credential_in_a_deployment_is_refused_and_value_from_passes():
    bad = deployment([{"name": "HF_TOKEN", "value": HF_TOKEN}])
    good = deployment([{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}])
    assert "secretKeyRef" in checks.check_no_literal_secrets("kubernetes:apps/v1:Deployment", bad)[0]
    assert len(validate_resource(pack.no_literal_secrets, "kubernetes:apps/v1:Deployment", bad)) == 1
    assert validate_resource(pack.no_literal_secrets, "kubernetes:apps/v1:Deployment", good) == []


def test_an_env_value_unknown_during_preview_passes():
    props = deployment([{"name": "HF_TOKEN", "value": UNKNOWN}])
    assert validate_resource(pack.no_literal_secrets, "kubernetes:apps/v1:Deployment", props) == []


def test_a_credential_in_container_args_is_refused():
    props = deployment([], args=["--access-key", ACCESS_KEY_ID])
    assert "args[1]" in checks.check_no_literal_secrets("kubernetes:apps/v1:Deployment", props)[0]


def test_a_credential_in_a_rayjob_worker_template_is_refused():
    props = rayjob(worker_env=[{"name": "OPENAI_API_KEY", "value": OPENAI_KEY}])
    found = checks.check_no_literal_secrets(checks.RAYJOB, props)
    assert len(found) == 1 and "workerGroupSpecs[0].template.spec.containers[0].env[0]" in found[0]
    assert len(validate_resource(pack.no_literal_secrets, checks.RAYJOB, props)) == 1


def test_a_credential_in_a_rayjob_runtime_env_or_entrypoint_is_refused():
    runtime_env = f"env_vars:\n  HF_TOKEN: {HF_TOKEN}\n  TOKENIZERS_PARALLELISM: 'true'\n"
    assert checks.check_no_literal_secrets(checks.RAYJOB, rayjob(runtimeEnvYAML=runtime_env)) == [
        "spec.runtimeEnvYAML: runtime_env.env_vars.HF_TOKEN: value looks like a Hugging Face token"]
    assert checks.check_no_literal_secrets(checks.RAYJOB, rayjob(entrypoint=f"HF_TOKEN={HF_TOKEN} python3 -m x"))
    assert checks.check_no_literal_secrets(checks.RAYJOB, rayjob(entrypoint="python3 -m verl.trainer.main_ppo")) == []


def test_sandboxset_pod_templates_are_searched_too():
    props = {"apiVersion": "agents.kruise.io/v1alpha1", "kind": "SandboxSet",
             "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "TOKEN", "value": "t"}]}]}}}}
    assert checks.check_no_literal_secrets(checks.SANDBOX_SET, props)


def test_a_stack_output_holding_a_credential_is_refused_unless_allowed():
    stack = stack_resource(checks.STACK, "verl-ack-dev", {"bucket": "verl-data", "hf_token": HF_TOKEN})
    reports = validate_stack(pack.no_secrets_in_stack_outputs, [stack])
    assert [u for _, u in reports] == [stack.urn]
    assert validate_stack(pack.no_secrets_in_stack_outputs, [stack], {"allowedOutputs": ["hf_token"]}) == []


# A kubeconfig as ACK's API returns one: the client key base64-encoded under users[].user.client-key-data.
_KEY_PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAtest\n-----END RSA PRIVATE KEY-----\n"
KUBECONFIG = yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    "users": [{"name": "u", "user": {"client-certificate-data": "Q0VSVA==",
                                      "client-key-data": base64.b64encode(_KEY_PEM.encode()).decode()}}]})


@pytest.mark.parametrize("value", [
    KUBECONFIG,
    json.dumps(yaml.safe_load(KUBECONFIG)),
    KUBECONFIG.replace("client-key-data", "token").replace("client-certificate-data", "username"),
    {"kubeconfig": KUBECONFIG},  # nested in an object output
    _KEY_PEM,
    base64.b64encode(_KEY_PEM.encode()).decode(),
], ids=["kubeconfig-yaml", "kubeconfig-json", "kubeconfig-token", "nested", "pem", "base64-pem"])
def test_a_kubeconfig_or_private_key_in_a_plain_stack_output_is_a_mandatory_violation(value):
    stack = stack_resource(checks.STACK, "verl-ack-dev", {"cluster_id": "c123", "kube_config": value})
    reports = validate_stack(pack.no_secrets_in_stack_outputs, [stack])
    assert [u for _, u in reports] == [stack.urn], reports
    assert pack.no_secrets_in_stack_outputs.enforcement_level == EnforcementLevel.MANDATORY


def test_a_kubeconfig_without_credentials_passes():
    exec_only = yaml.safe_load(KUBECONFIG)
    exec_only["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "ack-ram-tool"}}
    stack = stack_resource(checks.STACK, "verl-ack-dev", {"kube_config": yaml.safe_dump(exec_only)})
    assert validate_stack(pack.no_secrets_in_stack_outputs, [stack]) == []


@pytest.mark.parametrize("image, floating", [
    ("python", True), ("python:latest", True), ("registry.example.com:5000/verl", True),
    ("registry.example.com:5000/verl:latest", True), ("python:3.11-slim", False),
    ("registry.example.com:5000/verl:v1", False), ("python@sha256:" + "a" * 64, False),
    ("python:latest@sha256:" + "a" * 64, False),
])
def test_an_image_by_latest_or_without_tag_or_digest_is_a_mandatory_violation(image, floating):
    props = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
    reports = validate_resource(pack.no_floating_images, "kubernetes:batch/v1:Job", props)
    assert bool(reports) == floating, reports
    assert pack.no_floating_images.enforcement_level == EnforcementLevel.MANDATORY


def test_every_rayjob_template_is_inspected_for_floating_images():
    pod = {"containers": [{"name": "c", "image": "rayproject/ray:2.52.1"}]}
    for where in ("head", "worker", "submitter"):
        spec = {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": copy.deepcopy(pod)}},
                                   "workerGroupSpecs": [{"template": {"spec": copy.deepcopy(pod)}}]},
                "submitterPodTemplate": {"spec": copy.deepcopy(pod)}}
        target = {"head": spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"],
                  "worker": spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"],
                  "submitter": spec["submitterPodTemplate"]["spec"]}[where]
        target["containers"][0]["image"] = "rayproject/ray:latest"
        props = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": spec}
        assert len(validate_resource(pack.no_floating_images, checks.RAYJOB, props)) == 1, where


def test_ordinary_stack_outputs_pass():
    stack = stack_resource(checks.STACK, "verl-ack-dev", {"bucket": "verl-data", "layout": {"nodes": 1},
                                                          "sandbox_api_key_secret_name": "sandbox-admin"})
    assert validate_stack(pack.no_secrets_in_stack_outputs, [stack]) == []


# ============================================================================================== GPU pools
def gpu_pool(**props) -> dict:
    return {"clusterId": "c123", "instanceTypes": ["ecs.gn7i-c16g1.4xlarge"], "instanceChargeType": "PostPaid",
            "scalingConfig": {"enable": True, "minSize": 0, "maxSize": 2}, **props}


def lingjun_pool(nodes: str = "1", gpus: str | None = "8") -> dict:
    labels = [{"key": checks.GPUS_PER_NODE_LABEL, "value": gpus}] if gpus else []
    return {"clusterId": "c123", "type": "lingjun", "desiredSize": nodes, "labels": labels}


def test_a_pay_as_you_go_on_demand_gpu_pool_passes():
    assert validate_resource(pack.gpu_pool_pay_as_you_go, checks.NODE_POOL, gpu_pool(spotStrategy="NoSpot")) == []


@pytest.mark.parametrize("override", [
    {"instanceChargeType": "PrePaid"},
    {"spotStrategy": "SpotAsPriceGo"},
    {"spotStrategy": "SpotWithPriceLimit"},
    {"scalingConfig": {"enable": True, "maxSize": 2, "type": "spot"}},
])
def test_a_prepaid_or_spot_gpu_pool_is_refused(override):
    assert len(validate_resource(pack.gpu_pool_pay_as_you_go, checks.NODE_POOL, gpu_pool(**override))) == 1


def test_a_prepaid_cpu_pool_is_not_a_gpu_pool():
    props = {"instanceTypes": ["ecs.g7.2xlarge"], "instanceChargeType": "PrePaid"}
    assert validate_resource(pack.gpu_pool_pay_as_you_go, checks.NODE_POOL, props) == []


@pytest.mark.parametrize("instance_type, gpus", [
    ("ecs.gn7i-c8g1.2xlarge", 1),      # 8 vCPUs, one GPU per 8
    ("ecs.gn7i-c32g1.16xlarge", 2),
    ("ecs.gn7e-c16g1.32xlarge", 8),
    ("ecs.gn7i-4x.16xlarge", 4),       # the -4x infix
    ("ecs.ebmgn7.26xlarge", 8),        # bare metal: the conservative default
    ("ecs.gn8v.4xlarge", 8),           # name says nothing: the conservative default
])
def test_gpus_per_instance_reads_the_type_name_and_errs_high_when_it_cannot(instance_type, gpus):
    assert checks.is_gpu_instance_type(instance_type)
    assert checks.gpus_per_instance(instance_type) == gpus


def test_gpu_pools_within_the_default_budget_of_16_pass():
    pools = [stack_resource(checks.NODE_POOL, "lingjun", lingjun_pool(nodes="2")),
             stack_resource(checks.NODE_POOL, "system", {"instanceTypes": ["ecs.g7.2xlarge"], "desiredSize": "10"})]
    assert validate_stack(pack.gpu_budget, pools) == []


def test_gpu_pools_over_the_budget_are_refused_and_the_budget_is_configurable():
    pools = [stack_resource(checks.NODE_POOL, "lingjun", lingjun_pool(nodes="2")),
             stack_resource(checks.NODE_POOL, "ecs", gpu_pool(scalingConfig={"enable": True, "maxSize": 3},
                                                              instanceTypes=["ecs.gn7i-4x.16xlarge"]))]
    reports = validate_stack(pack.gpu_budget, pools)
    assert len(reports) == 1 and "28 GPUs" in reports[0][0] and reports[0][1] is None
    assert validate_stack(pack.gpu_budget, pools, {"maxGpus": 32}) == []


def test_the_gpus_per_node_label_overrides_the_instance_type_estimate():
    pool = gpu_pool(instanceTypes=["ecs.gn8v.4xlarge"], scalingConfig={"enable": True, "maxSize": 4},
                    labels=[{"key": checks.GPUS_PER_NODE_LABEL, "value": "1"}])
    assert checks.gpu_pool_size(pool) == checks.GpuPoolSize(1, 4)
    assert checks.check_gpu_budget(as_checks([stack_resource(checks.NODE_POOL, "p", pool)])) == []


def test_a_lingjun_pool_without_a_label_counts_eight_gpus_per_node():
    assert checks.gpu_pool_size(lingjun_pool(nodes="3", gpus=None)) == checks.GpuPoolSize(8, 3)


def test_a_lingjun_pool_declares_its_size_in_the_max_nodes_label():
    pool = {"type": "lingjun", "labels": [{"key": checks.GPUS_PER_NODE_LABEL, "value": "8"},
                                          {"key": checks.MAX_NODES_LABEL, "value": "3"}]}
    assert checks.gpu_pool_size(pool) == checks.GpuPoolSize(8, 3)
    assert len(checks.check_gpu_budget(as_checks([stack_resource(checks.NODE_POOL, "p", pool)]))) == 1
    # a size the pool itself states wins over the declaration
    assert checks.gpu_pool_size({**pool, "desiredSize": "1"}) == checks.GpuPoolSize(8, 1)


def test_a_gpu_pool_with_no_size_at_all_is_refused_as_unbounded():
    pool = stack_resource(checks.NODE_POOL, "p", {"type": "lingjun"})
    reports = validate_stack(pack.gpu_budget, [pool])
    assert [u for _, u in reports] == [pool.urn] and "unbounded" in reports[0][0]


def test_a_pool_size_unknown_during_preview_is_not_counted():
    pool = stack_resource(checks.NODE_POOL, "p", lingjun_pool(nodes=UNKNOWN))
    assert validate_stack(pack.gpu_budget, [pool], {"maxGpus": 0}) == []


# ============================================================================================== RayJob
def test_a_rayjob_that_cleans_up_and_has_a_deadline_passes():
    assert validate_resource(pack.rayjob_cleans_up, checks.RAYJOB, rayjob()) == []


@pytest.mark.parametrize("spec", [
    {"shutdownAfterJobFinishes": False},
    {"shutdownAfterJobFinishes": None},
    {"activeDeadlineSeconds": 0},
    {"activeDeadlineSeconds": None},
])
def test_a_rayjob_that_keeps_its_cluster_or_runs_forever_is_refused(spec):
    props = rayjob()
    props["spec"].update(spec)
    props["spec"] = {k: v for k, v in props["spec"].items() if v is not None}
    assert len(checks.check_rayjob_lifecycle(props)) == 1
    assert len(validate_resource(pack.rayjob_cleans_up, checks.RAYJOB, props)) == 1


def test_a_rayjob_registered_under_a_generic_custom_resource_token_is_checked_too():
    props = rayjob(shutdownAfterJobFinishes=False)
    token = "kubernetes:apiextensions.k8s.io:CustomResource"
    assert checks.is_rayjob(token, props)
    assert len(validate_resource(pack.rayjob_cleans_up, token, props)) == 1


def test_pulumi_kubernetes_custom_resource_registers_the_rayjob_token_the_policy_matches():
    import pulumi_kubernetes

    source = Path(pulumi_kubernetes.__file__).parent.joinpath("apiextensions", "CustomResource.py").read_text()
    assert 'f"kubernetes:{api_version}:{kind}"' in source
    assert checks.RAYJOB == "kubernetes:ray.io/v1:RayJob"


# ============================================================================================== sandboxes
SANDBOX_LABELS = {"app": "code-interpreter"}


def sandboxset(namespace: str = "sandbox", labels: dict | None = None) -> dict:
    return {"apiVersion": "agents.kruise.io/v1alpha1", "kind": "SandboxSet",
            "metadata": {"name": "code-interpreter", "namespace": namespace},
            "spec": {"replicas": 4, "template": {"metadata": {"labels": labels or SANDBOX_LABELS},
                                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def netpol(namespace: str = "sandbox", selector: dict | None = None, types: list[str] | None = None,
           egress: list[dict] | None = None) -> dict:
    spec = {"podSelector": {"matchLabels": SANDBOX_LABELS} if selector is None else selector,
            "egress": egress if egress is not None else [
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["100.100.100.200/32", "10.0.0.0/8"]}}]},
                {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                 "ports": [{"protocol": "UDP", "port": 53}]}]}
    if types is not None:
        spec["policyTypes"] = types
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "sandbox-egress", "namespace": namespace}, "spec": spec}


def isolation(*resources: tuple[str, dict]) -> list[tuple[str, str | None]]:
    return validate_stack(pack.sandbox_egress_isolated,
                          [stack_resource(t, f"r{i}", p) for i, (t, p) in enumerate(resources)])


def test_sandboxes_behind_an_egress_policy_that_excepts_the_metadata_service_pass():
    assert isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, netpol(types=["Ingress", "Egress"]))) == []


def test_a_sandboxset_without_any_network_policy_is_refused():
    reports = isolation((checks.SANDBOX_SET, sandboxset()))
    assert len(reports) == 1 and "no NetworkPolicy" in reports[0][0]


@pytest.mark.parametrize("policy", [
    netpol(namespace="default"),                                 # another namespace
    netpol(selector={"matchLabels": {"app": "mcp-server"}}),     # selects other pods
    netpol(types=["Ingress"]),                                   # does not restrict egress
])
def test_a_network_policy_that_does_not_restrict_the_sandboxes_egress_does_not_count(policy):
    assert len(isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, policy))) == 1


def test_an_allowed_ip_block_containing_the_metadata_address_is_refused():
    leaky = netpol(egress=[{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}])
    reports = isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, leaky))
    assert len(reports) == 1 and "100.100.100.200/32" in reports[0][0]


def test_an_egress_rule_without_destinations_allows_everything_and_is_refused():
    open_rule = netpol(egress=[{"ports": [{"protocol": "TCP", "port": 443}]}])
    assert len(isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, open_rule))) == 1


def test_egress_rules_imply_the_egress_policy_type_when_policy_types_is_omitted():
    assert checks.policy_types({"egress": [{}]}) == ["Ingress", "Egress"]
    assert isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, netpol())) == []


def test_match_expressions_and_the_empty_selector_follow_kubernetes_semantics():
    labels = {"app": "code-interpreter", "tier": "sandbox"}
    assert checks.selector_matches({}, labels)
    assert checks.selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["sandbox"]}]}, labels)
    assert not checks.selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                              "values": ["sandbox"]}]}, labels)
    assert not checks.selector_matches({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, labels)
    deny_all_egress = netpol(selector={}, types=["Egress"], egress=[])
    assert isolation((checks.SANDBOX_SET, sandboxset()), (checks.NETWORK_POLICY, deny_all_egress)) == []


# ============================================================================================== sandbox pods
def hardened_sandboxset() -> dict:
    sbs = sandboxset()
    drop = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID"]}}
    sbs["spec"]["template"]["spec"] = {
        "automountServiceAccountToken": False, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "init", "image": "x", "securityContext": drop}],
        "containers": [{"name": "c", "image": "x", "securityContext": drop}]}
    return sbs


def hardening(props: dict) -> list[str]:
    return validate_resource(pack.sandbox_pod_hardening, checks.SANDBOX_SET, props)


def test_a_hardened_sandbox_pod_passes():
    assert hardening(hardened_sandboxset()) == []


@pytest.mark.parametrize("breach,words", [
    (lambda p: p.update(automountServiceAccountToken=True), "automountServiceAccountToken"),
    (lambda p: p.update(hostNetwork=True), "hostNetwork"),
    (lambda p: p.update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "hostPath"),
    (lambda p: p["containers"][0]["securityContext"].update(privileged=True), "privileged"),
    (lambda p: p["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True), "allowPrivilegeEscalation"),
    (lambda p: p["initContainers"][0]["securityContext"].update(capabilities={"drop": ["NET_RAW"]}), "drop every"),
    (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]), "SYS_ADMIN"),
    (lambda p: p.update(securityContext={"seccompProfile": {"type": "Unconfined"}}), "seccomp"),
    (lambda p: p.pop("securityContext"), "seccomp"),
])
def test_a_sandbox_pod_that_weakens_isolation_is_refused(breach, words):
    sbs = hardened_sandboxset()
    breach(sbs["spec"]["template"]["spec"])
    reports = hardening(sbs)
    assert reports and any(words in r for r in reports), reports


def test_sandbox_hardening_ignores_other_workloads_and_unknown_values():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "securityContext": {}}]}}}}
    assert validate_resource(pack.sandbox_pod_hardening, "kubernetes:apps/v1:Deployment", deployment) == []
    sbs = hardened_sandboxset()
    sbs["spec"]["template"]["spec"]["containers"][0]["securityContext"] = UNKNOWN
    sbs["spec"]["template"]["spec"]["automountServiceAccountToken"] = UNKNOWN
    assert hardening(sbs) == []


# ============================================================================================== E2B exposure
def alb(address_type: str) -> tuple[str, dict]:
    return checks.ALB_LOAD_BALANCER, {"addressType": address_type, "loadBalancerName": "verl-sandbox"}


def albconfig(listeners: list[dict], config: dict | None = None) -> tuple[str, dict]:
    return checks.ALB_CONFIG, {"apiVersion": "alibabacloud.com/v1", "kind": "AlbConfig", "metadata": {"name": "e2b"},
                               "spec": {"config": config or {"id": UNKNOWN}, "listeners": listeners}}


HTTPS = {"port": 443, "protocol": "HTTPS", "securityPolicyId": "tls_cipher_policy_1_2",
         "aclConfig": {"aclType": "White", "aclEntries": ["203.0.113.0/24"]}}


def exposure(*resources: tuple[str, dict], allow_public: bool = False) -> list[tuple[str, str | None]]:
    built = [stack_resource(t, f"r{i}", p) for i, (t, p) in enumerate(resources)]
    # The AlbConfig names the ALB through its id Output: a property dependency, as Pulumi records it.
    albs = [r for r in built if r.resource_type == checks.ALB_LOAD_BALANCER]
    built = [stack_resource(r.resource_type, r.name, plain_props(r), {"spec": albs})
             if r.resource_type == checks.ALB_CONFIG else r for r in built]
    return validate_stack(pack.no_public_e2b_api, built, {"allowPublic": allow_public})


def plain_props(r: PolicyResource) -> dict:
    return pack.plain(r.props)


def test_an_intranet_e2b_api_passes_whatever_its_listeners():
    assert exposure(alb("Intranet"), albconfig([{"port": 443, "protocol": "HTTPS"}])) == []


def test_an_internet_facing_e2b_api_is_refused_unless_allowed():
    reports = exposure(alb("Internet"), albconfig([HTTPS]))
    assert len(reports) == 1 and "internet-facing ALB" in reports[0][0]
    assert exposure(alb("Internet"), albconfig([HTTPS]), allow_public=True) == []


@pytest.mark.parametrize("listener,words", [
    ({"port": 80, "protocol": "HTTP"}, "HTTPS only"),
    ({**HTTPS, "securityPolicyId": "tls_cipher_policy_1_0"}, "below 1.2"),
    ({k: v for k, v in HTTPS.items() if k != "aclConfig"}, "allow-list"),
    ({**HTTPS, "aclConfig": {"aclType": "Black", "aclEntries": ["198.51.100.0/24"]}}, "allow-list"),
])
def test_an_allowed_public_e2b_api_must_be_https_only_tls12_and_allow_listed(listener, words):
    reports = exposure(alb("Internet"), albconfig([listener]), allow_public=True)
    assert len(reports) == 1 and words in reports[0][0], reports


def test_an_albconfig_that_creates_its_own_internet_alb_counts_too():
    reports = exposure(albconfig([HTTPS], config={"addressType": "Internet", "name": "e2b"}))
    assert len(reports) == 1 and "AlbConfig creates an internet-facing ALB" in reports[0][0]


# ============================================================================================== tags
def test_taggable_resources_without_project_and_stack_tags_get_an_advisory():
    props = {"vpcName": "verl", "cidrBlock": "10.0.0.0/8", "tags": {"project": "verl-ack"}}
    reports = validate_resource(pack.cost_tags, "alicloud:vpc/network:Network", props)
    assert len(reports) == 1 and "stack" in reports[0]
    assert pack.cost_tags.enforcement_level == EnforcementLevel.ADVISORY


def test_resources_with_the_cost_tags_pass_and_required_tags_are_configurable():
    props = {"tags": {"project": "verl-ack", "stack": "dev"}}
    assert validate_resource(pack.cost_tags, checks.OSS_BUCKET, props) == []
    assert len(validate_resource(pack.cost_tags, checks.OSS_BUCKET, props, {"requiredTags": ["owner"]})) == 1


def test_resources_that_take_no_tags_are_not_asked_for_them():
    assert validate_resource(pack.cost_tags, checks.OSS_BUCKET_ACL, {"bucket": "b", "acl": "private"}) == []
    assert validate_resource(pack.cost_tags, "kubernetes:core/v1:Namespace", {"metadata": {"name": "verl"}}) == []


@pytest.mark.parametrize("token", sorted(checks.TAGGABLE_TYPES))
def test_every_taggable_type_exists_in_pulumi_alicloud_and_accepts_tags(token):
    import pulumi_alicloud

    module, cls = token.split(":")[1].split("/")[0], token.split(":")[2]
    source = (Path(pulumi_alicloud.__file__).parent / module).glob("*.py")
    defining = [f.read_text() for f in source if f"'{token}'" in f.read_text()]
    assert defining, f"{token} is not a resource type of the installed pulumi_alicloud"
    assert re.search(rf"class {cls}\(pulumi\.CustomResource\)", defining[0])
    assert '__props__.__dict__["tags"] = tags' in defining[0]


# ============================================================================================== the program
def _from_recording(value):
    """The offline engine's placeholders in the policy SDK's terms: "[unknown]" is a preview-time unknown;
    "[secret]" stays a literal, as the SDK hands policies secret values unwrapped."""
    if value == "[unknown]":
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _from_recording(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_recording(v) for v in value]
    return value


MANDATORY_RESOURCE_CHECKS = {
    checks.OSS_BUCKET: checks.check_oss_bucket,
    checks.OSS_BUCKET_ACL: checks.check_oss_bucket_acl,
    checks.NODE_POOL: checks.check_gpu_pool_billing,
}


def test_every_stack_of_the_program_passes_the_mandatory_policies(stack_name):
    """What `pulumi preview --policy-pack policy` will say, offline: the real program under the recording engine
    (tests/conftest.py), every mandatory check on what it registers and exports."""
    from tests.conftest import record

    recording = record(stack_name)
    resources = [checks.Resource(r.type, r.urn, _from_recording(r.inputs),
                                 {k: tuple(v) for k, v in r.property_dependencies.items()})
                 for r in recording.resources]
    found = []
    for r in resources:
        check = MANDATORY_RESOURCE_CHECKS.get(r.type)
        found += [(r.urn, m) for m in (check(r.props) if check else [])]
        found += [(r.urn, m) for m in checks.check_no_literal_secrets(r.type, r.props)]
        if checks.is_rayjob(r.type, r.props):
            found += [(r.urn, m) for m in checks.check_rayjob_lifecycle(r.props)]
        found += [(r.urn, m) for m in checks.check_sandbox_pod_hardening(r.type, r.props)]
    found += [("stack outputs", m) for m in checks.check_stack_outputs(_from_recording(recording.outputs))]
    for stack_check in (checks.check_bucket_public_access_block, checks.check_gpu_budget, checks.check_sandbox_isolation,
                        checks.check_e2b_exposure):
        found += [(u or "stack", m) for m, u in stack_check(resources)]
    assert found == [], "\n".join(f"{u}: {m}" for u, m in found)


def test_a_stack_that_opts_into_a_public_e2b_api_needs_allow_public_and_passes_with_it():
    from tests.conftest import record

    recording = record("dev", {"sandbox": {"public_api": True, "api_allowed_cidrs": ["203.0.113.0/24"]}})
    resources = [checks.Resource(r.type, r.urn, _from_recording(r.inputs),
                                 {k: tuple(v) for k, v in r.property_dependencies.items()})
                 for r in recording.resources]
    [(message, _)] = checks.check_e2b_exposure(resources)
    assert "allowPublic" in message
    assert checks.check_e2b_exposure(resources, allow_public=True) == []


# ============================================================================================== the whole pack, mutated
Finding = tuple[str, str, str]  # (policy, urn or "stack", message)


def _recorded(stack: str, overrides: dict | None = None) -> tuple[list[dict], dict]:
    from tests.conftest import record

    recording = record(stack, overrides)
    resources = [{"type": r.type, "urn": r.urn, "name": r.name, "props": _from_recording(r.inputs),
                  "deps": {k: list(v) for k, v in r.property_dependencies.items()}} for r in recording.resources]
    return resources, _from_recording(recording.outputs)


def run_pack(resources: list[dict], outputs: dict, config: dict | None = None) -> dict[str, list[Finding]]:
    """Every policy of the pack through the SDK's own callbacks, as the CLI runs them on `pulumi preview`:
    resource policies once per resource, stack policies once over all of them (the stack's outputs as the
    pulumi:pulumi:Stack resource). Findings keyed by enforcement level."""
    config = config or {}
    stack_urn = "urn:pulumi:dev::verl-ack::pulumi:pulumi:Stack::verl-ack-dev"
    everything = resources + [{"type": checks.STACK, "urn": stack_urn, "name": "verl-ack-dev", "props": outputs,
                               "deps": {}}]
    sdk = {r["urn"]: stack_resource(r["type"], r["name"], r["props"]) for r in everything}
    for r in everything:
        sdk[r["urn"]].urn = r["urn"]
    for r in everything:
        sdk[r["urn"]].property_dependencies = {k: [sdk[u] for u in v if u in sdk] for k, v in r["deps"].items()}
    found: dict[str, list[Finding]] = {"mandatory": [], "advisory": []}
    for policy in pack.POLICIES:
        level = policy.enforcement_level.value
        if isinstance(policy, ResourceValidationPolicy):
            # Each policy gets its own copy of the properties, as the SDK deserializes them per policy
            # (pulumi_policy/policy.py Analyze): they are plain values, and the conversion copies them again.
            for r in everything:
                args = ResourceValidationArgs(r["type"], unknown_checking_proxy(_from_recording(r["props"])), r["urn"],
                                              r["name"], _opts(), None, config.get(policy.name))
                policy.validate(args, lambda m, u=None, p=policy.name, x=r["urn"], out=found[level]: out.append((p, x, m)))
        else:
            policy.validate(StackValidationArgs(list(sdk.values()), config.get(policy.name)),
                            lambda m, u=None, p=policy.name, out=found[level]: out.append((p, u or "stack", m)))
    return found


@pytest.fixture(scope="module")
def dev_plan():
    return _recorded("dev")


def _one(resources: list[dict], type_: str, name: str | None = None) -> dict:
    [r] = [r for r in resources if r["type"] == type_ and (name is None or r["name"] == name)]
    return r


def _pod(resources, type_, name, path=("spec", "template", "spec")) -> dict:
    return checks.dig(_one(resources, type_, name)["props"], *path)


DEPLOYMENT, JOB, DAEMONSET = "kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job", "kubernetes:apps/v1:DaemonSet"
RAYJOB_HEAD = ("spec", "rayClusterSpec", "headGroupSpec", "template", "spec")
SANDBOX_POD = ("spec", "template", "spec")


def _env(resources, **pairs):
    container = _pod(resources, DEPLOYMENT, "tracking-server")["containers"][0]
    container.setdefault("env", []).extend({"name": k, "value": v} for k, v in pairs.items())


def _set(resources, type_, name, path, value):
    target = _one(resources, type_, name)["props"]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value


def _bare_sandbox(resources):
    resources.append({"type": "kubernetes:agents.kruise.io/v1alpha1:Sandbox",
                      "urn": "urn:pulumi:dev::verl-ack::kubernetes:agents.kruise.io/v1alpha1:Sandbox::scratch",
                      "name": "scratch", "deps": {}, "props": {
                          "apiVersion": "agents.kruise.io/v1alpha1", "kind": "Sandbox",
                          "metadata": {"name": "scratch", "namespace": "verl"},
                          "spec": {"template": {"metadata": {"labels": {"app": "scratch"}},
                                                "spec": copy.deepcopy(_pod(resources, checks.SANDBOX_SET, None))}}}})


def _drop_sandbox_policies(resources):
    resources[:] = [r for r in resources if not (r["type"] == checks.NETWORK_POLICY
                                                 and r["props"]["metadata"].get("namespace") == "sandbox-system")]


def _add_ram_statement(resources, statement):
    policy = next(r for r in resources if r["type"] == "alicloud:ram/policy:Policy")
    doc = json.loads(policy["props"]["policyDocument"])
    doc["Statement"].append(statement)
    policy["props"]["policyDocument"] = json.dumps(doc)


def _add_bucket_statement(resources, statement):
    policy = _one(resources, "alicloud:oss/bucketPolicy:BucketPolicy")
    doc = json.loads(policy["props"]["policy"])
    doc["Statement"].append(statement)
    policy["props"]["policy"] = json.dumps(doc)


def _pin_every_image(resources):
    for r in resources:
        for _, pod in checks.pod_specs(r["type"], r["props"]):
            for group in ("initContainers", "containers"):
                for c in pod.get(group) or []:
                    c["image"] = c["image"].split("@")[0] + "@sha256:" + "0" * 64


PG_URL = "postgresql://mlflow:" + "s3cr3t-pw" + "@db.internal:5432/mlflow"
AK_SECRET = "Xy7k" + "2Lm9Qp4Rs8Tv1Wz3Ab6Cd0Ef5G"  # 30 letters and digits, as an AccessKey secret is
GPU_POOL = ("alicloud:cs/nodePool:NodePool", "pools-gpu")


def _label(resources, key, value):
    pool = _one(resources, *GPU_POOL)
    pool["props"]["labels"] = [lb for lb in pool["props"]["labels"] if lb["key"] != key] + [{"key": key, "value": value}]


# (case, the policy whose description claims it, the mutation). Each breaks one guarantee of the dev plan.
MUTATIONS = [
    ("bucket-not-encrypted", "oss-bucket-private-encrypted",
     lambda rs: _set(rs, checks.OSS_BUCKET, None, ["serverSideEncryptionRule"], {"sseAlgorithm": "None"})),
    ("bucket-public-read", "oss-bucket-private-encrypted",
     lambda rs: _set(rs, checks.OSS_BUCKET, None, ["acl"], "public-read")),
    ("bucket-acl-public", "oss-bucket-acl-private", lambda rs: _set(rs, checks.OSS_BUCKET_ACL, None, ["acl"], "public-read")),
    ("public-access-block-off", "oss-bucket-public-access-blocked",
     lambda rs: _set(rs, checks.OSS_PUBLIC_ACCESS_BLOCK, None, ["blockPublicAccess"], False)),
    ("bucket-policy-principal-star", "oss-bucket-policy-not-public",
     lambda rs: _add_bucket_statement(rs, {"Effect": "Allow", "Principal": ["*"], "Action": ["oss:GetObject"],
                                           "Resource": ["acs:oss:*:*:verl-ack-dev-data/*"]})),
    ("hf-token-in-configmap", "no-literal-secrets",
     lambda rs: _set(rs, checks.CONFIG_MAP, "train-config", ["data", "extra.env"], f"HF_TOKEN={HF_TOKEN}")),
    ("token-env-literal", "no-literal-secrets", lambda rs: _env(rs, API_TOKEN="plain-text-token-123")),
    ("pw-env-literal", "no-literal-secrets", lambda rs: _env(rs, PW="hunter2hunter2")),
    ("pass-env-literal", "no-literal-secrets", lambda rs: _env(rs, DB_PASS="hunter2hunter2")),
    ("password-in-args-url", "no-literal-secrets",
     lambda rs: _pod(rs, DEPLOYMENT, "tracking-server")["containers"][0].setdefault("args", []).append(
         f"--backend-store-uri={PG_URL}")),
    ("secret-in-helm-values", "no-literal-secrets",
     lambda rs: _set(rs, "kubernetes:helm.sh/v3:Release", None, ["values", "auth"], {"password": "hunter2hunter2"})),
    ("accesskey-secret-neutral-name", "no-literal-secrets", lambda rs: _env(rs, STORE_K=AK_SECRET)),
    ("secret-in-rayjob-entrypoint", "no-literal-secrets",
     lambda rs: _set(rs, checks.RAYJOB, None, ["spec", "entrypoint"],
                     _one(rs, checks.RAYJOB)["props"]["spec"]["entrypoint"] + f" +hf_token={HF_TOKEN}")),
    ("secret-in-stack-output", "no-secrets-in-stack-outputs", None),  # outputs, see below
    ("gpu-pool-prepaid", "gpu-pool-pay-as-you-go", lambda rs: _set(rs, *GPU_POOL, ["instanceChargeType"], "PrePaid")),
    ("gpu-pool-spot", "gpu-pool-pay-as-you-go", lambda rs: _set(rs, *GPU_POOL, ["spotStrategy"], "SpotAsPriceGo")),
    ("gpu-budget-exceeded", "gpu-budget",
     lambda rs: _set(rs, *GPU_POOL, ["instances"], [f"e01-cn-{i:010d}" for i in range(64)])),
    ("false-gpus-per-node-label", "gpu-labels-truthful", lambda rs: _label(rs, checks.GPUS_PER_NODE_LABEL, "1")),
    ("rayjob-keeps-its-cluster", "rayjob-cleans-up",
     lambda rs: _set(rs, checks.RAYJOB, None, ["spec", "shutdownAfterJobFinishes"], False)),
    ("rayjob-without-deadline", "rayjob-cleans-up",
     lambda rs: _one(rs, checks.RAYJOB)["props"]["spec"].pop("activeDeadlineSeconds")),
    ("sandboxes-without-egress-policy", "sandbox-egress-isolated", _drop_sandbox_policies),
    ("egress-to-the-metadata-service", "sandbox-egress-isolated",
     lambda rs: _one(rs, checks.NETWORK_POLICY, "sandbox-isolation")["props"]["spec"]["egress"].append(
         {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})),
    ("bare-sandbox-without-policy", "sandbox-egress-isolated", _bare_sandbox),
    ("privileged-sandbox", "sandbox-pod-hardening",
     lambda rs: _pod(rs, checks.SANDBOX_SET, None)["containers"][0]["securityContext"].update(privileged=True)),
    ("sandbox-with-api-token", "sandbox-pod-hardening",
     lambda rs: _pod(rs, checks.SANDBOX_SET, None).update(automountServiceAccountToken=True)),
    ("public-e2b-alb", "no-public-e2b-api", lambda rs: _set(rs, checks.ALB_LOAD_BALANCER, None, ["addressType"], "Internet")),
    ("privileged-pod", "no-host-access",
     lambda rs: _pod(rs, DEPLOYMENT, "tracking-server")["containers"][0].setdefault("securityContext", {}).update(
         privileged=True)),
    ("hostpath-pod", "no-host-access",
     lambda rs: _pod(rs, JOB, "data-dataset").setdefault("volumes", []).append({"name": "root", "hostPath": {"path": "/"}})),
    ("hostnetwork-pod", "no-host-access", lambda rs: _pod(rs, DAEMONSET, "prepull-daemonset").update(hostNetwork=True)),
    ("hostpid-pod", "no-host-access", lambda rs: _pod(rs, DEPLOYMENT, "tracking-server").update(hostPID=True)),
    ("hostnetwork-ray-pod-outside-the-ray-namespace", "no-host-access",
     lambda rs: checks.dig(_one(rs, checks.RAYJOB)["props"], *RAYJOB_HEAD).update(hostNetwork=True)),
    ("ram-action-star", "ram-least-privilege",
     lambda rs: _add_ram_statement(rs, {"Effect": "Allow", "Action": "*", "Resource": "*"})),
    ("ram-administrator-access", "ram-least-privilege",
     lambda rs: next(r for r in rs if r["type"] == policy_exposure.ATTACHMENTS[0])["props"].update(
         policyName="AdministratorAccess", policyType="System")),
    ("internet-load-balancer-service", "no-internet-load-balancer-service",
     lambda rs: _set(rs, policy_exposure.SERVICE, "tracking-service", ["spec", "type"], "LoadBalancer")),
    ("missing-cost-tags", "cost-tags", lambda rs: _one(rs, checks.OSS_BUCKET)["props"].pop("tags")),
    ("deployment-image-by-latest", "no-floating-image-tags",
     lambda rs: _pod(rs, DEPLOYMENT, "tracking-server")["containers"][0].update(image="ghcr.io/mlflow/mlflow:latest")),
    ("job-image-without-a-tag", "no-floating-image-tags",
     lambda rs: _pod(rs, JOB, "data-dataset")["containers"][0].update(image="python")),
    ("rayjob-head-image-without-a-tag", "no-floating-image-tags",
     lambda rs: checks.dig(_one(rs, checks.RAYJOB)["props"], *RAYJOB_HEAD)["containers"][0].update(
         image="registry.example.com:5000/verl")),
    ("sandbox-image-by-latest", "no-floating-image-tags",
     lambda rs: _pod(rs, checks.SANDBOX_SET, None)["containers"][0].update(image="example.com/code-interpreter:latest")),
]
# Advisory findings the shipped dev stack has (each advisory policy's description says why it is advisory), and
# the change that clears each: the mutation test checks them from both sides.
DEV_ADVISORIES = {
    # The Lingjun GPU pool and the CAS certificate are registered without the cost tags.
    "cost-tags": lambda rs: [r["props"].update(tags={"project": "verl-ack", "stack": "dev"}) for r in rs
                             if r["type"] in (checks.NODE_POOL, "alicloud:cas/serviceCertificate:ServiceCertificate")],
    "no-public-api-server": lambda rs: _set(rs, "alicloud:cs/managedKubernetes:ManagedKubernetes", None,
                                            ["slbInternetEnabled"], False),
    "images-pinned-by-digest": _pin_every_image,
}



def test_the_recorded_dev_stack_passes_every_mandatory_policy_and_only_the_known_advisories(dev_plan):
    found = run_pack(*copy.deepcopy(dev_plan))
    assert found["mandatory"] == [], "\n".join(map(str, found["mandatory"]))
    assert {p for p, _, _ in found["advisory"]} == set(DEV_ADVISORIES)
    images = [m for p, _, m in found["advisory"] if p == "images-pinned-by-digest"]
    assert len({m.split("runs ")[1].split(" by tag")[0] for m in images}) == 6  # all six images of the dev plan


def test_the_mutations_cover_every_policy_of_the_pack():
    assert {policy for _, policy, _ in MUTATIONS} | set(DEV_ADVISORIES) == {p.name for p in pack.POLICIES}
    assert len(MUTATIONS) + len(DEV_ADVISORIES) >= 35


@pytest.mark.parametrize("case, policy, mutate", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_violation_of_the_dev_plan_is_caught_by_the_policy_that_claims_it(dev_plan, case, policy, mutate):
    baseline = run_pack(*copy.deepcopy(dev_plan))
    resources, outputs = copy.deepcopy(dev_plan)
    if mutate is None:
        outputs["debug_token"] = HF_TOKEN
    else:
        mutate(resources)
    found = run_pack(resources, outputs)
    level = next(p.enforcement_level.value for p in pack.POLICIES if p.name == policy)
    caught = [f for f in found[level] if f[0] == policy and f not in baseline[level]]
    assert caught, f"{case}: {policy} reported nothing new; it reported {found[level]}"
    if level == "mandatory":  # nothing else breaks: the mutation is the one violation
        assert {p for p, _, _ in found["mandatory"]} == {policy}, found["mandatory"]


@pytest.mark.parametrize("policy", sorted(DEV_ADVISORIES))
def test_each_advisory_of_the_dev_plan_clears_when_its_cause_is_fixed(dev_plan, policy):
    resources, outputs = copy.deepcopy(dev_plan)
    DEV_ADVISORIES[policy](resources)
    assert [f for f in run_pack(resources, outputs)["advisory"] if f[0] == policy] == []


def test_an_allow_listed_stack_may_keep_its_public_api_server(dev_plan):
    found = run_pack(*copy.deepcopy(dev_plan), config={"no-public-api-server": {"allowedStacks": ["dev"]}})
    assert not [f for f in found["advisory"] if f[0] == "no-public-api-server"]


@pytest.mark.parametrize("stack", ["multinode", "dev-platform", "dev-grpo", "dev-sweep", "existing-ecs"])
def test_every_other_shipped_stack_passes_every_mandatory_policy_of_the_whole_pack(stack):
    found = run_pack(*_recorded(stack))
    assert found["mandatory"] == [], "\n".join(map(str, found["mandatory"]))


def test_the_multinode_ray_pods_keep_the_host_network_only_in_their_privileged_namespace():
    resources, outputs = _recorded("multinode")
    for r in resources:
        if r["type"] == "kubernetes:core/v1:Namespace":
            r["props"]["metadata"]["labels"][policy_exposure.PSA_ENFORCE] = "restricted"
    assert {p for p, _, _ in run_pack(resources, outputs)["mandatory"]} == {"no-host-access"}


def test_docs_policy_md_lists_every_policy_with_its_level():
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| \**(mandatory|advisory)\**", (REPO / "docs" / "policy.md").read_text(),
                           re.MULTILINE))
    assert rows == {p.name: p.enforcement_level.value for p in pack.POLICIES}


@pytest.mark.parametrize("token, prop", [
    (policy_exposure.OSS_BUCKET_POLICY, "policy"), (checks.OSS_BUCKET, "policy"),
    (policy_exposure.RAM_POLICY, "policy_document"), (policy_exposure.RAM_POLICY, "document"),
    *[(t, "policy_name") for t in policy_exposure.ATTACHMENTS],
    *[(t, "slb_internet_enabled") for t in policy_exposure.CLUSTER_TYPES],
])
def test_the_exposure_policies_read_properties_the_installed_pulumi_alicloud_has(token, prop):
    import pulumi_alicloud

    module = token.split(":")[1].split("/")[0]
    defining = [f.read_text() for f in (Path(pulumi_alicloud.__file__).parent / module).glob("*.py")
                if f"'{token}'" in f.read_text()]
    assert defining, f"{token} is not a resource type of the installed pulumi_alicloud"
    assert f'__props__.__dict__["{prop}"] = {prop}' in defining[0]
