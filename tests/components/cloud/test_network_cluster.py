"""Network and cluster: a new VPC with NAT egress for a new cluster, given ids otherwise; an ACK Pro cluster
whose destroy leaves nothing billing, or an existing cluster that is only read; the one Kubernetes provider."""

from __future__ import annotations

import json

from components.cloud.cluster import create_time_addons, delete_options, kubectl_commands, oidc_provider_arn
from components.cloud.network import creates_network, vswitch_plan
from components.config import ClusterSettings
from offline.fakes import ACCOUNT_ID, resource_id
from tests.components.cloud.test_common import EXISTING_VPC, NEW_VPC, depends_on, settings_of
from tests.conftest import REPO, record

CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"


# ------------------------------------------------------------------------------------------------ network
def test_a_new_cluster_gets_a_vpc_with_node_and_terway_pod_vswitches_in_every_zone():
    rec = record("dev", NEW_VPC)
    s = settings_of("dev", NEW_VPC)
    vpc = rec.get("alicloud:vpc/network:Network", "net-vpc")
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/8" and vpc.inputs["vpcName"] == "verl-dev-vpc"
    for v in vswitch_plan(s):
        sw = rec.get("alicloud:vpc/switch:Switch", f"net-{v['role']}-{v['zone']}")
        assert (sw.inputs["zoneId"], sw.inputs["cidrBlock"]) == (v["zone"], v["cidr"])
        assert depends_on(sw, vpc)
    assert [v["cidr"] for v in vswitch_plan(s) if v["role"] == "pod"] == ["10.4.0.0/16", "10.5.0.0/16"]


def test_nodes_get_internet_egress_through_a_pay_as_you_go_enhanced_nat_and_eip():
    rec = record("dev", NEW_VPC)
    nat = rec.get("alicloud:vpc/natGateway:NatGateway", "net-nat")
    assert nat.inputs["natType"] == "Enhanced" and nat.inputs["paymentType"] == "PayAsYouGo"
    assert nat.inputs["networkType"] == "internet"
    eip = rec.get("alicloud:ecs/eipAddress:EipAddress", "net-nat-eip")
    assert eip.inputs["paymentType"] == "PayAsYouGo" and eip.inputs["internetChargeType"] == "PayByTraffic"
    assert eip.inputs["bandwidth"] == "100"
    assoc = rec.get("alicloud:ecs/eipAssociation:EipAssociation", "net-nat-eip-assoc")
    assert assoc.inputs["instanceType"] == "Nat" and depends_on(assoc, nat) and depends_on(assoc, eip)
    snats = rec.by_type("alicloud:vpc/snatEntry:SnatEntry")
    assert len(snats) == 4  # every node and pod vSwitch
    for e in snats:
        assert e.inputs["snatIp"] == "198.51.100.7"
        assert depends_on(e, assoc), "an SNAT entry needs its EIP bound first"


def test_node_pools_wait_for_egress_and_the_cluster_makes_no_nat_of_its_own():
    rec = record("dev", NEW_VPC)
    cluster = rec.get(CLUSTER, "ack-cluster")
    assert cluster.inputs["newNatGateway"] is False
    for pool in rec.by_type("alicloud:cs/nodePool:NodePool"):
        assert all(depends_on(pool, e) for e in rec.by_type("alicloud:vpc/snatEntry:SnatEntry")), pool.name


def test_a_new_cluster_in_a_given_vpc_uses_its_vswitch_ids_and_declares_no_network():
    s = settings_of("dev", EXISTING_VPC)
    assert not creates_network(s)
    rec = record("dev", EXISTING_VPC)
    network = ("alicloud:vpc/", "alicloud:ecs/eip")  # the MLflow backend disk (alicloud:ecs/ecsDisk) is no network
    assert not [r for r in rec.resources if r.type.startswith(network)]
    cluster = rec.get(CLUSTER, "ack-cluster")
    assert cluster.inputs["vswitchIds"] == ["vsw-node-a", "vsw-node-b"]
    assert cluster.inputs["podVswitchIds"] == ["vsw-pod-a", "vsw-pod-b"]
    assert rec.get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb").inputs["vpcId"] == "vpc-given"


