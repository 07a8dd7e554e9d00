"""docs/ram-policy.json, the deploying identity's RAM policy, covers what the shipped stacks create and read: every
alicloud resource type and invoke they record has its actions, each with the provider line that calls it."""

from __future__ import annotations

import json
import re

from tools.ram_policy import OUT, SCHEMA, recorded

POLICY = json.loads(OUT.read_text())


def test_every_alicloud_type_and_invoke_the_stacks_record_has_ram_actions():
    types, invokes = recorded()
    missing = sorted((types | invokes) - set(POLICY["by_type"]))
    assert not missing, f"no RAM actions for {missing}: run tools/ram_policy.py (docs/real-cloud.md)"


def test_the_policy_grants_exactly_the_actions_of_its_types():
    granted = POLICY["policy"]["Statement"][0]["Action"]
    assert granted == sorted({e["action"] for es in POLICY["by_type"].values() for e in es})


def test_every_action_names_the_provider_line_at_the_pinned_commit():
    commit = json.loads(SCHEMA.read_text())["commit"]
    assert POLICY["provider_commit"] == commit
    for entries in POLICY["by_type"].values():
        for e in entries:
            assert re.fullmatch(r"[a-z-]+:[A-Za-z0-9]+", e["action"]), e
            assert re.fullmatch(rf"aliyun/terraform-provider-alicloud@{commit[:7]}:alicloud/[a-z0-9_/]+\.go:[0-9]+",
                                e["source"]), e
