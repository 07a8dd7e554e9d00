"""The open-source manager starts (only flags its image defines; a released image without MCP is refused at
preview) and the isolation policy admits exactly the pods that must reach the sandboxes (manager and gateway)."""

from __future__ import annotations

import pytest

from components.config import SettingsError
from components.model import parse_settings
from components.workloads import sandbox as sb
from tests.conftest import stack_settings

# Flags registered in cmd/sandbox-manager/main.go (pflag plus the go flag sets it adds: zap's and klog's, which
# this program never passes). v0.3.0 = openkruise/agents@a4e640d2; PR #165 = its head 136236a8, the MCP build.
V0_3_0_FLAGS = {
    "enable-pprof", "pprof-addr", "port", "e2b-admin-key", "e2b-enable-auth", "e2b-domain", "e2b-max-timeout",
    "system-namespace", "peer-selector", "sandbox-namespace", "sandbox-label-selector", "max-claim-workers",
    "max-create-qps", "ext-proc-max-concurrency", "kube-client-qps", "kube-client-burst", "memberlist-bind-port",
    "e2b-key-storage", "e2b-key-storage-disable-schema-auto-update",
}
PR_165_FLAGS = V0_3_0_FLAGS | {"mcp-enabled", "mcp-port", "mcp-sandbox-ttl", "mcp-session-sync-port"}
MCP_BUILD = "registry.example.com/agents/sandbox-manager:pr165-136236a8"


def settings(stack: str = "dev", overrides: dict | None = None):
    return parse_settings(stack_settings(stack, overrides))


def rendered_flags(s) -> set[str]:
    (c,) = sb.manager_deployment_manifest(s)["spec"]["template"]["spec"]["containers"]
    return {a.removeprefix("--").split("=", 1)[0] for a in c["args"]}


def test_every_flag_the_open_source_manager_gets_is_defined_by_the_mcp_build_it_requires():
    flags = rendered_flags(settings("existing-ecs"))
    assert flags <= PR_165_FLAGS, flags - PR_165_FLAGS
    # ... and a released image would exit on these: why such an image is refused below.
    assert flags - V0_3_0_FLAGS == {"mcp-enabled", "mcp-port", "mcp-session-sync-port"}


def test_the_committed_open_source_stack_names_an_mcp_build_not_a_released_image():
    s = settings("existing-ecs")
    assert s.sandbox.manager == "open-source"
    assert sb.manager_deployment_manifest(s)["spec"]["template"]["spec"]["containers"][0]["image"] == \
        s.versions.sandbox_manager_image
    assert "openkruise/sandbox-manager" not in s.versions.sandbox_manager_image


OPEN_SOURCE = {"manager": "open-source", "mcp_port": 8082, "domain": None, "dns_zone": None}


@pytest.mark.parametrize("image", [None, "openkruise/sandbox-manager:v0.3.0", "docker.io/openkruise/sandbox-manager:v0.3.0",
                                   "openkruise/sandbox-manager:v0.3.0@sha256:" + "a" * 64])
def test_the_open_source_manager_without_an_mcp_build_is_refused_at_preview_naming_the_field(image):
    with pytest.raises(SettingsError) as info:
        settings("dev", {"sandbox": OPEN_SOURCE, "versions": {"sandbox_manager_image": image}})
    text = "\n".join(map(str, info.value.problems))
    assert "versions.sandbox_manager_image" in text and "PR #165" in text and "ack-addon" in text, text


def test_the_default_manager_needs_no_manager_image():
    s = settings("dev")
    assert s.sandbox.manager == "ack-addon" and s.versions.sandbox_manager_image is None


def test_an_mcp_build_in_your_registry_is_accepted():
    s = settings("dev", {"sandbox": OPEN_SOURCE, "versions": {"sandbox_manager_image": MCP_BUILD}})
    assert s.versions.sandbox_manager_image == MCP_BUILD


def peers(s) -> list[dict]:
    (rule,) = sb.network_policy_manifest(s)["spec"]["ingress"]
    return [p["podSelector"]["matchLabels"] for p in rule["from"]]


def test_with_the_ack_addon_the_gateway_that_proxies_e2b_traffic_may_reach_the_sandboxes():
    s = settings("dev")
    assert peers(s) == [{"app.kubernetes.io/name": "ack-sandbox-manager", "component": "sandbox-manager"},
                        {"app.kubernetes.io/name": "sandbox-gateway"}]
    # Same namespace only: a podSelector peer without a namespaceSelector means the policy's own namespace.
    (rule,) = sb.network_policy_manifest(s)["spec"]["ingress"]
    assert all(set(p) == {"podSelector"} for p in rule["from"]) and "ports" not in rule


def test_the_open_source_path_deploys_no_gateway_so_only_its_manager_is_admitted():
    assert peers(settings("existing-ecs")) == [{"app.kubernetes.io/name": "sandbox-manager",
                                                "component": "sandbox-manager"}]


@pytest.mark.parametrize("selector,expected", [
    ({}, [{"app.kubernetes.io/name": "ack-sandbox-manager", "component": "sandbox-manager"}]),
    ({"app": "my-gateway"}, [{"app.kubernetes.io/name": "ack-sandbox-manager", "component": "sandbox-manager"},
                             {"app": "my-gateway"}]),
])
def test_the_gateway_labels_are_a_setting_for_builds_that_label_it_otherwise(selector, expected):
    assert peers(settings("dev", {"sandbox": {"gateway_selector": selector}})) == expected


# --------------------------------------------------------------------------------------------- sandbox image
def sandbox_image(s) -> str:
    (box,) = sb.sandbox_pod_template(s)["spec"]["containers"]
    return box["image"]


def test_the_sandbox_image_comes_from_the_registry_upstream_runs_not_the_tutorials_test_registry():
    s = settings("dev", {"sandbox": {"image_mirror": False}})
    assert sandbox_image(s) == "registry-ap-southeast-1.ack.aliyuncs.com/acs/code-interpreter:v1.6"
    assert "acs-image-test" not in sandbox_image(s)


def test_a_pinned_sandbox_digest_is_what_every_warm_sandbox_pulls_and_an_unpinned_one_is_warned():
    digest = "sha256:" + "b" * 64
    pinned = settings("dev", {"versions": {"code_interpreter_image_digest": digest}, "sandbox": {"image_mirror": False}})
    assert sandbox_image(pinned) == f"registry-ap-southeast-1.ack.aliyuncs.com/acs/code-interpreter:v1.6@{digest}"
    assert "versions.code_interpreter_image_digest" not in dict(pinned.warnings())
    assert "pulled by tag" in dict(settings("dev").warnings())["versions.code_interpreter_image_digest"]


def test_a_sandbox_digest_given_twice_is_refused():
    digest = "sha256:" + "c" * 64
    with pytest.raises(SettingsError) as info:
        settings("dev", {"versions": {"code_interpreter_image": f"e2bdev/code-interpreter:v1.6@{digest}",
                                      "code_interpreter_image_digest": digest}})
    assert any("give the digest once" in str(p) for p in info.value.problems)
