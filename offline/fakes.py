"""Canned answers for the offline engine: ids, the computed outputs a real provider would return, and
invoke results. Values are obviously fake (`fake-...`, documentation IP ranges) so nobody mistakes a
plan for a deployment. Add an entry here when the program starts reading a new computed output or
calling a new invoke; an unmocked invoke raises.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

ACCOUNT_ID = "1234567890123456"
FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "https://203.0.113.10:6443", insecure-skip-tls-verify: true}
contexts:
- name: fake
  context: {cluster: fake, user: fake}
current-context: fake
users:
- name: fake
  user: {token: fake-offline-token}
"""


def _short(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:12]


def resource_id(type_: str, name: str, inputs: dict) -> str:
    if type_ == "alicloud:cs/managedKubernetes:ManagedKubernetes":
        return f"cfake{_short(name)}"
    if type_ == "alicloud:cas/serviceCertificate:ServiceCertificate":
        # A new upload (a renewed certificate has a new name) gets a new id, as the certificate service gives one.
        return str(int(_short(name + str(inputs.get("certificateName", ""))), 16) % 10**8)
    return f"fake-{_short(type_ + name)}"


def resource_outputs(type_: str, name: str, inputs: dict) -> dict:
    """Computed outputs (those not echoed from inputs) of the resource types the program reads."""
    if type_ == "alicloud:cs/managedKubernetes:ManagedKubernetes":
        cid = inputs.get("id") or resource_id(type_, name, inputs)  # a read carries its id
        return {
            "vpcId": inputs.get("vpcId", "vpc-fake"),
            "securityGroupId": "sg-fake",
            "workerRamRoleName": f"KubernetesWorkerRole-{cid}",
            "rrsaMetadata": {
                "enabled": True,
                "ramOidcProviderArn": f"acs:ram::{ACCOUNT_ID}:oidc-provider/ack-rrsa-{cid}",
                "ramOidcProviderName": f"ack-rrsa-{cid}",
                "rrsaOidcIssuerUrl": f"https://oidc-ack-fake.oss-cn-fake.aliyuncs.com/{cid}",
            },
        }
    if type_ == "alicloud:oss/bucket:Bucket":
        b = inputs.get("bucket", name)
        return {"intranetEndpoint": "oss-fake-internal.aliyuncs.com", "extranetEndpoint": "oss-fake.aliyuncs.com",
                "location": "oss-fake", "bucket": b}
    if type_ == "alicloud:vpc/natGateway:NatGateway":
        return {"snatTableIds": f"stb-{_short(name)}", "forwardTableIds": f"ftb-{_short(name)}"}
    if type_ == "alicloud:ecs/eipAddress:EipAddress":
        return {"ipAddress": "198.51.100.7"}
    if type_ == "alicloud:alb/loadBalancer:LoadBalancer":
        return {"dnsName": f"alb-{_short(name)}.ap-fake.alb.aliyuncs.com"}
    if type_ == "alicloud:cs/nodePool:NodePool":
        return {"nodePoolId": f"np{_short(name)}", "scalingGroupId": f"asg-{_short(name)}"}
    if type_ == "alicloud:ram/role:Role":
        role = inputs.get("roleName", name)
        return {"arn": f"acs:ram::{ACCOUNT_ID}:role/{role.lower()}", "roleId": _short(name)}
    if type_ == "alicloud:cr/namespace:Namespace" or type_ == "alicloud:cr/repo:Repo":
        return {}
    return {}


