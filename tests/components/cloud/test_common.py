"""The cloud layer as a whole: one explicit provider per cloud for everything, every child parented to its
component, logical names pinned (a rename replaces the resource), and the stack outputs a user needs.

Helpers for the other tests/test_cloud_*.py files live here too (no `test_` prefix, so importing them does
not collect tests twice)."""

from __future__ import annotations

import json

import yaml

from components.config import STACKS_DIR
from components.model import parse_settings
from tests.conftest import record, stack_settings

# Component name -> type token of the cloud layer (pinned: renaming either replaces every child).
CLOUD_COMPONENTS = {
    "net": "verl-ack:network:Network",
    "ack": "verl-ack:cluster:Cluster",
    "pools": "verl-ack:nodepools:NodePools",
    "addons": "verl-ack:addons:Addons",
    "identity": "verl-ack:identity:Identity",
    "storage": "verl-ack:storage:Storage",
    "ingress": "verl-ack:ingress:Ingress",
    "sandbox-addons": "verl-ack:addons:SandboxAddons",
}
ECS_POOL = {"gpu_pool": {"kind": "ecs", "lingjun": None,
                         "ecs": {"instance_types": ["ecs.gn7i-c16g1.4xlarge"], "min_nodes": 0}}}
# A stack that builds its own VPC: an ECS GPU pool (Lingjun stacks must live in their nodes' VPC).
NEW_VPC = {**ECS_POOL, "cluster": {"network": {"vpc_id": None, "node_vswitch_ids": [], "pod_vswitch_ids": [],
                                               "nat_bandwidth_mbps": 100}}}
EXISTING_VPC = {"cluster": {"network": {
    "vpc_id": "vpc-given", "node_vswitch_ids": ["vsw-node-a", "vsw-node-b"], "pod_vswitch_ids": ["vsw-pod-a", "vsw-pod-b"]}}}


def settings_of(stack: str, overrides: dict | None = None):
    return parse_settings(stack_settings(stack, overrides))


def names(rec, type_: str) -> set[str]:
    return {r.name for r in rec.by_type(type_)}


def managed(rec):
    return [r for r in rec.resources if not r.options.get("read")]


def component(rec, name: str):
    return rec.get(CLOUD_COMPONENTS[name], name)


def labels(reg) -> dict[str, str]:
    """A node pool's `labels` input as a dict."""
    return {x["key"]: x["value"] for x in reg.inputs["labels"]}


def json_input(reg, key: str) -> dict:
    return json.loads(reg.inputs[key])


def depends_on(reg, other) -> bool:
    """`reg` waits for `other` (directly or through one of `other`'s component children)."""
    deps = set(reg.dependencies) | {u for us in reg.property_dependencies.values() for u in us}
    return other.urn in deps


def provider_urn(reg) -> str:
    """The provider reference of a registration is `<provider urn>::<provider id>`."""
    return reg.provider.rsplit("::", 1)[0]


