"""The provider's call graph (tests/data/alicloud_provider_calls.json, from tools/provider_calls.py) reaches the API
actions terraform-provider-alicloud sends on the way from a type's Create/Read/Update/Delete through service files,
helpers and SDK clients, and tells the calls every run makes from those only a branch makes.

The walker is held to small Go programs here (it has no Go parser: a wrong brace, a missed receiver type or a call
in a retry closure counted as a branch would silently drop a permission), the recorded file to the calls the
provider makes at the pinned commit, and, where the mirrors of the provider and of the cs SDK are present (not in
CI), the recorded file to a fresh walk of the pinned source.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tools import provider_calls as pc
from tools.gotext import mask

CALLS = json.loads(pc.OUT.read_text())
# git dirs of the two sources, where a checkout has them (CI does not: the recorded file stands in)
TF_MIRROR = Path(os.environ.get("VERL_ACK_TF_PROVIDER_GIT", "/work/.mirror/aliyun+terraform-provider-alicloud/repo"))
CS_SDK_MIRROR = Path(os.environ.get("VERL_ACK_CS_SDK_GIT", "/work/.mirror/alibabacloud-go+cs-20151215/repo"))

GO = {
    "service_alicloud_demo.go": '''package alicloud

type DemoService struct {
	client *connectivity.AliyunClient
}

func (s *DemoService) DescribeDemo(id string) (map[string]interface{}, error) {
	client := s.client
	action := "GetDemo" // a comment with a brace {
	err := retry.Retry(5*time.Minute, func() *retry.RetryError {
		response, err = client.RpcPost("Vpc", "2016-04-28", action, nil, request, true)
		return nil
	})
	return response, err
}

func (s *DemoService) SetResourceTags(d *schema.ResourceData) error {
	if d.HasChange("tags") {
		client := s.client
		action := "UnTagResources"
		if len(removed) > 0 {
			_, err := client.RpcPost("Vpc", "2016-04-28", action, nil, nil, true)
		}
		action = "TagResources"
		if len(added) > 0 {
			_, err := client.RpcPost("Vpc", "2016-04-28", action, nil, nil, true)
		}
	}
	return nil
}
''',
    "resource_alicloud_demo.go": '''package alicloud

import (
	roaCS "github.com/alibabacloud-go/cs-20151215/v8/client"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
)

func resourceDemoCreate(d *schema.ResourceData, meta interface{}) error {
	client := meta.(*connectivity.AliyunClient)
	text := "}}} not a brace"
	if _, err := client.RpcPost("Vpc", "2016-04-28", "CreateDemo", nil, nil, false); err != nil {
		return err
	}
	return resourceDemoUpdate(d, meta)
}

func resourceDemoRead(d *schema.ResourceData, meta interface{}) error {
	demo := DemoService{meta.(*connectivity.AliyunClient)}
	object, err := demo.DescribeDemo(d.Id())
	cs, _ := meta.(*connectivity.AliyunClient).NewRoaCsClient()
	cs.CheckDemoEnable(tea.String(d.Id()))
	return nil
}

func resourceDemoUpdate(d *schema.ResourceData, meta interface{}) error {
	demo := DemoService{meta.(*connectivity.AliyunClient)}
	if err := demo.SetResourceTags(d); err != nil {
		return err
	}
	resizeDemo(d, meta)
	return resourceDemoRead(d, meta)
}

func resizeDemo(d *schema.ResourceData, meta interface{}) error {
	if !d.HasChange("size") {
		return nil
	}
	path := fmt.Sprintf("/clusters/%s/demos", d.Id())
	client := meta.(*connectivity.AliyunClient)
	client.RoaPut("CS", "2015-12-15", path, nil, nil, nil, true)
	return nil
}

func resourceDemoDelete(d *schema.ResourceData, meta interface{}) error {
	client := meta.(*connectivity.AliyunClient)
	request := ecs.CreateRevokeRequest()
	request.ApiName = "RevokeSecurityGroup"
	client.WithEcsClient(func(ecsClient *ecs.Client) (interface{}, error) {
		return ecsClient.ProcessCommonRequest(request)
	})
	return withRetries(d, meta, releaseDemo)
}

func releaseDemo(d *schema.ResourceData, meta interface{}) error {
	client := meta.(*connectivity.AliyunClient)
	_, err := client.RpcPost("Vpc", "2016-04-28", "ReleaseDemo", nil, nil, false)
	return err
}
''',
    "connectivity/client.go": '''package connectivity

import (
	roaCS "github.com/alibabacloud-go/cs-20151215/v8/client"
)

type AliyunClient struct {
	RegionId string
}

func (client *AliyunClient) NewRoaCsClient() (*roaCS.Client, error) {
	return nil, nil
}

func (client *AliyunClient) RpcPost(apiProductCode string, apiVersion string, apiName string) (map[string]interface{}, error) {
	return nil, nil
}
''',
}
SDK = '''
	params := &openapiutil.Params{
		Action:      dara.String("PutDemo"),
		Version:     dara.String("2015-12-15"),
		Protocol:    dara.String("HTTPS"),
		Pathname:    dara.String("/clusters/" + dara.PercentEncode(dara.StringValue(ClusterId)) + "/demos"),
		Method:      dara.String("PUT"),
'''


@pytest.fixture(scope="module")
def demo() -> pc.Walker:
    return pc.Walker(pc.parse(GO), pc.roa_apis_from_sdk(SDK, "cs"))


def test_masking_keeps_offsets_and_hides_braces_in_strings_and_comments():
    text = GO["resource_alicloud_demo.go"]
    masked = mask(text)
    assert len(masked) == len(text) and masked.count("\n") == text.count("\n")
    assert "}}} not a brace" not in masked and masked.count("{") == masked.count("}")


def test_the_walk_follows_service_methods_and_names_the_action_last_assigned_before_the_call(demo):
    read = demo.walk("resourceDemoRead")
    assert read["vpc:GetDemo"]["path"] == ["resourceDemoRead", "DemoService.DescribeDemo"]
    assert read["vpc:GetDemo"]["always"], "a call inside a retry closure is on every run"
    update = demo.walk("resourceDemoUpdate")
    assert {"vpc:TagResources", "vpc:UnTagResources"} <= set(update)


def test_a_call_under_a_condition_is_a_branch_and_the_conditions_are_recorded(demo):
    tag = demo.walk("resourceDemoUpdate")["vpc:TagResources"]
    assert not tag["always"]
    assert tag["when"] == ['DemoService.SetResourceTags: d.HasChange("tags")',
                           "DemoService.SetResourceTags: len(added) > 0"]


def test_a_create_takes_the_branches_of_the_update_it_ends_in_and_a_call_in_an_if_header_runs_always(demo):
    create = demo.walk("resourceDemoCreate")
    assert create["vpc:CreateDemo"]["always"]
    assert create["vpc:TagResources"]["path"][:2] == ["resourceDemoCreate", "resourceDemoUpdate"]
    assert create["vpc:GetDemo"]["always"], "the Read the Update always returns through"


def test_a_guard_return_on_the_resource_data_makes_the_rest_a_branch(demo):
    put = demo.walk("resourceDemoUpdate")["cs:PutDemo"]
    assert not put["always"] and put["when"] == ['resizeDemo: not (!d.HasChange("size"))']


def test_sdk_clients_roa_paths_and_common_requests_give_their_apis(demo):
    assert demo.walk("resourceDemoRead")["cs:CheckDemoEnable"]["always"]  # a *roaCS.Client method is its API
    assert "cs:PutDemo" in demo.walk("resourceDemoUpdate")  # PUT /clusters/{}/demos, named by the SDK
    assert set(demo.walk("resourceDemoDelete")) == {"ecs:RevokeSecurityGroup", "vpc:ReleaseDemo"}  # request.ApiName


def test_a_function_passed_as_a_value_is_followed(demo):
    assert demo.walk("resourceDemoDelete")["vpc:ReleaseDemo"]["path"] == ["resourceDemoDelete", "releaseDemo"]


# -- the recorded graph: calls the provider makes at the pinned commit -------------------------------------------
def hit(token: str, phase: str, action: str) -> dict:
    actions = CALLS["types"][token][phase]["actions"]
    assert action in actions, f"{token} {phase} does not reach {action}: {sorted(actions)}"
    return actions[action]


CLUSTER = "alicloud:cs/managedKubernetes:ManagedKubernetes"


@pytest.mark.parametrize("phase", ["create", "read", "update"])
@pytest.mark.parametrize("action", ["cs:CheckControlPlaneLogEnable", "cs:GetClusterAuditProject",
                                    "cs:DescribeClusterResources", "cs:DescribeClusterDetail",
                                    "cs:DescribeClusterUserKubeconfig"])
def test_every_cluster_read_asks_the_control_plane_log_and_audit_project(phase, action):
    # resource_alicloud_cs_managed_kubernetes.go ends its Read with checkControlPlaneLogEnable and
    # getClusterAuditProject and returns their errors: a policy without them fails every up of a cluster.
    assert hit(CLUSTER, phase, action)["always"]


@pytest.mark.parametrize("token,action", [
    ("alicloud:alb/loadBalancer:LoadBalancer", "alb:TagResources"),
    ("alicloud:vpc/network:Network", "vpc:TagResources"),
    ("alicloud:vpc/switch:Switch", "vpc:TagResources"),
    ("alicloud:vpc/natGateway:NatGateway", "vpc:TagResources"),
    ("alicloud:ecs/eipAddress:EipAddress", "vpc:TagResources"),
])
def test_the_create_of_a_tagged_resource_tags_it_through_its_update(token, action):
    h = hit(token, "create", action)
    assert "Update" in h["path"][1] and any('d.HasChange("tags")' in c for c in h["when"]), h


@pytest.mark.parametrize("token,phase,action,always", [
    ("alicloud:ecs/securityGroupRule:SecurityGroupRule", "create", "ecs:DescribeSecurityGroupAttribute", True),
    ("alicloud:ecs/securityGroupRule:SecurityGroupRule", "read", "ecs:DescribeSecurityGroupAttribute", True),
    ("alicloud:ecs/securityGroupRule:SecurityGroupRule", "delete", "ecs:DescribeSecurityGroupAttribute", True),
    ("alicloud:ecs/securityGroupRule:SecurityGroupRule", "delete", "ecs:RevokeSecurityGroup", False),
    ("alicloud:vpc/natGateway:NatGateway", "read", "vpc:ListTagResources", True),
    ("alicloud:alb/loadBalancer:LoadBalancer", "delete", "alb:ListAsynJobs", True),
    ("alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances", "read", "cr:ListTagResources", False),
    ("alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances", "read", "cr:GetInstanceUsage", False),
    ("alicloud:oss/bucket:Bucket", "delete", "oss:ListObjectVersions", False),
    ("alicloud:oss/bucket:Bucket", "delete", "oss:DeleteObjectVersion", False),
    (CLUSTER, "update", "cs:ModifyClusterTags", False),
    ("alicloud:cs/kubernetesAddon:KubernetesAddon", "update", "cs:DescribeClusterAddonsUpgradeStatus", False),
    ("alicloud:ecs/ecsDisk:EcsDisk", "update", "ecs:TagResources", False),
    ("alicloud:ram/role:Role", "update", "ram:TagResources", False),
    ("alicloud:ram/role:Role", "update", "ram:UntagResources", False),
    ("alicloud:ram/policy:Policy", "update", "ram:TagResources", False),
    ("alicloud:oss/bucket:Bucket", "update", "oss:PutBucketTagging", False),  # RAM's name, not the API's PutBucketTags
    ("alicloud:oss/bucket:Bucket", "read", "oss:GetBucketTransferAcceleration", True),
])
def test_the_provider_reaches_the_calls_a_policy_once_missed(token, phase, action, always):
    assert hit(token, phase, action)["always"] is always


def test_force_destroy_of_a_non_empty_bucket_is_the_branch_that_deletes_versions():
    h = hit("alicloud:oss/bucket:Bucket", "delete", "oss:DeleteObjectVersion")
    assert any("BucketNotEmpty" in c for c in h["when"]) and any("force_destroy" in c for c in h["when"])


def test_every_action_is_cited_at_a_provider_line_and_every_path_starts_at_its_phase_entry():
    for token, phases in CALLS["types"].items():
        for phase, walk in phases.items():
            for action, h in walk["actions"].items():
                assert h["path"][0] == walk["entry"], (token, phase, action)
                assert h["always"] == (not h["when"]), (token, phase, action)
                assert h["source"].startswith("alicloud/") and h["source"].rsplit(":", 1)[1].isdigit()


@pytest.mark.skipif(not (TF_MIRROR.is_dir() and CS_SDK_MIRROR.is_dir()),
                    reason="needs git dirs of the provider and the cs SDK (VERL_ACK_TF_PROVIDER_GIT, VERL_ACK_CS_SDK_GIT)")
def test_the_recorded_call_graph_is_a_fresh_walk_of_the_pinned_provider_source(tmp_path):
    commit = CALLS["provider_commit"]
    pc._checkout(TF_MIRROR, commit, "alicloud", tmp_path)
    sdk = subprocess.run(["git", f"--git-dir={CS_SDK_MIRROR}", "show", f"{CALLS['cs_sdk_commit']}:client/client.go"],
                         capture_output=True, text=True, check=True).stdout
    fresh, _ = pc.derive(tmp_path, sdk)
    assert json.loads(json.dumps(fresh, sort_keys=True)) == CALLS["types"], \
        "stale: run tools/provider_calls.py (docs/facts-provider.md)"
