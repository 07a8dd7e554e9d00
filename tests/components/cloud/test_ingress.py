"""The sandbox domain: ALB Pulumi owns (intranet unless sandbox.public_api), TLS certificate, AlbConfig (HTTPS 443
only, TLS >= 1.2, an ACL from sandbox.api_allowed_cidrs) reusing that ALB, the `alb` IngressClass and the wildcard +
apex CNAMEs."""

from __future__ import annotations

import pytest

from components.cloud.ingress import alb_config_manifest, certificate_id_suffix, dns_records, ingress_class_manifest
from components.config import SettingsError
from components.wiring import ALB_HTTPS_ANNOTATIONS, ALB_INGRESS_CLASS
from tests.components.cloud.test_common import depends_on, settings_of
from tests.conftest import record

ALBCONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"
CERT_ID = {"sandbox": {"tls": {"source": "certificate_id", "certificate_id": "24681357"}}}


PUBLIC = {"sandbox": {"public_api": True, "api_allowed_cidrs": ["203.0.113.0/24"]}}


def test_the_alb_is_intranet_by_default_pay_as_you_go_in_two_zones_of_the_node_vswitches():
    rec = record("dev")
    alb = rec.get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb").inputs
    assert alb["addressType"] == "Intranet", "training needs only the in-cluster MCP Service"
    assert alb["loadBalancerBillingConfig"] == {"payType": "PayAsYouGo"}
    assert [m["zoneId"] for m in alb["zoneMappings"]] == ["ap-southeast-1a", "ap-southeast-1b"]
    node_vsw = rec.get("alicloud:cs/nodePool:NodePool", "pools-system").inputs["vswitchIds"]
    assert [m["vswitchId"] for m in alb["zoneMappings"]] == node_vsw


def test_an_uploaded_certificate_comes_from_secret_config_and_stays_secret():
    cert = record("dev").get("alicloud:cas/serviceCertificate:ServiceCertificate", "ingress-cert")
    assert cert.inputs["cert"] == "[secret]" and cert.inputs["key"] == "[secret]"


def test_the_albconfig_reuses_the_alb_and_serves_https_with_the_certificate_by_default():
    rec = record("dev")
    cfg = rec.get(ALBCONFIG, "ingress-albconfig")
    alb = rec.get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb")
    assert cfg.inputs["apiVersion"] == "alibabacloud.com/v1" and cfg.inputs["kind"] == "AlbConfig"
    assert cfg.inputs["spec"]["config"]["forceOverride"] is False
    assert depends_on(cfg, alb)
    listeners = {(x["port"], x["protocol"]): x for x in cfg.inputs["spec"]["listeners"]}
    assert set(listeners) == {(443, "HTTPS")}, "no HTTP listener to send the E2B key over in clear text"
    [cert] = listeners[(443, "HTTPS")]["certificates"]
    assert cert["IsDefault"] is True and cert["CertificateId"].endswith("-ap-southeast-1")
    assert listeners[(443, "HTTPS")]["securityPolicyId"] == "tls_cipher_policy_1_2"
    assert "aclConfig" not in listeners[(443, "HTTPS")], "an intranet ALB needs no allow-list by default"


def test_a_public_e2b_api_is_internet_facing_https_only_and_allow_listed():
    rec = record("dev", PUBLIC)
    assert rec.get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb").inputs["addressType"] == "Internet"
    [listener] = rec.get(ALBCONFIG, "ingress-albconfig").inputs["spec"]["listeners"]
    assert (listener["port"], listener["protocol"]) == (443, "HTTPS")
    assert listener["aclConfig"] == {"aclType": "White", "aclEntries": ["203.0.113.0/24"]}


def test_a_stricter_tls_policy_reaches_the_listener():
    s = settings_of("dev", {"sandbox": {"tls_policy": "tls_cipher_policy_1_2_strict_with_1_3"}})
    [listener] = alb_config_manifest(s, "alb-1", "7-ap-southeast-1")["spec"]["listeners"]
    assert listener["securityPolicyId"] == "tls_cipher_policy_1_2_strict_with_1_3"


