"""Inputs that used to end in a traceback are now problems: field path, rule and fix, nothing else raised.

One test per class of bad input (issue 13, "Bad input"); tests/components/config/test_property.py generates the
rest.
"""

import datetime

import pytest
import yaml

from components.config import SETTINGS_KEY, Problem, SettingsError, VersionSettings, raw_settings, read_stack_config
from components.config.cloud import GPU_NODE_RESERVED_MEMORY_GIB, NetworkSettings
from components.config.root import SHM_DEFAULT_MAX_GIB
from components.model import parse_settings
from tests.conftest import stack_settings


def problems(overrides: dict, stack: str = "dev") -> list[Problem]:
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings(stack, overrides))
    assert info.value.problems and all(p.field and p.message for p in info.value.problems)
    return info.value.problems


def refused(overrides: dict, field: str, text: str, stack: str = "dev") -> None:
    found = problems(overrides, stack)
    assert any(p.field == field and text in p.message for p in found), [str(p) for p in found]


# --------------------------------------------------------------------------------------------- shell
@pytest.mark.parametrize("field", ["mlflow", "transformers", "fastmcp", "verl", "ray", "kuberay"])
@pytest.mark.parametrize("pin", ["3.17.2$(touch /tmp/pwned)", "3.17.2`id`", "3.17.2;id", "3.17.2\"", ">=3.17"])
def test_a_version_pin_that_would_run_as_a_shell_command_is_refused(field, pin):
    found = problems({"versions": {field: pin}})
    assert any(p.field == f"versions.{field}" and ("exact version" in p.message or "major.minor.patch" in p.message)
               for p in found), found


def test_a_pipeline_pin_and_an_image_reference_refuse_shell_syntax():
    pins = {**VersionSettings().pipeline_packages, "datasets": "5.2.0$(id)"}
    refused({"versions": {"pipeline_packages": pins}}, "versions.pipeline_packages.datasets", "exact version pin")
    refused({"versions": {"verl_image": "verlai/verl:x$(id)"}}, "versions.verl_image", "pinned image reference")
    refused({"versions": {"verl_image": "verlai/verl"}}, "versions.verl_image", "repository:tag")
    refused({"versions": {"pip_index_url": "https://x.org/simple/;id"}}, "versions.pip_index_url", "https:// URL")


# --------------------------------------------------------------------------------------------- YAML types
@pytest.mark.parametrize("value,seen", [(123, "a number"), (True, "a bool"), (1.5, "a number"),
                                        (datetime.date(2024, 1, 1), "a date")])
def test_a_name_yaml_read_as_another_type_is_refused_with_a_hint_to_quote_it(value, seen):
    refused({"training": {"experiment_name": value}}, "training.experiment_name", f"YAML read {seen}")
    refused({"training": {"experiment_name": value}}, "training.experiment_name", "quote the value")


@pytest.mark.parametrize("name", ["123", "2024", "1e5", "true", "null", "nan", "inf"])
def test_a_quoted_numeric_experiment_name_is_refused_before_the_command_line_is_built(name):
    refused({"training": {"experiment_name": name}}, "training.experiment_name", "Hydra")


def test_binary_sets_and_timestamps_are_refused_not_coerced():
    refused({"name": b"verl-dev"}, "name", "!!binary")
    refused({"zones": {"ap-southeast-1a", "ap-southeast-1b"}}, "zones", "a !!set")
    refused({"storage": {"bucket_name": datetime.datetime(2024, 1, 1, 12)}}, "storage.bucket_name", "timestamp")
    refused({"gpu_pool": {"nodes": "1"}}, "gpu_pool.nodes", "whole number")
    refused({"gpu_pool": {"nodes": 1.0}}, "gpu_pool.nodes", "whole number")
    refused({"training": {"use_kl_loss": "yes"}}, "training.use_kl_loss", "true or false")


def test_an_unquoted_price_date_is_accepted_as_its_iso_text():
    s = parse_settings(stack_settings("dev", {"cost": {"prices_taken_on": datetime.date(2025, 1, 31)}}))
    assert s.cost.prices_taken_on == "2025-01-31"
    refused({"cost": {"prices_taken_on": datetime.datetime(2025, 1, 31, 8)}}, "cost.prices_taken_on", "timestamp")
    refused({"cost": {"prices_taken_on": "2025-13-01"}}, "cost.prices_taken_on", "calendar date")


