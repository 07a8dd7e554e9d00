"""Account checks at preview time: the program reads the account through the provider's data sources and refuses
a stack that cannot succeed; offline the fake account (offline/fakes.py) answers, and each refusal is proven by
taking the thing away from it."""

from __future__ import annotations

import os

import pytest
import yaml
from pulumi import RunError

from components.cloud import account_checks
from components.config import STACKS_DIR, SettingsError
from offline import fakes
from offline import plan as offline_plan
from offline.engine import run_program
from tests.conftest import REAL_DEV_VALUES


@pytest.fixture
def account(monkeypatch) -> fakes.FakeAccount:
    fresh = fakes.FakeAccount()
    monkeypatch.setattr(fakes, "ACCOUNT", fresh)
    return fresh


def refusal(stack: str, tmp_path, *, offline: bool = True, path=None) -> list:
    config, secret_keys, _ = offline_plan.stack_config(path or STACKS_DIR / f"Pulumi.{stack}.yaml")
    with pytest.raises(SettingsError) as info:
        run_program(offline_plan.REPO / "__main__.py", config, secret_keys, project=offline_plan.PROJECT, stack=stack,
                    offline_plan=offline)
    return info.value.problems


def test_the_shipped_stacks_pass_the_account_checks_of_the_fake_account_and_the_reads_are_recorded(tmp_path, account):
    for stack in ("dev", "existing-ecs", "dev-platform"):
        result = offline_plan.build_plan(STACKS_DIR / f"Pulumi.{stack}.yaml", stack, tmp_path / stack)
        tokens = {i["token"] for i in result["invokes"]}
        assert "alicloud:index/getZones:getZones" in tokens and "alicloud:ram/getRoles:getRoles" in tokens


def test_a_zone_the_account_cannot_use_fails_the_preview_naming_the_zone_and_the_region_zones(tmp_path, account):
    account.zones.remove("ap-southeast-1b")
    [problem] = refusal("dev", tmp_path)
    assert problem.field == "zones[1]" and "ap-southeast-1b is not a zone the account can use" in problem.message
    assert "ap-southeast-1a" in problem.message


def test_an_ecs_gpu_type_sold_out_in_the_pool_zone_fails_the_preview(tmp_path, account):
    account.sold_out["ecs.gn7i-c16g1.4xlarge"] = ["cn-hangzhou-h"]
    [problem] = refusal("existing-ecs", tmp_path)
    assert problem.field == "gpu_pool.ecs.instance_types" and "sold in gpu_pool.zone cn-hangzhou-h" in problem.message


def test_a_dns_zone_not_hosted_in_alibaba_cloud_dns_fails_the_preview_and_names_the_open_source_way_out(
        tmp_path, account):
    account.dns_domains.clear()
    [problem] = refusal("dev", tmp_path)
    assert problem.field == "sandbox.dns_zone" and "Alidns console" in problem.message
    assert "sandbox.manager: open-source" in problem.message


def test_an_acr_instance_the_account_lacks_fails_the_platform_preview(tmp_path, account):
    account.acr_instances.clear()
    [problem] = refusal("dev-platform", tmp_path)
    assert problem.field == "image.enterprise_instance_id" and "ACR console" in problem.message


def test_a_registry_host_that_is_not_the_instance_domain_fails_the_platform_preview(tmp_path, account):
    account.acr_instances["cri-devplatform00000"] = ["other-registry-vpc.ap-southeast-1.cr.aliyuncs.com"]
    [problem] = refusal("dev-platform", tmp_path)
    assert problem.field == "image.registry_host"
    assert "other-registry-vpc.ap-southeast-1.cr.aliyuncs.com" in problem.message


def test_ack_service_roles_not_authorised_fail_the_preview_of_a_new_cluster(tmp_path, account):
    account.ram_roles.remove("AliyunCSManagedKubernetesRole")
    [problem] = refusal("dev", tmp_path)
    assert problem.field == "cluster" and "AliyunCSManagedKubernetesRole" in problem.message


def test_the_autoscaler_role_is_required_where_an_ecs_gpu_pool_is_created(tmp_path, account):
    account.ram_roles.remove("AliyunCSManagedAutoScalerRole")
    [problem] = refusal("existing-ecs", tmp_path)
    assert "AliyunCSManagedAutoScalerRole" in problem.message
    account.ram_roles.append("AliyunCSManagedAutoScalerRole")
    account.ram_roles.remove("AliyunCSManagedKubernetesRole")  # an existing cluster needs none of the cluster roles
    offline_plan.build_plan(STACKS_DIR / "Pulumi.existing-ecs.yaml", "existing-ecs", tmp_path / "ecs")