@pytest.mark.parametrize("sandbox,message", [
    ({"public_api": True}, "api_allowed_cidrs"),
    ({"public_api": True, "api_allowed_cidrs": ["0.0.0.0/0"], "domain": None, "dns_zone": None}, "domain"),
    ({"tls_policy": "tls_cipher_policy_1_0"}, "tls_policy"),
    ({"api_allowed_cidrs": ["10.0.0.1/8"]}, "CIDR"),
])
def test_an_unsafe_e2b_exposure_is_refused_with_the_fix(sandbox, message):
    with pytest.raises(SettingsError, match=message):
        settings_of("dev", {"sandbox": sandbox})


def test_on_destroy_the_albconfig_goes_before_the_alb_controller_addon():
    rec = record("dev")
    cfg = rec.get(ALBCONFIG, "ingress-albconfig")
    assert depends_on(cfg, rec.get("alicloud:cs/kubernetesAddon:KubernetesAddon", "addons-alb"))
    cls = rec.get("kubernetes:networking.k8s.io/v1:IngressClass", "ingress-class")
    assert depends_on(cls, cfg)
    assert cls.inputs["metadata"] == {"name": ALB_INGRESS_CLASS}
    assert cls.inputs["spec"] == ingress_class_manifest(settings_of("dev"))["spec"]
    assert cls.inputs["spec"]["parameters"]["name"] == cfg.inputs["metadata"]["name"]


def test_a_certificate_id_source_uploads_nothing_and_uses_the_id_with_the_site_suffix():
    rec = record("dev", CERT_ID)
    assert not rec.by_type("alicloud:cas/serviceCertificate:ServiceCertificate")
    [cert] = rec.get(ALBCONFIG, "ingress-albconfig").inputs["spec"]["listeners"][0]["certificates"]
    assert cert["CertificateId"] == "24681357-ap-southeast-1"


@pytest.mark.parametrize("region,zones,override,suffix", [
    ("cn-hangzhou", ["cn-hangzhou-h", "cn-hangzhou-i"], None, "cn-hangzhou"),
    ("cn-beijing", ["cn-beijing-a", "cn-beijing-b"], None, "cn-hangzhou"),
    ("cn-hongkong", ["cn-hongkong-b", "cn-hongkong-c"], None, "ap-southeast-1"),
    ("ap-southeast-1", ["ap-southeast-1a", "ap-southeast-1b"], None, "ap-southeast-1"),
    ("ap-southeast-1", ["ap-southeast-1a", "ap-southeast-1b"], "cn-hangzhou", "cn-hangzhou"),
])
def test_the_certificate_id_suffix_is_cn_hangzhou_in_the_mainland_and_ap_southeast_1_elsewhere(
        region, zones, override, suffix):
    s = settings_of("dev", {"region": region, "zones": zones, "gpu_pool": {"zone": zones[0]},
                            "sandbox": {"tls": {"certificate_id_suffix": override}}})
    assert certificate_id_suffix(s) == suffix
    manifest = alb_config_manifest(s, "alb-1", f"7-{suffix}")
    assert manifest["spec"]["listeners"][0]["certificates"][0]["CertificateId"] == f"7-{suffix}"


def test_dns_has_a_wildcard_and_an_apex_cname_to_the_alb_inside_the_zone():
    rec = record("dev")
    dns = rec.outputs["alb_dns_name"]
    for key, rr in {"wildcard": "*.sandbox", "apex": "sandbox"}.items():
        r = rec.get("alicloud:dns/alidnsRecord:AlidnsRecord", f"ingress-dns-{key}").inputs
        assert (r["domainName"], r["rr"], r["type"], r["value"], r["ttl"]) == ("example.com", rr, "CNAME", dns, 600)
    deep = settings_of("dev", {"sandbox": {"domain": "e2b.ml.example.com"}})
    assert dns_records(deep) == {"wildcard": "*.e2b.ml", "apex": "e2b.ml"}


def test_without_a_dns_zone_the_records_are_left_to_the_user():
    rec = record("dev", {"sandbox": {"dns_zone": None}})
    assert not rec.by_type("alicloud:dns/alidnsRecord:AlidnsRecord")
    assert rec.by_type(ALBCONFIG), "the ALB and TLS are still set up"


def test_without_a_domain_there_is_no_alb_certificate_or_albconfig():
    rec = record("existing-ecs")
    assert not [r for r in rec.resources if r.name.startswith("ingress")]


def test_ingresses_on_the_alb_listen_on_https_only():
    assert ALB_HTTPS_ANNOTATIONS == {"alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]'}
