"""The Sandboxes component as the real program registers it (offline engine): names, parents, providers,
dependencies, secrets."""

from __future__ import annotations

import pytest

from tests.components.workloads.test_sandbox import crd_errors
from tests.conftest import record

SET = "kubernetes:agents.kruise.io/v1alpha1:SandboxSet"
SERVICE = "kubernetes:core/v1:Service"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RELEASE = "kubernetes:helm.sh/v3:Release"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SECRET = "kubernetes:core/v1:Secret"
COMPONENT = "verl-ack:sandbox:Sandboxes"
K8S_PROVIDER = "pulumi:providers:kubernetes"


def component(rec):
    (c,) = rec.by_type(COMPONENT)
    return c


def k8s_provider_urn(rec) -> str:
    (p,) = rec.by_type(K8S_PROVIDER)
    return p.urn


def depends_on(rec, r, urn: str) -> bool:
    """Whether `r` waits for `urn`, directly or through other resources."""
    by_urn, seen, todo = rec.by_urn(), set(), list(r.dependencies)
    while todo:
        d = todo.pop()
        if d == urn:
            return True
        if d not in seen and d in by_urn:
            seen.add(d)
            todo += by_urn[d].dependencies
    return False


def test_pool_service_and_policy_are_children_of_the_component_on_the_cluster_provider():
    rec = record("dev")
    comp = component(rec)
    for type_, name in ((SET, "sandbox-pool"), (SERVICE, "sandbox-mcp"), (POLICY, "sandbox-isolation")):
        r = rec.get(type_, name)
        assert r.parent == comp.urn, r.urn
        assert r.provider.startswith(k8s_provider_urn(rec)), r.urn


def test_recorded_sandboxset_still_validates_against_the_crd():
    r = record("dev").get(SET, "sandbox-pool")
    assert crd_errors({k: v for k, v in r.inputs.items() if not k.startswith("__")}) == []


def test_with_the_ack_addon_the_pool_waits_for_the_sandbox_addons():
    rec = record("dev")
    addons = {r.urn for r in rec.by_type("alicloud:cs/kubernetesAddon:KubernetesAddon")
              if r.name.startswith("sandbox-addons-")}
    assert len(addons) == 2
    for type_, name in ((SET, "sandbox-pool"), (SERVICE, "sandbox-mcp"), (POLICY, "sandbox-isolation")):
        assert addons <= set(rec.get(type_, name).dependencies), name
    assert rec.by_type(RELEASE) == [] or all(r.name != "sandbox-controller" for r in rec.by_type(RELEASE))
    assert not [r for r in rec.by_type(DEPLOYMENT) if r.name == "sandbox-manager"]


def test_open_source_installs_the_controller_chart_and_the_pool_waits_for_it():
    rec = record("existing-ecs")
    rel = rec.get(RELEASE, "sandbox-controller")
    assert rel.parent == component(rec).urn
    assert rel.inputs["chart"] == "agents-sandbox-controller"
    assert rel.inputs["version"] == "0.2.0"
    assert rel.inputs["repositoryOpts"]["repo"] == "https://openkruise.github.io/charts/"
    # The program creates the namespace (with its Pod Security Admission labels) before the chart.
    assert (rel.inputs["namespace"], rel.inputs["createNamespace"]) == ("sandbox-system", False)
    ns = rec.get("kubernetes:core/v1:NamespacePatch", "sandbox-namespace")
    assert ns.urn in rel.dependencies
    # Kept on destroy as Helm never deleted it either, by a patch: a retained Namespace would make the next `up`
    # on the same cluster fail on "already exists" (tests/test_redeploy.py).
    assert not ns.options["retain_on_delete"] and len(ns.options["aliases"]) == 1
    assert ns.inputs["metadata"]["annotations"] == {"pulumi.com/patchForce": "true"}
    for type_, name in ((SET, "sandbox-pool"), (SERVICE, "sandbox-mcp"), (POLICY, "sandbox-isolation")):
        assert rel.urn in rec.get(type_, name).dependencies, name
    assert depends_on(rec, rec.get(DEPLOYMENT, "sandbox-manager"), rel.urn)


def test_open_source_manager_deployment_waits_for_its_account_rbac_and_secrets():
    rec = record("existing-ecs")
    dep = rec.get(DEPLOYMENT, "sandbox-manager")
    needed = {rec.get(SECRET, "sandbox-admin-key").urn, rec.get(SECRET, "sandbox-key-store").urn,
              rec.get("kubernetes:core/v1:ServiceAccount", "sandbox-manager-sa").urn,
              rec.get("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                      "sandbox-manager-cluster-role-binding").urn}
    assert needed <= set(dep.dependencies)


def test_admin_key_reaches_the_cluster_only_as_a_secret_value():
    rec = record("existing-ecs")
    secret = rec.get(SECRET, "sandbox-admin-key")
    # The engine records secret values as "[secret]"; the whole stringData may be marked secret.
    assert "[secret]" in repr(secret.inputs["stringData"])
    assert "offline-placeholder" not in repr(secret.inputs)
    dep = rec.get(DEPLOYMENT, "sandbox-manager")
    assert "offline-placeholder-sandboxApiKey" not in repr(dep.inputs)
    assert "offline-placeholder" not in repr(rec.outputs)


def test_key_store_secret_ignores_the_keys_the_manager_writes():
    assert record("existing-ecs").get(SECRET, "sandbox-key-store").options["ignore_changes"] == ["data"]


def test_mcp_url_is_exported_and_points_at_the_service():
    rec = record("existing-ecs")
    svc = rec.get(SERVICE, "sandbox-mcp").inputs
    assert rec.outputs["mcp_url"] == (f"http://{svc['metadata']['name']}.{svc['metadata']['namespace']}"
                                      f".svc.cluster.local:{svc['spec']['ports'][0]['port']}/mcp")


@pytest.mark.parametrize("stack", ["dev", "existing-ecs"])
def test_disabled_sandboxes_create_nothing_and_export_no_mcp_url(stack):
    rec = record(stack, {"sandbox": {"enabled": False, "domain": None, "dns_zone": None}})
    assert rec.by_type(COMPONENT) == [] and rec.by_type(SET) == []
    assert "mcp_url" not in rec.outputs


def test_plan_reports_the_computed_pool_size_and_the_cap():
    from components.model import load_stack
    from offline.report import plan_sections

    s = load_stack("dev")
    (section,) = [x for x in plan_sections(s, record("dev")) if x.key == "sandbox"]
    assert section.data["demand"] == 16 * 16 * 1
    assert (section.data["pool_cap"], section.data["replicas"], section.data["capped"]) == (24, 24, True)
    assert "= 256" in section.markdown and "**24**" in section.markdown


def test_preview_warns_when_the_warm_pool_cannot_fit_on_the_system_pool():
    too_big = record("dev", {"sandbox": {"pool_cap": 64, "cpu": "1", "memory": "2Gi"}})
    assert any("sandbox.pool_cap" in msg for level, msg in too_big.logs if level == "warning")
    assert not any("sandbox.pool_cap" in msg for _, msg in record("dev").logs)