@dataclass
class FakeAccount:
    """The account the offline plan reads (components/cloud/account_checks.py): it holds what the shipped stacks
    and the test variants name, so they plan; a test takes something away to prove the preview refuses."""

    zones: list[str] = field(default_factory=lambda: [
        "ap-southeast-1a", "ap-southeast-1b", "ap-southeast-1c", "cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j"])
    # Instance types sell in every zone above except where listed here (type -> zones where it is sold out).
    sold_out: dict[str, list[str]] = field(default_factory=dict)
    dns_domains: list[str] = field(default_factory=lambda: ["example.com"])
    # ACR Enterprise instance id -> its VPC domains.
    acr_instances: dict[str, list[str]] = field(default_factory=lambda: {
        "cri-devplatform00000": ["verl-ack-dev-registry-vpc.ap-southeast-1.cr.aliyuncs.com"],
        "cri-devregistry000000": ["verl-ack-dev-registry-vpc.ap-southeast-1.cr.aliyuncs.com"],
        "cri-k2m8q4w7e1r5t9y3": ["verl-ack-dev-registry-vpc.ap-southeast-1.cr.aliyuncs.com"],  # tests: a real-looking id
        "cri-abc123": ["team-registry-vpc.ap-southeast-1.cr.aliyuncs.com"],
        "cri-abc": ["inst-registry-vpc.ap-southeast-1.cr.aliyuncs.com"]})
    ram_roles: list[str] = field(default_factory=lambda: [
        "AliyunCSDefaultRole", "AliyunCSManagedKubernetesRole", "AliyunCSManagedNetworkRole", "AliyunCSManagedCsiRole",
        "AliyunCSManagedAutoScalerRole"])
    buckets: list[str] = field(default_factory=lambda: ["my-existing-verl-bucket", "verl-ack-dev-data"])
    # Object keys per bucket (oss.get_bucket_objects): empty, so the shipped plans show a first use of each model and
    # dataset; a test adds a completion marker to plan a repeat (components/workloads/cache.py).
    bucket_objects: dict[str, list[str]] = field(default_factory=dict)
    # Lingjun machines (read with eflo.NodeGroup.get / eflo.Node.get): "<cluster>:<group>" -> zone, and node id ->
    # (cluster, group, zone). The shipped stacks' placeholder ids skip the reads; these are the tests' real-looking
    # values (tests/conftest.py REAL_DEV_VALUES) in dev's gpu_pool.zone.
    lingjun_node_groups: dict[str, str] = field(default_factory=lambda: {
        "i118191731733789436:i127062918265143": "ap-southeast-1a"})
    lingjun_nodes: dict[str, tuple[str, str, str]] = field(default_factory=lambda: {
        "e01-cn-fw7a2b3c4d5": ("i118191731733789436", "i127062918265143", "ap-southeast-1a")})


ACCOUNT = FakeAccount()


def _matching(names: list[str], regex: str | None) -> list[str]:
    return [n for n in names if regex is None or re.search(regex, n)]


def _acr_instance(iid: str, vpc: list[str]) -> dict:
    return {"id": iid, "name": f"fake-{iid}", "authorizationToken": "", "namespaceQuota": "", "namespaceUsage": "",
            "publicEndpoints": [], "region": "fake", "repoQuota": "", "repoUsage": "", "specification": "",
            "tags": {}, "tempUsername": "", "vpcEndpoints": vpc}


def account_read(type_: str, name: str, read_id: str) -> dict | None:
    """A read of a Lingjun node group or node from ACCOUNT, in the outputs the provider's Read stores; an id the
    account lacks fails as the engine fails such a read (pulumi pkg/resource/deploy/step.go ReadStep.Apply)."""
    a = ACCOUNT
    if type_ == "alicloud:eflo/nodeGroup:NodeGroup":
        if read_id not in a.lingjun_node_groups:
            raise RuntimeError(f"{type_} ({name}): resource '{read_id}' does not exist")
        cluster, group = read_id.split(":")
        return {"clusterId": cluster, "nodeGroupId": group, "az": a.lingjun_node_groups[read_id],
                "machineType": "fake-machine-type", "nodeGroupName": f"fake-{group}", "nodes": []}
    if type_ == "alicloud:eflo/node:Node":
        if read_id not in a.lingjun_nodes:
            raise RuntimeError(f"{type_} ({name}): resource '{read_id}' does not exist")
        cluster, group, zone = a.lingjun_nodes[read_id]
        return {"clusterId": cluster, "nodeGroupId": group, "zone": zone, "machineType": "fake-machine-type"}
    return None


