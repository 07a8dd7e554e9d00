"""The sandbox domain: an ALB Pulumi owns (intranet unless `sandbox.public_api`), the TLS certificate, the AlbConfig
that hands that ALB to the ALB Ingress controller with one HTTPS:443 listener, the `alb` IngressClass, and (with
`sandbox.dns_zone`) the wildcard and apex CNAME records pointing at the ALB.

Owning the ALB (instead of letting the controller create one) gives its DNS name at deploy time, so the DNS
records land in the same `pulumi up`. The E2B API authenticates with one static key, so the listener is HTTPS
only (no HTTP listener to send it over in clear text; wiring.ALB_HTTPS_ANNOTATIONS) with a TLS >= 1.2 security
policy (`sandbox.tls_policy`), and `sandbox.api_allowed_cidrs` becomes the listener's whitelist ACL. AlbConfig
listener keys `securityPolicyId` and `aclConfig{aclType, aclEntries}` are the controller's
(alibaba/alibaba-load-balancer-controller pkg/apis/alibabacloud/v1/albconfig_types.go; ALB docs "Configure an ACL
by using an AlbConfig").

Teardown order: the AlbConfig depends on the controller add-on, so `pulumi destroy` deletes the AlbConfig
(the controller removes its listeners) before the controller, then the ALB itself.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pulumi
import pulumi_alicloud as alicloud
import pulumi_kubernetes as k8s

from components.cloud.network import NetworkRefs
from components.config import Settings
from components.wiring import ALB_INGRESS_CLASS

ALB_CONTROLLER = "ingress.k8s.alibabacloud/alb"
DNS_TTL_SECONDS = 600  # the smallest TTL the free Alibaba Cloud DNS edition accepts


def certificate_id_suffix(s: Settings) -> str:
    """`-cn-hangzhou` for certificates in the Chinese-mainland Certificate Management site, `-ap-southeast-1`
    outside it (AlbConfig CertificateId format); the provider uploads to the site of `region`."""
    if s.sandbox.tls.certificate_id_suffix:
        return s.sandbox.tls.certificate_id_suffix
    mainland = s.region.startswith("cn-") and s.region != "cn-hongkong"
    return "cn-hangzhou" if mainland else "ap-southeast-1"


def certificate_name_for(s: Settings, certificate_pem: str) -> str:
    """`<name>-sandbox-<first 8 hex of the certificate's SHA-256>`: a renewed certificate gets a new name."""
    return f"{s.name}-sandbox-{hashlib.sha256(certificate_pem.strip().encode()).hexdigest()[:8]}"


def certificate_name(s: Settings, certificate_pem: pulumi.Output[str]) -> pulumi.Output[str]:
    """certificate_name_for on the secret certificate Output. The name is shown in previews (unsecret): a prefix
    of the hash of a certificate, which the server hands to every TLS client, reveals nothing; the certificate
    Output itself stays secret."""
    return pulumi.Output.unsecret(certificate_pem.apply(lambda pem: certificate_name_for(s, pem)))


def alb_zone_mappings(s: Settings, node_vswitch_ids: dict[str, pulumi.Input[str]]) -> list[dict]:
    """ALB needs two zones: the first two of `zones`, on the node vSwitches."""
    return [{"zone_id": z, "vswitch_id": node_vswitch_ids[z]} for z in s.zones[:2]]


def alb_address_type(s: Settings) -> str:
    """`Internet` only when the E2B API is meant to be public; training needs only the in-cluster MCP Service."""
    return "Internet" if s.sandbox.public_api else "Intranet"


def https_listener(s: Settings, certificate_id: pulumi.Input[str]) -> dict:
    listener: dict = {"port": 443, "protocol": "HTTPS",
                      "certificates": [{"CertificateId": certificate_id, "IsDefault": True}],
                      "securityPolicyId": s.sandbox.tls_policy}
    if s.sandbox.api_allowed_cidrs:
        # A whitelist: only these sources reach the listener (the controller creates the ACL from the entries).
        listener["aclConfig"] = {"aclType": "White", "aclEntries": list(s.sandbox.api_allowed_cidrs)}
    return listener


def alb_config_manifest(s: Settings, alb_id: pulumi.Input[str], certificate_id: pulumi.Input[str]) -> dict:
    """AlbConfig reusing the ALB Pulumi owns (`config.id`, not force-overriding its settings), with one HTTPS:443
    listener whose default certificate is the sandbox domain's."""
    return {
        "apiVersion": "alibabacloud.com/v1",
        "kind": "AlbConfig",
        "metadata": {"name": s.name},
        "spec": {
            "config": {"id": alb_id, "forceOverride": False},
            "listeners": [https_listener(s, certificate_id)],
        },
    }


def ingress_class_manifest(s: Settings) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": ALB_INGRESS_CLASS},
        "spec": {"controller": ALB_CONTROLLER,
                 "parameters": {"apiGroup": "alibabacloud.com", "kind": "AlbConfig", "name": s.name}},
    }


