"""`kind` and `platform_stack`: which half of the program a stack builds, refused early when inconsistent, and the
defaults a platform or experiment stack gets (the built image from the in-region registry, no pip at start)."""

from __future__ import annotations

import pytest

from components.config import SettingsError
from components.model import parse_settings
from tests.conftest import stack_settings

DIGEST = "sha256:" + "a" * 64


def problems(stack: str, overrides: dict) -> list[str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings(stack, overrides))
    return [str(p) for p in info.value.problems]


def test_existing_stacks_are_single_stacks_by_default():
    s = parse_settings(stack_settings("dev", {"image": None}))  # dev sets its image; the default is official
    assert s.kind == "single" and s.platform_stack is None and s.image.source == "official"


@pytest.mark.parametrize("kind", ["platform", "experiment"])
def test_platform_and_experiment_stacks_default_to_the_built_image_with_nothing_installed_at_start(kind):
    overrides: dict = {"kind": kind, "image": {"digest": DIGEST}}
    if kind == "experiment":
        overrides.update(platform_stack="org/verl-ack/dev-platform", sandbox={"domain": None, "dns_zone": None})
    s = parse_settings(stack_settings("dev", overrides))
    assert s.image.source == "built"


def test_an_explicit_official_image_is_an_explicit_opt_out():
    s = parse_settings(stack_settings("dev-grpo", {"image": {"source": "official"}}))
    assert s.image.source == "official"


def test_an_experiment_needs_its_platforms_fully_qualified_stack_name():
    assert any("kind=experiment needs platform_stack" in p for p in problems("dev-grpo", {"platform_stack": None}))
    assert any("not a fully qualified stack name" in p
               for p in problems("dev-grpo", {"platform_stack": "dev-platform"}))


def test_only_an_experiment_names_a_platform_stack():
    assert any("platform_stack is read only by kind=experiment" in p
               for p in problems("dev", {"platform_stack": "org/verl-ack/dev-platform"}))


def test_a_platform_pins_its_built_image_by_digest():
    assert any("needs image.digest" in p for p in problems("dev-platform", {"image": {"digest": None}}))


def test_an_experiment_leaves_the_sandbox_domain_to_its_platform():
    assert any("sandbox.domain belongs to the platform stack" in p
               for p in problems("dev-grpo", {"sandbox": {"domain": "sandbox.example.com", "dns_zone": "example.com"}}))


def test_split_stacks_reach_the_bucket_through_rrsa_only():
    assert any("needs storage.auth: rrsa" in p for p in problems("dev-grpo", {"storage": {"auth": "access_key"}}))


def test_a_single_stack_refuses_a_platform_owned_gpu_pool_because_it_owns_everything():
    assert any("gpu_pool.owner: platform applies to split stacks" in p
               for p in problems("dev", {"gpu_pool": {"owner": "platform"}}))
    assert parse_settings(stack_settings("dev")).gpu_pool.owner == "experiment"


ECS_POOL = {"kind": "ecs", "lingjun": None, "ecs": {"instance_types": ["ecs.gn8v-8x.48xlarge"]}, "gpu_memory_gib": 96,
            "cpus_per_node": 192, "memory_gib_per_node": 1536}


def test_a_platform_owned_ecs_pool_warns_that_it_bills_while_the_platform_lives():
    ecs = parse_settings(stack_settings("dev-platform", {"gpu_pool": ECS_POOL}))
    assert ecs.owns_gpu_pool()
    assert any(f == "gpu_pool.owner" and "bills while the platform lives" in m for f, m in ecs.warnings())
    lingjun = parse_settings(stack_settings("dev-platform"))
    assert not [m for f, m in lingjun.warnings() if f == "gpu_pool.owner"], "Lingjun bills in a pool or not"
    mine = parse_settings(stack_settings("dev-platform", {"gpu_pool": {**ECS_POOL, "owner": "experiment"}}))
    assert not mine.owns_gpu_pool() and not [m for f, m in mine.warnings() if f == "gpu_pool.owner"]
