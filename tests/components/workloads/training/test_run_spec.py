"""The run's values are computed once (run_spec) and rendered by a function that reads nothing else: a variant of
a run is a replaced spec, rendered the same way."""

from __future__ import annotations

import dataclasses

from components.model import parse_settings
from components.model.layout import resolve_layout
from components.wiring import TRAINING_SERVICE_ACCOUNT, gpu_scheduling
from components.workloads.network_policies import RAYJOB_LABEL
from components.workloads.training.rayjob import pod_groups, rayjob_manifest, render_rayjob
from components.workloads.training.run_spec import pod_wiring, run_spec
from tests.conftest import stack_settings


def spec_of(stack: str):
    s = parse_settings(stack_settings(stack))
    wiring = pod_wiring(s, namespace=s.job.namespace, service_account=TRAINING_SERVICE_ACCOUNT)
    return s, run_spec(s, resolve_layout(s), gpu_scheduling(s), wiring)


def test_rendering_the_run_spec_gives_the_stacks_rayjob(stack_name):
    s, spec = spec_of(stack_name)
    wiring = pod_wiring(s, namespace=s.job.namespace, service_account=TRAINING_SERVICE_ACCOUNT)
    assert render_rayjob(spec) == rayjob_manifest(s, resolve_layout(s), gpu_scheduling(s), wiring)


def test_a_variant_of_a_run_is_a_replaced_spec_and_changes_only_what_it_replaces():
    _, spec = spec_of("dev")
    base = render_rayjob(spec)
    variant = render_rayjob(dataclasses.replace(spec, name="verl-grpo-lr2", entrypoint=spec.entrypoint + " x=1"))
    assert variant["metadata"]["name"] == "verl-grpo-lr2"
    assert variant["spec"]["entrypoint"].endswith(" x=1")
    variant["metadata"]["name"], variant["spec"]["entrypoint"] = base["metadata"]["name"], base["spec"]["entrypoint"]
    for _, group in pod_groups(variant["spec"]):  # the per-RayJob pod label its own NetworkPolicy selects
        labels = group["template"]["metadata"]["labels"]
        assert labels.pop(RAYJOB_LABEL) == "verl-grpo-lr2"
        labels[RAYJOB_LABEL] = base["metadata"]["name"]
    assert variant == base


def test_the_run_spec_is_plain_values_so_equal_specs_render_equal_manifests():
    _, a = spec_of("multinode")
    _, b = spec_of("multinode")
    assert a == b and render_rayjob(a) == render_rayjob(b)
    assert a.workers == 1 and a.rdma