# ------------------------------------------------------------------------------------------------ cluster
def test_a_new_cluster_is_ack_pro_with_terway_rrsa_and_the_settings_version():
    rec = record("dev", {"cluster": {"kubernetes_version": "1.34.1-aliyun.1"}})
    c = rec.get(CLUSTER, "ack-cluster").inputs
    assert c["clusterSpec"] == "ack.pro.small" and c["version"] == "1.34.1-aliyun.1"
    assert c["enableRrsa"] is True and c["ipStack"] == "ipv4"
    assert c["slbInternetEnabled"] is True and c["deletionProtection"] is False
    assert [a["name"] for a in c["addons"]][:2] == ["terway-controlplane", "terway-eniip"]
    assert {"name": "nginx-ingress-controller", "disabled": True} in c["addons"]
    assert c["serviceCidr"] == "192.168.0.0/16"
    assert c["tags"] == {"project": "verl-ack", "stack": "dev", "environment": "verl-dev"}


def test_an_empty_kubernetes_version_is_omitted_so_ack_picks_the_newest():
    assert "version" not in record("dev").get(CLUSTER, "ack-cluster").inputs


def test_destroying_a_new_cluster_deletes_the_alb_slb_and_log_projects_ack_made_for_it():
    reg = record("dev").get(CLUSTER, "ack-cluster")
    modes = {o["resourceType"]: o["deleteMode"] for o in reg.inputs["deleteOptions"]}
    assert modes == {"ALB": "delete", "SLB": "delete", "SLS_Data": "delete", "SLS_ControlPlane": "delete"}
    assert delete_options() == [{"resource_type": t, "delete_mode": "delete"} for t in modes]


def test_cluster_creation_has_its_own_timeout_and_protection_follows_the_settings():
    reg = record("dev", {"cluster": {"deletion_protection": True, "create_timeout_minutes": 45,
                                     "public_api": False}}).get(CLUSTER, "ack-cluster")
    assert reg.options["custom_timeouts"] == {"create": "45m"}
    assert reg.inputs["deletionProtection"] is True and reg.inputs["slbInternetEnabled"] is False


def test_the_create_only_addons_of_a_new_cluster_are_ignored_after_creation_so_a_version_bump_is_no_cluster_update():
    reg = record("dev").get(CLUSTER, "ack-cluster")
    assert "addons" in reg.options.get("ignore_changes"), reg.urn


def test_create_time_addons_carry_pinned_versions_only_when_set():
    s = settings_of("dev", {"versions": {"addons": {"terway": {"version": "v1.16.8"}}}})
    assert {"name": "terway-eniip", "version": "v1.16.8", "config": '{"NetworkPolicy":"true"}'} in create_time_addons(s)
    assert {"name": "csi-plugin"} in create_time_addons(s)


def test_terway_is_created_with_network_policy_on_so_every_networkpolicy_is_enforced():
    addons = {a["name"]: a for a in record("dev").get(CLUSTER, "ack-cluster").inputs["addons"]}
    assert json.loads(addons["terway-eniip"]["config"]) == {"NetworkPolicy": "true"}
    assert "config" not in addons["terway-controlplane"]


def test_a_new_cluster_keeps_an_audit_log_and_encrypts_secrets_with_the_kms_key_when_given():
    c = record("dev").get(CLUSTER, "ack-cluster").inputs
    assert c["auditLogConfig"] == {"enabled": True}
    assert "encryptionProviderKey" not in c
    c = record("dev", {"cluster": {"audit_log_project": "k8s-audit-dev",
                                   "secrets_kms_key_id": "key-hzz1234567890"}}).get(CLUSTER, "ack-cluster").inputs
    assert c["auditLogConfig"] == {"enabled": True, "slsProjectName": "k8s-audit-dev"}
    assert c["encryptionProviderKey"] == "key-hzz1234567890"
    off = record("dev", {"cluster": {"audit_log": False}}).get(CLUSTER, "ack-cluster").inputs
    assert off["auditLogConfig"] == {"enabled": False}


def test_the_api_server_is_private_unless_a_stack_opts_in():
    assert ClusterSettings().public_api is False
    assert "public_api: true" in (REPO / "stacks" / "Pulumi.dev.yaml").read_text(), "dev opts in, explicitly"


