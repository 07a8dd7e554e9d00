"""The sandbox domain: ALB Pulumi owns, TLS certificate, AlbConfig (HTTP 80 + HTTPS 443) reusing that ALB, the
`alb` IngressClass and the wildcard + apex CNAMEs."""

from __future__ import annotations

import pytest

from components.cloud.ingress import alb_config_manifest, certificate_id_suffix, dns_records, ingress_class_manifest
from components.wiring import ALB_HTTPS_ANNOTATIONS, ALB_INGRESS_CLASS
from tests.components.cloud.test_common import depends_on, settings_of
from tests.conftest import record

ALBCONFIG = "kubernetes:alibabacloud.com/v1:AlbConfig"
CERT_ID = {"sandbox": {"tls": {"source": "certificate_id", "certificate_id": "24681357"}}}


def test_the_alb_is_internet_facing_pay_as_you_go_in_two_zones_of_the_node_vswitches():
    rec = record("dev")
    alb = rec.get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb").inputs
    assert alb["addressType"] == "Internet"
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
    assert set(listeners) == {(80, "HTTP"), (443, "HTTPS")}
    [cert] = listeners[(443, "HTTPS")]["certificates"]
    assert cert["IsDefault"] is True and cert["CertificateId"].endswith("-ap-southeast-1")


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
    [cert] = rec.get(ALBCONFIG, "ingress-albconfig").inputs["spec"]["listeners"][1]["certificates"]
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
    assert manifest["spec"]["listeners"][1]["certificates"][0]["CertificateId"] == f"7-{suffix}"


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


def test_ingresses_on_the_alb_redirect_http_to_https():
    assert ALB_HTTPS_ANNOTATIONS["alb.ingress.kubernetes.io/ssl-redirect"] == "true"
    assert '"HTTPS": 443' in ALB_HTTPS_ANNOTATIONS["alb.ingress.kubernetes.io/listen-ports"]