def test_an_existing_bucket_the_account_lacks_fails_the_preview(tmp_path, account):
    account.buckets.remove("my-existing-verl-bucket")
    [problem] = refusal("existing-ecs", tmp_path)
    assert problem.field == "storage.bucket_name" and "not a bucket of this account" in problem.message


def test_every_problem_the_account_shows_is_reported_at_once(tmp_path, account):
    account.zones.remove("ap-southeast-1b")
    account.dns_domains.clear()
    assert [p.field for p in refusal("dev", tmp_path)] == ["zones[1]", "sandbox.dns_zone"]


def test_a_real_preview_refuses_each_placeholder_naming_the_field_and_where_the_value_is(tmp_path, account):
    problems = refusal("dev-platform", tmp_path, offline=False)
    fields = [p.field for p in problems]
    assert fields == ["gpu_pool.lingjun.eflo_cluster_id", "gpu_pool.lingjun.eflo_node_group_id",
                      "gpu_pool.lingjun.node_ids[0]", "gpu_pool.lingjun.security_group_id", "cluster.network.vpc_id",
                      "cluster.network.node_vswitch_ids[0]",
                      "cluster.network.node_vswitch_ids[1]", "cluster.network.pod_vswitch_ids[0]",
                      "cluster.network.pod_vswitch_ids[1]", "image.enterprise_instance_id", "image.digest",
                      "sandbox.domain", "sandbox.dns_zone"]
    digest = problems[fields.index("image.digest")]
    assert "shipped placeholder" in digest.message and "image workflow" in digest.message
    assert "stacks/Pulumi.dev-platform.yaml" in digest.message


def test_a_stack_with_real_values_passes_a_real_preview(tmp_path, account):
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    s = doc["config"]["verl-ack:settings"]
    s["gpu_pool"]["lingjun"].update(eflo_cluster_id="i118191731733789436", eflo_node_group_id="i127062918265143",
                                    node_ids=["e01-cn-fw7a2b3c4d5"], security_group_id="sg-t4n6b2k9m3q7w1e5r8y")
    s["cluster"]["network"].update(vpc_id="vpc-t4n8x2k3m9q1w5e7r6y4a", node_vswitch_ids=["vsw-t4n1a", "vsw-t4n1b"],
                                   pod_vswitch_ids=["vsw-t4p1a", "vsw-t4p1b"])
    s["image"]["enterprise_instance_id"] = "cri-k2m8q4w7e1r5t9y3"
    account.acr_instances["cri-k2m8q4w7e1r5t9y3"] = [s["image"]["registry_host"]]
    s["sandbox"] = {"domain": "sandbox.team.dev", "dns_zone": "team.dev"}
    account.dns_domains.append("team.dev")
    path = tmp_path / "Pulumi.real.yaml"
    path.write_text(yaml.safe_dump(doc))
    config, secret_keys, _ = offline_plan.stack_config(path)
    run_program(offline_plan.REPO / "__main__.py", config, secret_keys, project=offline_plan.PROJECT, stack="real",
                offline_plan=False)


def test_the_offline_flag_alone_does_not_make_a_run_offline(monkeypatch):
    # A real engine's monitor is a gRPC stub, not the mocks' MockMonitor: a stray variable cannot switch the
    # placeholder refusal off.
    monkeypatch.setenv(account_checks.OFFLINE_PLAN_ENV, "1")
    monkeypatch.setattr(account_checks.psettings, "get_monitor", lambda: object())
    assert not account_checks.offline_plan()


def test_the_offline_engine_leaves_the_environment_as_it_found_it(tmp_path, account):
    offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", tmp_path / "dev")
    assert account_checks.OFFLINE_PLAN_ENV not in os.environ


def test_an_experiment_whose_platform_stack_names_another_organization_is_refused(tmp_path, account):
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev-grpo.yaml").read_text())
    doc["config"]["verl-ack:settings"]["platform_stack"] = "someone-else/verl-ack/dev-platform"
    path = tmp_path / "Pulumi.grpo.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SettingsError) as info:
        offline_plan.build_plan(path, "grpo", tmp_path / "o")
    [problem] = info.value.problems
    assert problem.field == "platform_stack" and "names the organization 'someone-else'" in problem.message


