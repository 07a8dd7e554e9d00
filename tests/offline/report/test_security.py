"""The plan's security section: what is exposed and to whom, sandbox isolation, NetworkPolicies, namespaces'
admission levels and the roles' scopes, per stack and per setting, from the recorded resource graph."""

from __future__ import annotations

import json

import pytest

from components.model import parse_settings
from offline.report import BUILDERS
from offline.report.security import security_section
from tests.conftest import STACKS, record, stack_settings


def section(stack: str = "dev", overrides: dict | None = None):
    return security_section(parse_settings(stack_settings(stack, overrides)), record(stack, overrides))


def test_the_section_is_built_for_every_plan():
    assert security_section in BUILDERS


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_renders_a_json_serialisable_section(stack):
    sec = section(stack)
    assert sec.key == "security" and "| endpoint | reachable from |" in sec.markdown
    json.dumps(sec.data)


def test_dev_shows_its_opted_in_public_api_server_and_an_intranet_e2b_api():
    data = section().data
    assert data["exposure"]["API server"].startswith("**internet**")
    assert data["exposure"]["E2B API (sandbox.domain)"].startswith("VPC only (intranet ALB)")
    assert "HTTPS:443 only" in data["exposure"]["E2B API (sandbox.domain)"]


def test_a_public_e2b_api_shows_its_allow_list():
    data = section("dev", {"sandbox": {"public_api": True, "api_allowed_cidrs": ["203.0.113.0/24"]}}).data
    api = data["exposure"]["E2B API (sandbox.domain)"]
    assert api.startswith("**internet**") and "203.0.113.0/24" in api


def test_a_private_api_server_and_an_existing_cluster_say_so():
    assert section("dev", {"cluster": {"public_api": False}}).data["exposure"]["API server"].startswith("VPC only")
    assert "not managed" in section("existing-ecs").data["exposure"]["API server"]


def test_the_network_policies_listed_are_the_recorded_ones():
    data = section().data
    names = {(p["namespace"], p["name"]) for p in data["network_policies"]}
    assert names == {("sandbox-system", "code-interpreter-isolation"), ("verl", "mlflow-ingress"),
                     ("verl", "verl-grpo-ray-ingress"), ("verl", "verl-grpo-ray-egress")}
    ray = next(p for p in data["network_policies"] if p["name"] == "verl-grpo-ray-ingress")
    assert ray["egress"] is None and any("8265/TCP" in r for r in ray["ingress"])


def test_namespaces_show_the_enforced_pod_security_level():
    levels = {n["name"]: n["enforce"] for n in section().data["namespaces"]}
    assert levels == {"kuberay-system": "restricted", "verl": "baseline",
                      "sandbox-system": "not managed (the ACK add-on owns it)"}
    multi = {n["name"]: n["enforce"] for n in section("multinode").data["namespaces"]}
    assert (multi["verl"], multi["verl-ray"]) == ("restricted", "privileged")  # RDMA Ray pods alone in theirs
    assert {n["name"]: n["enforce"] for n in section("existing-ecs").data["namespaces"]}["sandbox-system"] == \
        "baseline"


def test_sandbox_isolation_follows_the_settings():
    base = section().data["sandbox_isolation"]
    assert base["user"].startswith("root") and base["nodes"].startswith("dedicated pool: 2 x")
    assert base["disk"].startswith("ephemeral-storage 2Gi per sandbox, envd emptyDir sizeLimit 256Mi")
    shared = section("dev", {"sandbox": {"dedicated_pool": None}}).data["sandbox_isolation"]
    assert shared["nodes"].startswith("the system pool")
    hardened = section("dev", {"sandbox": {
        "run_as_user": 10001, "runtime_class": "runv",
        "dedicated_pool": {"instance_types": ["ecs.ebmg7.32xlarge"], "runtime_name": "Sandboxed-Container.runv"}}})
    iso = hardened.data["sandbox_isolation"]
    assert iso["user"].startswith("uid 10001") and iso["runtime"] == "RuntimeClass `runv`"
    assert iso["nodes"].startswith("dedicated pool") and "Sandboxed-Container.runv" in iso["nodes"]
    assert "existing cluster" in section("existing-ecs").data["sandbox_isolation"]["NetworkPolicy enforcement"]


def test_roles_show_their_scopes_and_the_manager_reads_secrets_only_in_its_namespace():
    data = section("existing-ecs").data
    train = next(r for r in data["rrsa_roles"] if r["role"].endswith("-train"))
    assert train["write"] == ["checkpoints/gsm8k-tool-agent/qwen2.5-0.5b-grpo-ecs/"]
    roles = {r["name"]: r for r in data["kubernetes_roles"]}
    assert roles["sandbox-manager-sandbox-system"]["scope"] == "**cluster-wide**"
    assert not any("secrets" in rule for rule in roles["sandbox-manager-sandbox-system"]["rules"])
    assert roles["sandbox-manager-config"]["scope"] == "namespace sandbox-system"


def test_cluster_and_bucket_controls_follow_the_settings():
    data = section("dev", {"cluster": {"audit_log": False, "secrets_kms_key_id": "key-hzz1"},
                           "storage": {"vpc_only": True}}).data
    assert data["cluster"]["audit log"] == "**off**" and "key-hzz1" in data["cluster"]["Secret encryption (KMS)"]
    assert data["bucket"]["bucket policy"] == "HTTPS only, object data only from the VPC"
    assert "not managed" in section("existing-ecs").data["bucket"]["bucket"]