# ------------------------------------------------------------------------------------------------ tests
def test_every_stack_disables_the_default_providers_in_its_config():
    for path in sorted(STACKS_DIR.glob("Pulumi.*.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        assert config.get("pulumi:disable-default-providers") == ["alicloud", "kubernetes"], path.name


def test_every_kubernetes_object_uses_the_one_explicit_kubernetes_provider(stack_name):
    rec = record(stack_name)
    providers = rec.by_type("pulumi:providers:kubernetes")
    assert [p.name for p in providers] == ["ack-k8s"], "exactly one Kubernetes provider"
    k8s = [r for r in rec.resources if r.is_kubernetes]
    assert k8s
    for r in k8s:
        assert provider_urn(r) == providers[0].urn, f"{r.urn} uses {r.provider or 'the default provider'}"


def test_every_alicloud_resource_and_invoke_uses_the_explicit_alicloud_provider(stack_name):
    rec = record(stack_name)
    providers = rec.by_type("pulumi:providers:alicloud")
    assert [p.name for p in providers] == ["alicloud"]
    for r in rec.resources:
        if r.type.startswith("alicloud:"):
            assert provider_urn(r) == providers[0].urn, f"{r.urn} uses {r.provider or 'the default provider'}"
    for inv in rec.invokes:
        if inv["token"].startswith("alicloud:"):
            assert inv["provider"].rsplit("::", 1)[0] == providers[0].urn, inv["token"]
    assert providers[0].inputs["region"] == settings_of(stack_name).region


def test_every_cloud_layer_child_is_parented_to_its_component(stack_name):
    rec = record(stack_name)
    comps = {r.name: r for r in rec.resources if r.type in CLOUD_COMPONENTS.values()}
    assert {"ack", "pools", "addons", "identity", "storage"} <= set(comps)
    for r in rec.resources:
        owner = next((c for c in sorted(comps, key=len, reverse=True) if r.name.startswith(c + "-")), None)
        if owner is not None and r.type not in CLOUD_COMPONENTS.values():
            assert r.parent == comps[owner].urn, f"{r.urn} is not a child of component {owner}"


def test_component_type_tokens_are_pinned(stack_name):
    rec = record(stack_name)
    for name, token in CLOUD_COMPONENTS.items():
        found = [r for r in rec.resources if r.name == name and r.type.startswith("verl-ack:")]
        for r in found:
            assert r.type == token, r.urn


def test_new_cluster_stack_declares_exactly_these_cloud_resources():
    rec = record("dev", NEW_VPC)
    expected = {
        "alicloud:vpc/network:Network": {"net-vpc"},
        "alicloud:vpc/switch:Switch": {"net-node-ap-southeast-1a", "net-pod-ap-southeast-1a",
                                       "net-node-ap-southeast-1b", "net-pod-ap-southeast-1b"},
        "alicloud:vpc/natGateway:NatGateway": {"net-nat"},
        "alicloud:ecs/eipAddress:EipAddress": {"net-nat-eip"},
        "alicloud:ecs/eipAssociation:EipAssociation": {"net-nat-eip-assoc"},
        "alicloud:vpc/snatEntry:SnatEntry": {"net-snat-node-ap-southeast-1a", "net-snat-pod-ap-southeast-1a",
                                             "net-snat-node-ap-southeast-1b", "net-snat-pod-ap-southeast-1b"},
        "alicloud:cs/managedKubernetes:ManagedKubernetes": {"ack-cluster"},
        "alicloud:cs/nodePool:NodePool": {"pools-system", "pools-gpu", "pools-sandbox"},
        "alicloud:cs/kubernetesAddon:KubernetesAddon": {
            "addons-csi-plugin", "addons-csi-provisioner", "addons-pod-identity", "addons-node-problem-detector",
            "addons-monitoring", "addons-alb", "sandbox-addons-controller", "sandbox-addons-manager"},
        "alicloud:cs/autoscalingConfig:AutoscalingConfig": {"pools-autoscaler"},
        "kubernetes:helm.sh/v3:Release": {"addons-kuberay"},
        "alicloud:ram/role:Role": {"identity-role-csi", "identity-role-data", "identity-role-train",
                                   "identity-role-mlflow"},
        "alicloud:ram/policy:Policy": {"identity-policy-csi", "identity-policy-data", "identity-policy-train",
                                       "identity-policy-mlflow"},
        "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": {
            "identity-attach-csi", "identity-attach-data", "identity-attach-train", "identity-attach-mlflow"},
        # The program creates KubeRay's namespace itself so it carries Pod Security Admission labels.
        "kubernetes:core/v1:Namespace": {"identity-namespace"},
        "kubernetes:core/v1:NamespacePatch": {"addons-kuberay-namespace"},  # kept on destroy (wiring.kept_namespace)
        "kubernetes:core/v1:ServiceAccount": {"identity-sa-data", "identity-sa-train", "identity-sa-mlflow"},
        "alicloud:oss/bucket:Bucket": {"storage-bucket"},
        "alicloud:oss/bucketAcl:BucketAcl": {"storage-acl"},
        "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock": {"storage-public-access-block"},
        "alicloud:oss/bucketPolicy:BucketPolicy": {"storage-policy"},
        "alicloud:oss/bucketLogging:BucketLogging": {"storage-logging"},
        "alicloud:alb/loadBalancer:LoadBalancer": {"ingress-alb"},
        "alicloud:cas/serviceCertificate:ServiceCertificate": {"ingress-cert"},
        "kubernetes:alibabacloud.com/v1:AlbConfig": {"ingress-albconfig"},
        "kubernetes:networking.k8s.io/v1:IngressClass": {"ingress-class"},
        "alicloud:dns/alidnsRecord:AlidnsRecord": {"ingress-dns-wildcard", "ingress-dns-apex"},
        "kubernetes:networking.k8s.io/v1:IngressPatch": {"sandbox-addons-https"},
        "pulumi:providers:kubernetes": {"ack-k8s"},
    }
    ours = {r.urn for r in rec.resources if r.type in CLOUD_COMPONENTS.values()}
    for type_, want in expected.items():
        got = {r.name for r in managed(rec) if r.type == type_ and r.parent in ours}
        assert got == want, f"{type_}: {sorted(got)} != {sorted(want)}"
    assert not record("dev").by_type("alicloud:cs/autoscalingConfig:AutoscalingConfig")  # Lingjun: no autoscaler


def test_stack_outputs_give_ids_endpoints_and_kubectl_commands_but_no_credential():
    out = record("dev").outputs
    assert "kubeconfig" not in out
    assert out["cluster_id"].startswith("c")
    assert out["bucket_name"] == "verl-ack-dev-data"
    assert out["oss_endpoint"] == "oss-ap-southeast-1-internal.aliyuncs.com"
    assert out["oss_public_endpoint"] == "oss-ap-southeast-1.aliyuncs.com"
    assert out["gpu_pool_id"]
    assert out["alb_dns_name"].endswith(".alb.aliyuncs.com")
    assert out["sandbox_api_url"] == "https://api.sandbox.example.com"
    # The user's own short-lived credential for the exported cluster id, not one read from the stack.
    assert out["kubectl_get_kubeconfig"].startswith(
        'aliyun cs DescribeClusterUserKubeconfig --ClusterId "$(pulumi stack output cluster_id)"')
    assert "-n verl get rayjob verl-grpo" in out["kubectl_job"]


def test_kubectl_job_looks_where_the_rayjob_is_rdma_ray_pods_in_their_own_namespace():
    rec = record("multinode")
    ns = rec.get("kubernetes:ray.io/v1:RayJob", "train-rayjob").inputs["metadata"]["namespace"]
    assert ns == "verl-ray"
    assert rec.outputs["kubectl_job"].count(f" -n {ns} get ") == 2


def test_a_stack_without_a_domain_exports_no_alb_or_sandbox_url():
    out = record("existing-ecs").outputs
    assert "alb_dns_name" not in out and "sandbox_api_url" not in out
    assert out["cluster_id"] == settings_of("existing-ecs").cluster.existing_cluster_id