def test_an_existing_cluster_is_read_by_id_and_never_managed():
    rec = record("existing-ecs")
    cid = settings_of("existing-ecs").cluster.existing_cluster_id
    clusters = rec.by_type(CLUSTER)
    assert len(clusters) == 1
    read = clusters[0]
    assert read.options["read"] is True and read.options["id"] == cid, "a read, not a registration"
    assert read.name == "ack-cluster" and read.inputs == {}
    assert not [r for r in rec.resources if r.type == CLUSTER and not r.options.get("read")]
    # Everything that needs the cluster id gets the given one.
    for pool in rec.by_type("alicloud:cs/nodePool:NodePool"):
        assert pool.inputs["clusterId"] == cid
    assert rec.get("pulumi:providers:kubernetes", "ack-k8s").inputs["clusterIdentifier"] == cid


def test_an_existing_cluster_derives_its_rrsa_oidc_provider_from_the_account_id():
    rec = record("existing-ecs")
    cid = settings_of("existing-ecs").cluster.existing_cluster_id
    assert "alicloud:index/getAccount:getAccount" in [i["token"] for i in rec.invokes]
    trust = rec.get("alicloud:ram/role:Role", "identity-role-train").inputs["assumeRolePolicyDocument"]
    assert oidc_provider_arn(ACCOUNT_ID, cid) in trust
    assert oidc_provider_arn("1", "c2") == "acs:ram::1:oidc-provider/ack-rrsa-c2"


def test_the_plan_shows_the_read_cluster_as_not_managed():
    from offline.report.cloud import cloud_section

    sec = cloud_section(settings_of("existing-ecs"), record("existing-ecs"))
    assert sec.data["reads"] == [{"type": CLUSTER, "name": "ack-cluster",
                                  "id": settings_of("existing-ecs").cluster.existing_cluster_id}]
    assert "Read, not managed" in sec.markdown


# ------------------------------------------------------------------------------------------------ kubeconfig
def test_the_kubernetes_provider_is_keyed_on_the_cluster_id_with_a_secret_short_lived_kubeconfig():
    rec = record("dev")
    cluster = rec.get(CLUSTER, "ack-cluster")
    prov = rec.get("pulumi:providers:kubernetes", "ack-k8s")
    assert prov.inputs["kubeconfig"] == "[secret]"
    assert prov.inputs["clusterIdentifier"] == resource_id(CLUSTER, cluster.name, {}) == rec.outputs["cluster_id"]
    # deleteUnreachable absent: the PULUMI_K8S_DELETE_UNREACHABLE switch stays usable.
    assert prov.inputs["enableServerSideApply"] == "true" and "deleteUnreachable" not in prov.inputs
    cred = [i for i in rec.invokes if i["token"] == "alicloud:cs/getClusterCredential:getClusterCredential"]
    assert cred and cred[0]["args"]["clusterId"] == prov.inputs["clusterIdentifier"]
    assert cred[0]["args"]["temporaryDurationMinutes"] == 4320


def test_delete_unreachable_and_a_long_lived_kubeconfig_are_explicit_opt_ins():
    rec = record("dev", {"cluster": {"k8s_delete_unreachable": True, "kubeconfig_ttl_minutes": None}})
    assert rec.get("pulumi:providers:kubernetes", "ack-k8s").inputs["deleteUnreachable"] == "true"
    cred = [i for i in rec.invokes if i["token"] == "alicloud:cs/getClusterCredential:getClusterCredential"]
    assert "temporaryDurationMinutes" not in cred[0]["args"]


def test_kubectl_commands_name_the_stack_namespaces_and_labels():
    s = settings_of("dev")
    cmds = kubectl_commands(s)
    assert "verl-ack/pool" in cmds["kubectl_nodes"]
    assert cmds["kubectl_alb"].endswith("get albconfig verl-dev -o jsonpath='{.status.loadBalancer.dnsname}'")
    assert "-n sandbox-system get sandboxsets" in cmds["kubectl_sandboxes"]
    assert "kubectl_alb" not in kubectl_commands(settings_of("existing-ecs"))