# --------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("section,field", [("cost", "seconds_per_step"), ("cost", "egress_gib"),
                                           ("latency", "hub_download_mbps"), ("latency", "verl_init_minutes"),
                                           ("training", "lr"), ("training", "kl_loss_coef"),
                                           ("model", "gpu_memory_utilization")])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_inf_and_nan_are_refused_in_every_float(section, field, value):
    found = problems({section: {field: value}})
    assert any(p.field == f"{section}.{field}" for p in found), found


def test_inf_and_nan_are_refused_inside_price_and_minute_maps():
    refused({"cost": {"prices": {"eip_hour": float("nan")}}}, "cost.prices.eip_hour", "finite")
    refused({"latency": {"create_minutes": {"vpc": float("inf")}}}, "latency.create_minutes.vpc", "finite")
    refused({"cost": {"prices": {"eip_hour": 1e300}}}, "cost.prices", "0-1000000")


@pytest.mark.parametrize("section,field", [("job", "active_deadline_seconds"), ("dataset", "train_subset"),
                                           ("training", "total_training_steps"), ("training", "save_freq"),
                                           ("storage", "volume_capacity_gib"), ("gpu_pool", "memory_gib_per_node"),
                                           ("sandbox", "pool_cap"), ("tracking", "disk_gib")])
@pytest.mark.parametrize("value", [2**63, 10**30, 10**400])
def test_integers_past_their_bound_are_refused(section, field, value):
    refused({section: {field: value}}, f"{section}.{field}", "less than or equal to")


def test_a_float_too_large_for_a_double_is_refused_not_raised():
    refused({"cost": {"alb_lcus": 10**400}}, "cost.alb_lcus", "number")


# --------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("overrides,field", [
    ({"versions": {"addons": ["alb"]}}, "versions.addons"),
    ({"versions": {"addons": {"alb": 3}}}, "versions.addons"),
    ({"versions": {"addons": {"alb": "v1"}}}, "versions.addons"),
    ({"latency": {"create_minutes": [1, 2]}}, "latency.create_minutes"),
    ({"latency": {"create_minutes": 5}}, "latency.create_minutes"),
    ({"cost": {"prices": [["eip_hour", 1]]}}, "cost.prices"),
    ({"cost": {"prices": {1: 2.0}}}, "cost.prices"),
    ({"versions": {"pipeline_packages": ["datasets==5.2.0"]}}, "versions.pipeline_packages"),
    ({"image": {"credential_helper_config": {"a": {1, 2}}}}, "image.credential_helper_config"),
    ({"job": {"env": ["A=1"]}}, "job.env"),
    ({"job": {"env": {"A": 1}}}, "job.env.A"),
    ({"tags": {"team": ["a"]}}, "tags.team"),
    ({"sandbox": {"manager_selector": "app=x"}}, "sandbox.manager_selector"),
    ({"gpu_pool": ["lingjun"]}, "gpu_pool"),
    ({"training": "grpo"}, "training"),
])
def test_a_map_setting_of_the_wrong_shape_is_a_problem_not_a_traceback(overrides, field):
    found = problems(overrides)
    assert any(p.field == field or p.field.startswith(field + ".") for p in found), [str(p) for p in found]


@pytest.mark.parametrize("raw", [[], "verl", 3, None])
def test_settings_that_are_not_a_mapping_are_one_problem(raw):
    with pytest.raises(SettingsError) as info:
        parse_settings(raw)
    assert [p.field for p in info.value.problems] == [SETTINGS_KEY]


# --------------------------------------------------------------------------------------------- builder rules
def test_shm_larger_than_the_pod_is_a_settings_problem():
    node = 60
    pod = node - GPU_NODE_RESERVED_MEMORY_GIB
    refused({"job": {"shm_gib": pod}}, "job.shm_gib", "job.shm_gib", stack="existing-ecs")
    parse_settings(stack_settings("existing-ecs", {"job": {"shm_gib": pod - 1}}))
    refused({"gpu_pool": {"memory_gib_per_node": 17}}, "gpu_pool.memory_gib_per_node", "too little for its /dev/shm")


def test_the_shm_and_reserved_memory_numbers_match_the_builders():
    from components.model.layout import NODE_RESERVED_MEMORY_GIB
    from components.workloads.training.run_spec import SHM_MAX_GIB
    assert (GPU_NODE_RESERVED_MEMORY_GIB, SHM_DEFAULT_MAX_GIB) == (NODE_RESERVED_MEMORY_GIB, SHM_MAX_GIB)


