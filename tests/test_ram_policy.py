"""docs/ram-policy.json, the deploying identity's RAM policy, covers the whole create -> read -> update -> destroy
cycle of what the shipped stacks manage, and the Read of what they only read or invoke: every action the provider
reaches from those (tests/data/alicloud_provider_calls.json, a walk of its pinned source) is granted, each filed
under the type that calls it, with the provider line, the call path and whether every run takes it."""

from __future__ import annotations

import json
import re

import pytest

from tools.ram_policy import CALLS, DOC, OUT, PHASES, SCHEMA, derive, purpose, recorded, render_doc

POLICY = json.loads(OUT.read_text())
GRAPH = json.loads(CALLS.read_text())


@pytest.fixture(scope="module")
def stacks():
    return recorded()


def test_every_alicloud_type_and_invoke_the_stacks_record_has_ram_actions(stacks):
    managed, reads, invokes = stacks
    missing = sorted((managed | reads | invokes) - set(POLICY["by_type"]))
    assert not missing, f"no RAM actions for {missing}: run tools/ram_policy.py (docs/real-cloud.md)"


def test_the_policy_grants_every_action_the_provider_reaches_in_each_stacks_cycle(stacks):
    # Read from the recorded call graph directly, not through the generator: a policy that lacks an action the
    # pinned source reaches (cs:CheckControlPlaneLogEnable once) fails here, naming the type, phase and path.
    managed, reads, invokes = stacks
    granted = set(POLICY["policy"]["Statement"][0]["Action"])
    lacking = []
    for t in sorted(managed | reads | invokes):
        for phase in PHASES if t in managed else ("read",):
            for action, hit in GRAPH["types"][t].get(phase, {}).get("actions", {}).items():
                filed = {e["action"] for e in POLICY["by_type"].get(t, [])}
                if action not in granted or action not in filed:
                    lacking.append(f"{t} {phase}: {action} via {' > '.join(hit['path'])}")
    assert not lacking, "the provider reaches actions the policy lacks (run tools/ram_policy.py):\n" + \
        "\n".join(lacking)


def test_the_policy_file_is_what_the_generator_renders_from_the_stacks_and_the_call_graph(stacks):
    assert derive(GRAPH, *stacks) == POLICY, "docs/ram-policy.json is stale: run tools/ram_policy.py"


def test_the_policy_grants_exactly_the_actions_of_its_types():
    granted = POLICY["policy"]["Statement"][0]["Action"]
    assert granted == sorted({e["action"] for es in POLICY["by_type"].values() for e in es})


def test_a_type_only_read_gets_only_its_reads_actions(stacks):
    _, reads, _ = stacks
    for t in reads:
        assert all(e["phases"] == ["read"] for e in POLICY["by_type"][t]), t


def test_every_action_names_the_provider_line_at_the_pinned_commit_and_the_path_that_reaches_it():
    commit = json.loads(SCHEMA.read_text())["commit"]
    assert POLICY["provider_commit"] == GRAPH["provider_commit"] == commit
    for t, entries in POLICY["by_type"].items():
        for e in entries:
            assert re.fullmatch(r"[a-z-]+:[A-Za-z0-9]+", e["action"]), e
            assert re.fullmatch(rf"aliyun/terraform-provider-alicloud@{commit[:7]}:alicloud/[a-z0-9_/]+\.go:[0-9]+",
                                e["source"]), e
            assert e["phases"] and set(e["phases"]) <= set(PHASES), e
            assert e["always"] == (not e["when"]), e
            assert e["path"].split(" > ")[0] in {w["entry"] for w in GRAPH["types"][t].values()}, e


def test_real_cloud_lists_every_branch_only_action_with_the_condition_that_reaches_it():
    text = DOC.read_text()
    assert render_doc(text, POLICY) == text, "docs/real-cloud.md is stale: run tools/ram_policy.py"
    for t, entries in POLICY["by_type"].items():
        for e in entries:
            row = f"| `{e['action']}` | `{t.split(':')[-1]}` "
            assert (row in text) is (not e["always"]), (t, e["action"])


def test_oss_actions_are_spelled_as_ram_spells_them_not_as_the_go_sdk_does():
    # The OSS API pages' permission tables: PutBucketTags needs oss:PutBucketTagging, and the SDK's
    # SetBucketTransferAcc is PutBucketTransferAcceleration. A policy granting the SDK's spelling grants nothing.
    granted = set(POLICY["policy"]["Statement"][0]["Action"])
    assert {"oss:PutBucketTagging", "oss:GetBucketTagging", "oss:PutBucketTransferAcceleration"} <= granted
    assert not {a for a in granted if re.fullmatch(r"oss:\w+(BucketTags|TransferAcc|CORS|ACL)", a)}, granted


def test_a_branch_says_in_words_what_it_is_for():
    assert purpose(['d.HasChange("tags")', "len(added) > 0"]) == "a change of `tags`"
    assert purpose(["update (set by a change of size)"]) == "a change of `size`"
    assert purpose(["err != nil", 'IsExpectedErrors(err, []string{"BucketNotEmpty"})', 'd.Get("force_destroy").(bool)']) \
        == "destroying a non-empty bucket with `force_destroy`"
    assert purpose(["for _, instance := range instances"]) == "once per item the data source lists"
    assert purpose(['not (d.Get("payment_type").(string) == "Subscription")']) == "the value of `payment_type`"
