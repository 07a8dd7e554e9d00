#!/usr/bin/env python3
"""Generate docs/ram-policy.json: the RAM actions the deploying identity needs, derived from the resource types
and invokes the shipped stacks record, each action with the provider source line that calls it.

    python tools/ram_policy.py --tf-src /work/.mirror/aliyun+terraform-provider-alicloud/repo

For each alicloud type the offline plans register (and each invoke they make), the provider's Go source at the
commit docs/facts-provider.md names is read: RPC calls (`action := "CreateVpc"` ... `client.RpcPost("Vpc", ...)`)
in the resource's file and in the `Describe...` service functions it calls give `<RAM code>:<API>`; calls the
provider makes through an SDK client or a ROA path are listed in MANUAL with a needle that must match a line of
that source, so no action is written without the line that needs it. RAM codes per API product: RAM_CODES.
tests/test_ram_policy.py holds the file equal to what the stacks record.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "ram-policy.json"
SCHEMA = REPO / "tests" / "data" / "alicloud_provider_schema.json"
STACKS = ("dev", "multinode", "existing-ecs", "dev-platform", "dev-grpo", "dev-sweep")
# What the program creates that no shipped stack does: the VPC, NAT, EIP and SNAT entries of a stack on an ECS GPU
# pool (Lingjun stacks use their machines' VPC). Rendered as dev with these settings.
NEW_VPC_VARIANT = {"gpu_pool": {"kind": "ecs", "lingjun": None,
                                "ecs": {"instance_types": ["ecs.gn7i-c16g1.4xlarge"], "min_nodes": 0}},
                   "cluster": {"network": {"vpc_id": None, "node_vswitch_ids": [], "pod_vswitch_ids": [],
                                           "nat_bandwidth_mbps": 100}}}
# dev with real-looking Lingjun ids: the shipped placeholders skip the Lingjun reads (components/cloud/account_checks.py
# check_lingjun), which a real preview performs, so their read permissions come from this variant.
LINGJUN_READ_VARIANT = {"gpu_pool": {"lingjun": {"eflo_cluster_id": "i118191731733789436",
                                                 "eflo_node_group_id": "i127062918265143",
                                                 "node_ids": ["e01-cn-fw7a2b3c4d5"]}}}
# API product (as the provider's RPC calls name it) -> RAM code. Source: each product's "RAM authorization" page of
# the API reference (https://help.aliyun.com/zh/ssl-certificate/developer-reference/api-cas-2020-04-07-ram states
# cas -> yundun-cert; the others use the product code, docs/uncertain-facts.md).
RAM_CODES = {"Vpc": "vpc", "Alb": "alb", "cas": "yundun-cert", "cr": "cr", "Ram": "ram", "Ecs": "ecs", "CS": "cs",
             "Alidns": "alidns", "Oss": "oss", "Sts": "sts"}
# (RAM action, file, needle): calls made through an SDK client, a ROA path or OSS's REST API.
MANUAL: dict[str, list[tuple[str, str, str]]] = {
    "alicloud:cs/managedKubernetes:ManagedKubernetes": [
        ("cs:CreateCluster", "resource_alicloud_cs_managed_kubernetes.go", r"\.CreateCluster\(request\)"),
        ("cs:DescribeClusterDetail", "resource_alicloud_cs_managed_kubernetes.go", r"\.DescribeClusterDetail\("),
        ("cs:ModifyCluster", "resource_alicloud_cs_managed_kubernetes.go", r"\.ModifyCluster\("),
        ("cs:DescribeTaskInfo", "service_alicloud_cs.go", r"func \(s \*CsClient\) DescribeTaskRefreshFunc"),
        ("cs:DeleteCluster", "resource_alicloud_cs_kubernetes.go", r"roacs\.DeleteClusterRequest\{"),
        ("vpc:DescribeNatGateways", "resource_alicloud_cs_managed_kubernetes.go", r"\.DescribeNatGateways\("),
        ("vpc:DescribeVSwitchAttributes", "resource_alicloud_cs_managed_kubernetes.go", r"\.DescribeVSwitch\(")],
    "alicloud:cs/nodePool:NodePool": [
        ("cs:CreateClusterNodePool", "resource_alicloud_cs_kubernetes_node_pool.go", r'"/clusters/%s/nodepools", '),
        ("cs:ModifyClusterNodePool", "resource_alicloud_cs_kubernetes_node_pool.go",
         r'RoaPut\("CS", "2015-12-15", action'),
        ("cs:ModifyNodePoolNodeConfig", "resource_alicloud_cs_kubernetes_node_pool.go", r'nodepools/%s/node_config"'),
        ("cs:DeleteClusterNodepool", "resource_alicloud_cs_kubernetes_node_pool.go", r'RoaDelete\("CS"'),
        ("cs:DescribeClusterNodePoolDetail", "service_alicloud_ack_v2.go",
         r"func \(s \*AckServiceV2\) DescribeAckNodepool\("),
        ("cs:AttachInstancesToNodePool", "resource_alicloud_cs_kubernetes_node_pool.go", r'"AttachInstancesToNodePool"')],
    "alicloud:cs/kubernetesAddon:KubernetesAddon": [
        ("cs:InstallClusterAddons", "service_alicloud_cs.go", r"s\.client\.InstallClusterAddons\("),
        ("cs:GetClusterAddonInstance", "service_alicloud_cs.go", r"s\.client\.GetClusterAddonInstance\("),
        ("cs:ModifyClusterAddon", "service_alicloud_cs.go", r"s\.client\.ModifyClusterAddon\("),
        ("cs:UpgradeClusterAddons", "service_alicloud_cs.go", r"s\.client\.UpgradeClusterAddons\("),
        ("cs:UnInstallClusterAddons", "service_alicloud_cs.go", r"s\.client\.UnInstallClusterAddons\(")],
    "alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace": [
        ("cr:CreateNamespace", "resource_alicloud_cr_ee_namespace.go", r"\.CreateNamespace\("),
        ("cr:UpdateNamespace", "resource_alicloud_cr_ee_namespace.go", r"\.UpdateNamespace\("),
        ("cr:GetNamespace", "service_alicloud_cr_ee.go", r"creeClient\.GetNamespace\(request\)"),
        ("cr:DeleteNamespace", "service_alicloud_cr_ee.go", r"creeClient\.DeleteNamespace\(request\)")],
    "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo": [
        ("cr:GetRepository", "service_alicloud_cr_ee.go", r"creeClient\.GetRepository\(request\)"),
        ("cr:DeleteRepository", "service_alicloud_cr_ee.go", r"creeClient\.DeleteRepository\(request\)")],
    "alicloud:dns/alidnsRecord:AlidnsRecord": [
        ("alidns:AddDomainRecord", "resource_alicloud_alidns_record.go", r"\.AddDomainRecord\("),
        ("alidns:UpdateDomainRecord", "resource_alicloud_alidns_record.go", r"\.UpdateDomainRecord\("),
        ("alidns:UpdateDomainRecordRemark", "resource_alicloud_alidns_record.go", r"\.UpdateDomainRecordRemark\("),
        ("alidns:SetDomainRecordStatus", "resource_alicloud_alidns_record.go", r"\.SetDomainRecordStatus\("),
        ("alidns:DeleteDomainRecord", "resource_alicloud_alidns_record.go", r"\.DeleteDomainRecord\("),
        ("alidns:DescribeDomainRecordInfo", "service_alicloud_alidns.go",
         r"func \(s \*AlidnsService\) DescribeAlidnsRecord\(")],
    "alicloud:cs/autoscalingConfig:AutoscalingConfig": [  # create and update both send CreateAutoscalingConfig
        ("cs:CreateAutoscalingConfig", "resource_alicloud_cs_autoscaling_config.go",
         r"client\.CreateAutoscalingConfig\(tea\.String\(clusterId\)")],
    # Reads only (Resource.get): the actions of the provider's Read. RAM code eflo for eflo-controller
    # (https://api.aliyun.com/document/eflo-controller/2022-12-15/ram), bssapi for BssOpenApi
    # (https://www.alibabacloud.com/help/doc-detail/91860.html).
    "alicloud:eflo/nodeGroup:NodeGroup": [
        ("eflo:ListNodeGroups", "service_alicloud_eflo_v2.go", r"func \(s \*EfloServiceV2\) DescribeEfloNodeGroup\("),
        ("eflo:ListClusterNodes", "service_alicloud_eflo_v2.go",
         r"func \(s \*EfloServiceV2\) DescribeNodeGroupListClusterNodes\(")],
    "alicloud:eflo/node:Node": [
        ("eflo:DescribeNode", "service_alicloud_eflo_v2.go", r"func \(s \*EfloServiceV2\) DescribeEfloNode\("),
        ("eflo:ListTagResources", "service_alicloud_eflo_v2.go",
         r"func \(s \*EfloServiceV2\) DescribeNodeListTagResources\("),
        ("bssapi:QueryAvailableInstances", "service_alicloud_eflo_v2.go",
         r"func \(s \*EfloServiceV2\) DescribeNodeQueryAvailableInstances\("),
        ("eflo:ListClusterNodes", "service_alicloud_eflo_v2.go",
         r"func \(s \*EfloServiceV2\) DescribeNodeListClusterNodes\("),
        ("ecs:DescribeDisks", "service_alicloud_ecs_v2.go", r"func \(s \*EcsServiceV2\) DescribeEcsDataDisksByNodeId\(")],
    # Invokes: the account checks and the cluster credential.
    "alicloud:cs/getKubernetesAddons:getKubernetesAddons": [  # the Lingjun add-on floors, read at preview
        ("cs:ListAddons", "service_alicloud_cs.go", r"s\.client\.ListAddons\(request\)"),
        ("cs:GetClusterAddonInstance", "service_alicloud_cs.go", r"s\.client\.GetClusterAddonInstance\("),
        ("cs:DescribeAddon", "service_alicloud_cs.go", r"s\.client\.DescribeAddon\(&name, req\)")],
    "alicloud:cs/getClusterCredential:getClusterCredential": [
        ("cs:DescribeClusterUserKubeconfig", "data_source_alicloud_cs_cluster_credential.go",
         r"DescribeClusterUserKubeconfigResponseBody")],
    "alicloud:index/getAccount:getAccount": [
        ("sts:GetCallerIdentity", "connectivity/client.go", r"func \(client \*AliyunClient\) GetCallerIdentity\(")],
    "alicloud:index/getZones:getZones": [
        ("ecs:DescribeZones", "data_source_alicloud_zones.go", r"ecs\.CreateDescribeZonesRequest\("),
        ("ecs:DescribeAvailableResource", "data_source_alicloud_zones.go", r"ecsService\.DescribeAvailableResources\(")],
    "alicloud:dns/getAlidnsDomains:getAlidnsDomains": [
        ("alidns:DescribeDomains", "data_source_alicloud_alidns_domains.go", r"alidns\.CreateDescribeDomainsRequest\(")],
    "alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances": [
        ("cr:ListInstance", "service_alicloud_cr_ee.go", r"creeClient\.ListInstance\(request\)"),
        ("cr:ListInstanceEndpoint", "service_alicloud_cr_ee.go", r"creeClient\.ListInstanceEndpoint\(request\)")],
    "alicloud:ram/getRoles:getRoles": [
        ("ram:ListRoles", "data_source_alicloud_ram_roles.go", r'action := "ListRoles"')],
    "alicloud:oss/getBuckets:getBuckets": [
        ("oss:ListBuckets", "data_source_alicloud_oss_buckets.go", r"ossClient\.ListBuckets\(")],
    # The staging cache's marker check (components/workloads/cache.py). The per-object GetObjectDetailedMeta and
    # GetObjectACL that follow only log a failure, so the listing is the one action the check needs.
    "alicloud:oss/getBucketObjects:getBucketObjects": [
        ("oss:ListObjects", "data_source_alicloud_oss_bucket_objects.go", r"bucket\.ListObjects\(options")],
}


def recorded() -> tuple[set[str], set[str]]:
    """The alicloud resource types and invokes of the shipped stacks' offline plans (and of the variants above).
    A type only read (Resource.get) counts only where MANUAL lists its Read's actions: a read needs those, not
    the create/update/delete actions derived for a managed type."""
    import tempfile

    import plan

    types: set[str] = set()
    invokes: set[str] = set()
    import yaml

    def merged(base: dict, over: dict) -> dict:
        return {**base, **{k: merged(base.get(k) or {}, v) if isinstance(v, dict) and v else v for k, v in over.items()}}

    with tempfile.TemporaryDirectory() as tmp:
        doc = yaml.safe_load(plan.stack_file("dev").read_text())
        key = "verl-ack:settings"
        doc["config"][key] = merged(doc["config"][key], NEW_VPC_VARIANT)
        variant = Path(tmp) / "Pulumi.dev-new-vpc.yaml"
        variant.write_text(yaml.safe_dump(doc, sort_keys=False))
        doc = yaml.safe_load(plan.stack_file("dev").read_text())
        doc["config"][key] = merged(doc["config"][key], LINGJUN_READ_VARIANT)
        reads = Path(tmp) / "Pulumi.dev-lingjun-reads.yaml"
        reads.write_text(yaml.safe_dump(doc, sort_keys=False))
        for stack, path in [*((s, plan.stack_file(s)) for s in STACKS), ("dev-new-vpc", variant),
                            ("dev-lingjun-reads", reads)]:
            result = plan.build_plan(path, stack, Path(tmp) / stack)
            types |= {r["type"] for r in result["resources"] if r["type"].startswith("alicloud:")
                      and (not (r["options"] or {}).get("read") or r["type"] in MANUAL)}
            invokes |= {i["token"] for i in result["invokes"] if i["token"].startswith("alicloud:")}
    return types, invokes


def _rpc_actions(text: str) -> list[tuple[str, int]]:
    """(product:API, line) of each `action := "X"` followed by the RPC call that sends it."""
    out = []
    for m in re.finditer(r'action :?= "(\w+)"', text):
        call = re.search(r'Rpc(?:Post|Get)\("(\w+)"', text[m.end():m.end() + 4000])
        if call and call.group(1) in RAM_CODES:
            out.append((f"{RAM_CODES[call.group(1)]}:{m.group(1)}", text.count("\n", 0, m.start()) + 1))
    return out


def _do_actions(text: str) -> list[tuple[str, int]]:
    """(code:API, line) of each `client.Do("Oss", xmlParam("PUT", "2019-05-17", "PutBucketAcl", ...))` call."""
    out = []
    for m in re.finditer(r'\.Do\("(\w+)", \w*[pP]aram\("\w+", "[0-9-]+", "(\w+)"', text):
        if m.group(1) in RAM_CODES:
            out.append((f"{RAM_CODES[m.group(1)]}:{m.group(2)}", text.count("\n", 0, m.start()) + 1))
    return out


def _oss_actions(text: str) -> list[tuple[str, int]]:
    """(oss:API, line) of each OSS Go SDK call: the SDK's Set/CORS/ACL/Tagging spell the RAM actions' Put/Cors/Acl/
    Tags; CreateBucket is PutBucket and IsBucketExist lists buckets (aliyun-oss-go-sdk oss/client.go)."""
    out = []
    for m in re.finditer(r"ossClient\.([A-Z]\w+)\(", text):
        name = m.group(1)
        if name == "Bucket":
            continue
        name = {"CreateBucket": "PutBucket", "IsBucketExist": "ListBuckets"}.get(name, name)
        name = re.sub(r"^Set", "Put", name).replace("CORS", "Cors").replace("ACL", "Acl").replace("Tagging", "Tags")
        out.append((f"oss:{name}", text.count("\n", 0, m.start()) + 1))
    return out


def derive(tf_src: Path, commit: str) -> dict:
    src = {str(p.relative_to(tf_src / "alicloud")): p.read_text() for p in (tf_src / "alicloud").rglob("*.go")
           if not p.name.endswith("_test.go")}
    schema = json.loads(SCHEMA.read_text())["resources"]
    types, invokes = recorded()
    by_type: dict[str, list[dict]] = {}

    def cite(name: str, line: int) -> str:
        return f"aliyun/terraform-provider-alicloud@{commit[:7]}:alicloud/{name}:{line}"

    for t in sorted(types | invokes):
        entries: dict[str, str] = {}
        if t in schema:
            factory = schema[t]["factory"]
            [name] = [n for n, s in src.items() if re.search(rf"func {factory}\(\)", s)]
            for action, line in _rpc_actions(src[name]) + _oss_actions(src[name]) + _do_actions(src[name]):
                entries.setdefault(action, cite(name, line))
            for fn in sorted(set(re.findall(r"Service\w*\.(Describe\w+)\(", src[name]))):
                for sname, s in src.items():
                    m = re.search(rf"\nfunc \(\w+ \*\w+\) {fn}\(", s)
                    if sname.startswith("service_") and m:
                        body = s[m.start():s.find("\nfunc ", m.end())]
                        first = s.count("\n", 0, m.start()) + 1
                        for action, line in _rpc_actions(body) + _oss_actions(body) + _do_actions(body):
                            entries.setdefault(action, cite(sname, first + line - 1))
        for action, name, needle in MANUAL.get(t, []):
            m = re.search(needle, src.get(name, ""))
            if not m:
                raise SystemExit(f"{t}: {action}: no line matching {needle!r} in alicloud/{name}")
            entries.setdefault(action, cite(name, src[name].count("\n", 0, m.start()) + 1))
        if not entries:
            raise SystemExit(f"{t}: no RAM action found; add it to MANUAL with its source")
        by_type[t] = [{"action": a, "source": s} for a, s in sorted(entries.items())]
    actions = sorted({e["action"] for es in by_type.values() for e in es})
    return {
        "about": "RAM policy of the identity that runs `pulumi preview`/`up` for the shipped stacks; generated by "
                 "tools/ram_policy.py from the resource types and invokes they record (docs/real-cloud.md).",
        "provider_commit": commit,
        "policy": {"Version": "1", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]},
        "by_type": by_type,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tf-src", type=Path, required=True, help="a clone of aliyun/terraform-provider-alicloud")
    args = ap.parse_args(argv)
    commit = json.loads(SCHEMA.read_text())["commit"]
    work = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run(f"git --git-dir={args.tf_src / '.git' if (args.tf_src / '.git').exists() else args.tf_src} "
                   f"archive {commit} alicloud | tar -x -C {work}", shell=True, check=True)
    OUT.write_text(json.dumps(derive(work, commit), indent=2) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