def test_a_rollout_engine_the_image_does_not_ship_is_a_settings_problem_for_every_image_source():
    refused({"training": {"rollout_engine": "sglang"}, "image": {"source": "official"}}, "training.rollout_engine",
            "does not run on versions.verl_image")
    # A built image builds FROM versions.verl_image (image/Dockerfile's BASE_IMAGE): SGLang on the vLLM base is
    # refused too, naming the build argument that fixes it.
    refused({"training": {"rollout_engine": "sglang"}, "image": {"source": "built", "tag": "abc123"}},
            "training.rollout_engine", "--build-arg BASE_IMAGE")
    for source in ({"source": "official"}, {"source": "built", "tag": "abc123"}):
        parse_settings(stack_settings("dev", {"training": {"rollout_engine": "sglang"}, "image": source,
                                              "versions": {"verl_image": "verlai/verl:sgl0512.latest",
                                                           "verl_image_digest": None}}))


# --------------------------------------------------------------------------------------------- stack files
def _write(tmp_path, data: bytes | str):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def file_problem(tmp_path, data) -> Problem:
    with pytest.raises(SettingsError) as info:
        raw_settings(_write(tmp_path, data))
    [problem] = info.value.problems
    assert problem.field and problem.message
    return problem


@pytest.mark.parametrize("data,text", [
    ("config:\n  verl-ack:settings: [\n", "is not valid YAML (line"),
    ("config: {a: 1\n", "is not valid YAML"),
    (b"config:\n  verl-ack:settings:\n    name: caf\xe9\n", "is not UTF-8"),
    (b"\xff\xfe\x00c\x00o", "is not UTF-8"),
    ("- config\n- x\n", "must be a YAML mapping"),
    ("just text\n", "must be a YAML mapping"),
    ("42\n", "must be a YAML mapping"),
    ("config: [1, 2]\n", "must be a mapping of config keys"),
    ("config:\n  1: x\n  true: y\n", "non-text key"),
    ("config:\n  2024-01-01: y\n", "quote it"),
    ("config: &a\n  verl-ack:settings: *a\n", "refers to a value that contains it"),
    ("config:\n  verl-ack:settings: &a [*a]\n", "refers to a value that contains it"),
    ("config:\n  x: " + "[" * 200 + "]" * 200 + "\n", "deeper than"),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     "config:\n  verl-ack:settings: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", "expands to more than"),
])
def test_a_stack_file_that_cannot_be_read_as_settings_is_one_problem_naming_the_file(tmp_path, data, text):
    problem = file_problem(tmp_path, data)
    assert text in problem.message and problem.field.startswith("Pulumi.bad.yaml"), problem


def test_an_empty_stack_file_reads_as_no_config(tmp_path):
    assert read_stack_config(_write(tmp_path, "")) == {}
    with pytest.raises(SettingsError, match="missing"):
        raw_settings(_write(tmp_path, "config:\n"))


def test_an_unquoted_timestamp_in_the_settings_is_refused_with_its_line_and_the_quoted_form(tmp_path):
    # yaml.v3 (the Pulumi CLI) reads it as a timestamp and converts it differently from PyYAML: refuse, not guess.
    text = yaml.safe_dump({"config": {SETTINGS_KEY: stack_settings("dev")}})
    line = text.splitlines().index("    name: verl-dev") + 1
    with pytest.raises(SettingsError) as info:
        raw_settings(_write(tmp_path, text.replace("name: verl-dev", "name: 2024-01-01 10:00:00")))
    [problem] = info.value.problems
    assert problem.field == "name" and problem.message.endswith(f"(Pulumi.bad.yaml line {line})")
    assert 'quote it: "2024-01-01 10:00:00"' in problem.message


def test_a_nat_eip_bandwidth_above_what_pay_by_traffic_allows_is_refused_before_the_first_up():
    # the EIP the program creates is pay-by-traffic (1..200 Mbit/s); an existing VPC's NAT is the user's own
    with pytest.raises(ValueError, match="set 200 or less"):
        NetworkSettings(nat_bandwidth_mbps=400)
    assert NetworkSettings(nat_bandwidth_mbps=200).nat_bandwidth_mbps == 200
    own = NetworkSettings(vpc_id="vpc-t4n8x2k3m9q1w5e7r6y4a", node_vswitch_ids=["vsw-t4n1a"], nat_bandwidth_mbps=400)
    assert own.nat_bandwidth_mbps == 400


def test_a_multi_node_lingjun_stack_in_its_machines_vpc_must_name_the_nodes_cidrs_before_anything_is_created():
    raw = stack_settings("multinode")
    raw["job"].pop("host_network_cidrs")
    with pytest.raises(SettingsError, match="job.host_network_cidrs is required"):
        parse_settings(raw)