def dns_records(s: Settings) -> dict[str, str]:
    """Record names (RR) inside dns_zone: the wildcard for the E2B hosts (api.<domain>, <port>-<id>.<domain>)
    and the domain itself. Empty without dns_zone."""
    if not (s.sandbox.domain and s.sandbox.dns_zone):
        return {}
    rr = s.sandbox.domain.removesuffix("." + s.sandbox.dns_zone)
    return {"wildcard": f"*.{rr}", "apex": rr}


def sandbox_api_url(s: Settings) -> str | None:
    return f"https://api.{s.sandbox.domain}" if s.sandbox.domain else None


@dataclass(kw_only=True)
class IngressArgs:
    settings: Settings
    network: NetworkRefs
    tags: dict[str, str]
    provider: pulumi.ProviderResource  # the explicit alicloud provider
    k8s_provider: pulumi.ProviderResource
    tls_certificate: pulumi.Output[str] | None = None  # secret; tls.source=upload
    tls_private_key: pulumi.Output[str] | None = None  # secret
    # The ALB Ingress controller add-on: it brings the AlbConfig CRD and must outlive the AlbConfig.
    controller_ready: list[pulumi.Resource] = field(default_factory=list)


class Ingress(pulumi.ComponentResource):
    """ALB (intranet unless sandbox.public_api) + certificate + AlbConfig + IngressClass + DNS records for
    `sandbox.domain`."""

    def __init__(self, name: str, args: IngressArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:ingress:Ingress", name, None, opts)
        s = args.settings
        tls = s.sandbox.tls
        cloud = pulumi.ResourceOptions(parent=self, provider=args.provider)

        self.alb = alicloud.alb.LoadBalancer(
            f"{name}-alb",
            load_balancer_name=f"{s.name}-sandbox",
            vpc_id=args.network.vpc_id,
            address_type=alb_address_type(s),
            address_allocated_mode="Dynamic",
            load_balancer_edition="Standard",
            load_balancer_billing_config={"pay_type": "PayAsYouGo"},
            zone_mappings=alb_zone_mappings(s, args.network.node_vswitch_ids),
            # Sent at create (the policy pack's cost-tags rule checks them), then left alone: the ALB Ingress
            # controller tags an ALB it reuses (ack.aliyun.com, ingress.k8s.alibaba/*; alibaba-load-balancer-
            # controller pkg/provider/alibaba/alb/alb.go ReuseALB) and finds it again by those tags, while the
            # provider's Read keeps every tag but aliyun*/acs:* (terraform-provider-alicloud alicloud/tags.go
            # tagIgnored). Without this an update or refresh would strip the controller's tags.
            tags=args.tags,
            opts=pulumi.ResourceOptions.merge(cloud, pulumi.ResourceOptions(ignore_changes=["tags"])),
        )

        self.certificate: alicloud.cas.ServiceCertificate | None = None
        if tls.source == "upload":
            assert args.tls_certificate is not None and args.tls_private_key is not None  # components/config/secrets.py
            # Renewal (every <= 90 days for Let's Encrypt) replaces the certificate: `cert` and `key` are ForceNew
            # (terraform-provider-alicloud alicloud/resource_alicloud_ssl_certificates_service_certificate.go
            # :29-54). Names are unique per account (ROS AWS::CAS::UserCertificate doc), so the name carries the
            # content's hash and Pulumi's default create-before-delete can upload the new one beside the old; the
            # AlbConfig below takes the new id before the old certificate is deleted.
            self.certificate = alicloud.cas.ServiceCertificate(
                f"{name}-cert", certificate_name=certificate_name(s, args.tls_certificate), cert=args.tls_certificate,
                key=args.tls_private_key, opts=cloud)
            cas_id: pulumi.Input[str] = self.certificate.id
        else:
            assert tls.certificate_id is not None  # settings validation
            cas_id = tls.certificate_id
        self.certificate_id = pulumi.Output.concat(cas_id, "-", certificate_id_suffix(s))

        manifest = alb_config_manifest(s, self.alb.id, self.certificate_id)
        self.alb_config = k8s.apiextensions.CustomResource(
            f"{name}-albconfig",
            api_version=manifest["apiVersion"], kind=manifest["kind"], metadata=manifest["metadata"],
            spec=manifest["spec"],
            # The CRD comes with the controller add-on, and on destroy the controller must still run to release
            # the listeners it made, so the AlbConfig is deleted first.
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=args.controller_ready),
        )
        cls = ingress_class_manifest(s)
        self.ingress_class = k8s.networking.v1.IngressClass(
            f"{name}-class", metadata=cls["metadata"], spec=cls["spec"],
            # Names the AlbConfig by a plain string.
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[self.alb_config]))

        self.dns_records: dict[str, alicloud.dns.AlidnsRecord] = {}
        for key, rr in dns_records(s).items():
            self.dns_records[key] = alicloud.dns.AlidnsRecord(
                f"{name}-dns-{key}", domain_name=s.sandbox.dns_zone, rr=rr, type="CNAME", value=self.alb.dns_name,
                ttl=DNS_TTL_SECONDS, opts=cloud)

        self.dns_name = self.alb.dns_name
        self.ready: list[pulumi.Resource] = [self.alb_config, self.ingress_class]
        self.register_outputs({"alb_dns_name": self.alb.dns_name, "api_url": sandbox_api_url(s)})
