"""Day 2: what the provider's Read stores equals what the program sends, so the second `pulumi preview` of a
stack shows nothing (issue 19 items 1-3)."""

from __future__ import annotations

import asyncio
import json

import pulumi
import pytest

from components.cloud.addon_config import addon_config, go_json
from components.cloud.addons import sandbox_manager_config_json
from tests.components.cloud.test_common import settings_of
from tests.conftest import STACKS, record

ADDON = "alicloud:cs/kubernetesAddon:KubernetesAddon"


def test_go_json_is_compact_sorted_and_escapes_html_characters_as_go_does():
    # Go: json.Marshal(map[string]interface{}{"b": "<a & b>", "a": map[string]interface{}{"z": true, "y": 1}})
    assert go_json({"b": "<a & b>", "a": {"z": True, "y": 1}}) == '{"a":{"y":1,"z":true},"b":"\\u003ca \\u0026 b\\u003e"}'
    assert go_json({"k": "Zürich \u2028"}) == '{"k":"Zürich \\u2028"}', "UTF-8 kept, U+2028 escaped"
    assert go_json({"list": [False, None, "x"]}) == '{"list":[false,null,"x"]}'


def test_a_config_number_go_would_write_differently_is_refused_naming_its_path():
    with pytest.raises(ValueError, match=r"config\.a\.b: a non-integer number"):
        go_json({"a": {"b": 0.5}})


@pytest.mark.parametrize("stack", STACKS)
def test_every_addon_config_is_already_in_the_form_the_providers_read_stores(stack):
    rec = record(stack)
    for reg in rec.by_type(ADDON):
        config = reg.inputs.get("config")
        if config in (None, "[secret]"):
            continue
        assert config == go_json(json.loads(config)), f"{reg.urn}: a ~config diff on every later preview"


def test_the_sandbox_manager_config_is_sent_in_the_stored_form_and_stays_secret():
    s = settings_of("dev")

    async def sent():
        out = sandbox_manager_config_json(s, pulumi.Output.secret("k&<y>"))
        return await out.future(), await out.is_secret()

    config, secret = asyncio.run(sent())
    assert config == go_json(json.loads(config)) and " " not in config
    assert "\\u0026" in config, "Go escapes & inside the key too"
    assert secret


def test_a_plain_addon_config_is_a_plain_string_not_an_output():
    assert addon_config({"a": 1}) == '{"a":1}'
    assert addon_config(None) is None


def test_the_alb_is_created_with_the_cost_tags_but_never_strips_the_tags_the_alb_controller_adds():
    alb = record("dev").get("alicloud:alb/loadBalancer:LoadBalancer", "ingress-alb")
    assert {"project", "stack"} <= set(alb.inputs["tags"]), "tags still sent at create (policy pack cost-tags)"
    assert "tags" in alb.options["ignore_changes"]


@pytest.mark.parametrize("stack", ["dev", "dev-platform"])
def test_the_bucket_never_deletes_the_https_only_policy_or_the_access_log_its_separate_resources_own(stack):
    rec = record(stack)
    bucket = rec.get("alicloud:oss/bucket:Bucket", "storage-bucket")
    assert {"policy", "logging"} <= set(bucket.options["ignore_changes"])
    assert "policy" not in bucket.inputs and "logging" not in bucket.inputs
    rec.get("alicloud:oss/bucketPolicy:BucketPolicy", "storage-policy")
    rec.get("alicloud:oss/bucketLogging:BucketLogging", "storage-logging")


# ------------------------------------------------------------------------------------------------ add-on versions
def test_a_version_pin_on_an_ack_managed_addon_is_refused_naming_the_field_and_the_fix():
    from components.config import SettingsError

    for role in ("csi_provisioner", "terway_controlplane", "monitoring"):
        with pytest.raises(SettingsError, match=rf"versions\.addons.*{role}.*managed and upgraded by ACK.*remove the "
                                                "version"):
            settings_of("dev", {"versions": {"addons": {role: {"version": "v1.33.1"}}}})


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_pins_an_addon_version_so_nothing_fights_acks_upgrades(stack):
    for reg in record(stack).by_type(ADDON):
        assert "version" not in reg.inputs, f"{reg.urn}: an empty version must not be sent (no diff)"


def test_the_lingjun_minimum_versions_are_checked_against_the_live_addons_without_a_pin():
    from components.cloud.addons import lingjun_floor_problems

    s = settings_of("dev")
    assert s.gpu_pool.kind == "lingjun"
    old = [{"name": "terway-eniip", "current_version": "v1.15.0"}, {"name": "csi-plugin", "current_version": "v1.33.0"},
           {"name": "ack-pod-identity-webhook", "current_version": ""}]
    [problem] = lingjun_floor_problems(s, old)
    assert problem.startswith("versions.addons.terway: the cluster runs terway-eniip v1.15.0, below v1.16.8")
    assert lingjun_floor_problems(settings_of("existing-ecs"), old) == [], "ECS GPU pools have no floors"
    invokes = [i for i in record("dev").invokes if i["token"] == "alicloud:cs/getKubernetesAddons:getKubernetesAddons"]
    assert invokes, "the live versions are read at preview"


def test_a_live_addon_below_the_lingjun_floor_fails_the_preview(monkeypatch):
    from offline import fakes
    from tests.components.cloud.test_day2_create_only import preview

    real = fakes.invoke

    def live(token, args):
        if token == "alicloud:cs/getKubernetesAddons:getKubernetesAddons":
            return {"id": "c", "clusterId": "c", "ids": [], "names": [], "addons": [
                {"name": "terway-eniip", "currentVersion": "v1.15.0", "currentConfig": "{}", "nextVersion": "",
                 "required": True, "supportedActions": []}]}
        return real(token, args)

    monkeypatch.setattr(fakes, "invoke", live)
    with pytest.raises(Exception, match=r"terway-eniip v1\.15\.0, below v1\.16\.8"):
        preview("dev")