def account_invoke(token: str, args: dict) -> dict | None:
    """Answers of the account-check reads from ACCOUNT, in the result shapes of pulumi-alicloud 4.0.0."""
    a = ACCOUNT
    if token == "alicloud:index/getZones:getZones":
        kind = args.get("availableInstanceType")
        ids = [z for z in a.zones if z not in a.sold_out.get(kind, [])] if kind else list(a.zones)
        return {"id": "fake-zones", "ids": ids, "zones": []}
    if token == "alicloud:dns/getAlidnsDomains:getAlidnsDomains":
        names = _matching(a.dns_domains, args.get("domainNameRegex"))
        return {"id": "fake-domains", "ids": names, "names": names, "domains": []}
    if token == "alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances":
        wanted = args.get("ids") or list(a.acr_instances)
        found = [i for i in wanted if i in a.acr_instances]
        return {"id": "fake-acr", "ids": found, "names": [f"fake-{i}" for i in found],
                "instances": [_acr_instance(i, a.acr_instances[i]) for i in found]}
    if token == "alicloud:ram/getRoles:getRoles":
        names = _matching(a.ram_roles, args.get("nameRegex"))
        return {"id": "fake-roles", "ids": names, "names": names, "roles": []}
    if token == "alicloud:oss/getBucketObjects:getBucketObjects":
        bucket, prefix = args["bucketName"], args.get("keyPrefix") or ""
        if bucket not in a.buckets:
            raise RuntimeError(f"{token}: ListObjects of {bucket}: NoSuchBucket")  # the data source's error on it
        keys = [k for k in a.bucket_objects.get(bucket, []) if k.startswith(prefix)]
        return {"id": f"fake-objects-{bucket}", "bucketName": bucket, "keyPrefix": prefix,
                "objects": [{"key": k, "acl": "default", "contentType": "application/json", "contentLength": "1",
                             "cacheControl": "", "contentDisposition": "", "contentEncoding": "", "contentMd5": "",
                             "expires": "", "serverSideEncryption": "", "sseKmsKeyId": "", "etag": "fake",
                             "storageClass": "Standard", "lastModificationTime": "2026-01-01T00:00:00Z"}
                            for k in keys]}
    if token == "alicloud:oss/getBuckets:getBuckets":
        names = _matching(a.buckets, args.get("nameRegex"))
        return {"id": "fake-buckets", "names": names, "buckets": []}
    return None


def invoke(token: str, args: dict) -> dict:
    answer = account_invoke(token, args)
    if answer is not None:
        return answer
    if token == "alicloud:cs/getClusterCredential:getClusterCredential":
        return {
            "id": args.get("clusterId", "cfake"),
            "clusterId": args.get("clusterId", "cfake"),
            "clusterName": "fake",
            "kubeConfig": FAKE_KUBECONFIG,
            "expiration": "2099-01-01T00:00:00Z",
            "certificateAuthorities": [],
        }
    if token == "alicloud:index/getAccount:getAccount":
        return {"id": ACCOUNT_ID}
    if token == "alicloud:cs/getKubernetesAddons:getKubernetesAddons":
        # The live add-on versions (components/cloud/addons.py check_lingjun_floors): the offline engine knows none,
        # so it answers with no add-ons; the comparison itself is tested with explicit rows.
        return {"id": args.get("clusterId", "cfake"), "clusterId": args.get("clusterId", "cfake"), "addons": [],
                "ids": [], "names": []}
    if token == "alicloud:cs/getManagedKubernetesClusters:getManagedKubernetesClusters":
        raise RuntimeError("use ManagedKubernetes.get or cluster ids from settings; this invoke is deprecated")
    raise RuntimeError(
        f"offline engine: no canned answer for invoke {token!r} (args {sorted(args)}); add one to offline/fakes.py")
