"""Canned answers for the offline engine: ids, the computed outputs a real provider would return, and
invoke results. Values are obviously fake (`fake-...`, documentation IP ranges) so nobody mistakes a
plan for a deployment. Add an entry here when the program starts reading a new computed output or
calling a new invoke; an unmocked invoke raises.
"""

from __future__ import annotations

import hashlib

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


def invoke(token: str, args: dict) -> dict:
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