def real_lingjun_stack(tmp_path) -> tuple[dict, list]:
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"]["verl-ack:settings"]["gpu_pool"]["lingjun"].update(REAL_DEV_VALUES["gpu_pool"]["lingjun"])
    path = tmp_path / "Pulumi.real.yaml"
    path.write_text(yaml.safe_dump(doc))
    config, secret_keys, _ = offline_plan.stack_config(path)
    return config, secret_keys


def run_real(tmp_path):
    config, secret_keys = real_lingjun_stack(tmp_path)
    return run_program(offline_plan.REPO / "__main__.py", config, secret_keys, project=offline_plan.PROJECT, stack="real")


def test_real_lingjun_ids_are_read_from_the_account_under_the_pool_with_its_provider_and_pass(tmp_path, account):
    rec = run_real(tmp_path)
    group = rec.get("alicloud:eflo/nodeGroup:NodeGroup", "gpu_pool.lingjun.eflo_cluster_id:eflo_node_group_id")
    node = rec.get("alicloud:eflo/node:Node", "gpu_pool.lingjun.node_ids[0]")
    assert group.options["read"] and group.options["id"] == "i118191731733789436:i127062918265143"
    assert node.options["read"] and node.options["id"] == "e01-cn-fw7a2b3c4d5"
    pools = rec.get("verl-ack:nodepools:NodePools", "pools")
    assert group.parent == node.parent == pools.urn
    assert group.provider.startswith(rec.get("pulumi:providers:alicloud", "alicloud").urn)


def test_the_shipped_placeholder_lingjun_ids_are_not_read_in_the_offline_plan(tmp_path, account):
    result = offline_plan.build_plan(STACKS_DIR / "Pulumi.dev.yaml", "dev", tmp_path / "dev")
    assert not [r for r in result["resources"] if r["type"].startswith("alicloud:eflo/")]


def test_a_lingjun_node_the_account_lacks_fails_the_preview_at_its_read(tmp_path, account):
    account.lingjun_nodes.clear()
    with pytest.raises(RuntimeError) as info:
        run_real(tmp_path)
    # The engine fails a read of a missing id at the read, with its generic message, before the program's checks run:
    # the read's name is the setting that holds the id.
    assert "(gpu_pool.lingjun.node_ids[0]): resource 'e01-cn-fw7a2b3c4d5' does not exist" in str(info.value)


def test_a_lingjun_node_group_the_account_lacks_fails_the_preview_at_a_read_named_after_both_ids(tmp_path, account):
    account.lingjun_node_groups.clear()
    with pytest.raises(RuntimeError) as info:
        run_real(tmp_path)
    assert ("(gpu_pool.lingjun.eflo_cluster_id:eflo_node_group_id): resource "
            "'i118191731733789436:i127062918265143' does not exist") in str(info.value)


def test_a_lingjun_node_of_another_node_group_fails_the_preview_naming_the_node_id_field(tmp_path, account):
    account.lingjun_nodes["e01-cn-fw7a2b3c4d5"] = ("i118191731733789436", "i127000000000001", "ap-southeast-1a")
    with pytest.raises(RunError) as info:
        run_real(tmp_path)
    assert str(info.value).startswith("gpu_pool.lingjun.node_ids[0]: node e01-cn-fw7a2b3c4d5 belongs to node group "
                                      "i127000000000001, not gpu_pool.lingjun.eflo_node_group_id i127062918265143")


def test_lingjun_machines_of_another_cluster_or_zone_are_refused_naming_each_field(tmp_path, account):
    account.lingjun_nodes["e01-cn-fw7a2b3c4d5"] = ("i118191700000000000", "i127062918265143", "ap-southeast-1b")
    account.lingjun_node_groups["i118191731733789436:i127062918265143"] = "ap-southeast-1b"
    with pytest.raises(RunError) as info:
        run_real(tmp_path)
    lines = str(info.value).splitlines()
    assert [line.split(":")[0] for line in lines] == ["gpu_pool.zone", "gpu_pool.lingjun.node_ids[0]",
                                                      "gpu_pool.lingjun.node_ids[0]"]
    assert "Lingjun cluster i118191700000000000, not gpu_pool.lingjun.eflo_cluster_id" in lines[1]
    assert "in zone ap-southeast-1b, not gpu_pool.zone ap-southeast-1a" in lines[2]
