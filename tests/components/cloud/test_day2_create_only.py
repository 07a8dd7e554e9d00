"""Create-only settings never look like they worked (issue 19 item 6): the program reads its own last deployed
`create_only` output through a StackReference to itself, and a changed create-only setting fails the preview
naming the setting, why and the manual step, unless the stack file accepts it explicitly."""

from __future__ import annotations

import json

import pytest

from components.cloud.create_only import CREATE_ONLY_SETTINGS, create_only_values, refused_changes
from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR
from offline.engine import STACK_REFERENCE_TYPE, run_program
from offline.plan import stack_config
from tests.components.cloud.test_common import EXISTING_VPC, NEW_VPC, settings_of
from tests.conftest import REPO, stack_settings


def preview(stack: str = "dev", overrides: dict | None = None, own_outputs: dict | None = None):
    config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    config[SETTINGS_KEY] = json.dumps(stack_settings(stack, overrides))
    return run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                       own_outputs=own_outputs)


@pytest.fixture(scope="module")
def deployed() -> dict:
    """The outputs of dev's first `up` (a fresh stack: the self-reference reads nothing)."""
    return preview().outputs


def test_a_fresh_stack_records_its_create_only_settings_and_reads_itself_by_its_own_name(deployed):
    assert deployed["create_only"] == create_only_values(settings_of("dev"))
    assert set(deployed["create_only"]) <= set(CREATE_ONLY_SETTINGS)


def test_the_second_preview_with_nothing_changed_passes(deployed):
    again = preview(own_outputs=deployed)
    assert again.outputs["create_only"] == deployed["create_only"]
    [ref] = [r for r in again.by_type(STACK_REFERENCE_TYPE) if r.name == "own-outputs"]
    assert ref.inputs["name"] == "dev"  # the DIY backend's name for it in either layout (wiring.stack_reference_name)


def test_turning_the_public_api_off_on_a_live_stack_fails_the_preview_naming_the_setting_and_the_manual_step(deployed):
    public = settings_of("dev").cluster.public_api
    with pytest.raises(Exception, match=r"refused change: cluster\.public_api .*only when it creates the cluster.*"
                                        r"Manual step: .*ACK console") as info:
        preview(overrides={"cluster": {"public_api": not public}}, own_outputs=deployed)
    assert "allow_create_only_changes" in str(info.value)


def test_changing_pod_cidrs_fails_the_preview_instead_of_a_half_applied_network():
    # pod CIDRs are the program's own only where it builds the VPC (an ECS pool; Lingjun stacks use their nodes' VPC)
    deployed = preview(overrides=NEW_VPC).outputs
    changed = {**NEW_VPC, "cluster": {"network": {**NEW_VPC["cluster"]["network"],
                                                  "pod_cidrs": ["10.6.0.0/16", "10.7.0.0/16"]}}}
    with pytest.raises(Exception, match=r"refused change: cluster\.network\.pod_cidrs"):
        preview(overrides=changed, own_outputs=deployed)


def test_an_explicitly_accepted_change_passes_and_is_recorded_for_the_next_preview(deployed):
    public = settings_of("dev").cluster.public_api
    out = preview(overrides={"cluster": {"public_api": not public,
                                         "allow_create_only_changes": ["cluster.public_api"]}},
                  own_outputs=deployed).outputs
    assert out["create_only"]["cluster.public_api"] is (not public)


def test_a_stack_deployed_before_the_check_existed_is_not_refused_and_gets_its_record():
    assert refused_changes(None, {"zones": ["a"]}, []) == []
    assert refused_changes({}, {"zones": ["a"]}, []) == []
    assert refused_changes({"zones": ["b"]}, {"zones": ["a"]}, ["zones"]) == []
    assert len(refused_changes({"zones": ["b"]}, {"zones": ["a"]}, [])) == 1


def test_a_given_vpc_guards_its_pod_vswitch_ids_and_an_existing_cluster_has_nothing_create_only():
    assert "cluster.network.pod_vswitch_ids" in create_only_values(settings_of("dev", EXISTING_VPC))
    assert create_only_values(settings_of("existing-ecs")) == {}
