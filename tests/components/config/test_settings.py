"""Bad settings are refused with a message naming the field, the rule and the fix."""

import pytest

from components.config import SettingsError
from components.model import parse_settings
from tests.conftest import stack_settings


def problems(overrides: dict, stack: str = "dev") -> list[str]:
    with pytest.raises(SettingsError) as info:
        parse_settings(stack_settings(stack, overrides))
    return [str(p) for p in info.value.problems]


BAD = [
    # (case, stack, overrides, field in the message, text in the message)
    ("unknown key", "dev", {"training": {"batch_sise": 16}}, "training.batch_sise", "unknown setting"),
    ("wrong type", "dev", {"gpu_pool": {"nodes": "two"}}, "gpu_pool.nodes", "integer"),
    ("tp not dividing heads", "multinode", {"model": {"rollout_tp": 8}}, "model.rollout_tp", "28 attention heads"),
    ("batch not divisible", "dev", {"training": {"train_batch_size": 17, "rollout_n": 3, "ppo_mini_batch_size": 8,
                                                 "agent_num_workers": 1}},
     "training.train_batch_size", "not divisible by the 8 GPUs"),
    ("zero nodes", "dev", {"gpu_pool": {"nodes": 0}}, "gpu_pool.nodes", "greater than or equal to 1"),
    ("rayjob name too long", "dev", {"job": {"name": "verl-" + "x" * 50}}, "job.name", "at most 47"),
    ("rayjob name not dns-1035", "dev", {"job": {"name": "1-verl"}}, "job.name", "DNS-1035"),
    ("existing cluster without id", "existing-ecs", {"cluster": {"existing_cluster_id": None}}, "cluster",
     "mode=existing needs existing_cluster_id"),
    ("lingjun without eflo ids", "dev", {"gpu_pool": {"lingjun": None}}, "gpu_pool", "eflo_cluster_id"),
    ("gpu zone not in zones", "dev", {"gpu_pool": {"zone": "ap-southeast-1c"}}, "gpu_pool.zone",
     "gpu_pool.zone 'ap-southeast-1c' is not one of zones"),
    ("bad bucket name", "dev", {"storage": {"bucket_name": "My_Bucket"}}, "storage.bucket_name", "OSS bucket name"),
    ("old kubernetes for lingjun", "dev", {"cluster": {"kubernetes_version": "1.30.1-aliyun.1"}}, "cluster.kubernetes_version",
     ">= 1.31"),
    ("service cidr overlapping the vpc", "dev", {"cluster": {"network": {"service_cidr": "10.9.0.0/16"}}},
     "cluster.network", "overlaps"),
    ("pool cap below one", "dev", {"sandbox": {"pool_cap": 0}}, "sandbox.pool_cap", "at least 1"),
    ("mcp port out of range", "dev", {"sandbox": {"mcp_port": 70000}}, "sandbox.mcp_port", "65535"),
    ("unknown task preset", "dev", {"task": {"dataset": {"preset": "geometry3k"}}}, "task.dataset.preset",
     "'gsm8k', 'math' or 'code'"),
    ("tracking without storage class", "dev", {"tracking": {"storage_class": None}}, "tracking",
     "storage_class"),
    ("sidecar mode on old kuberay", "dev", {"versions": {"kuberay": "1.4.2"}, "job": {"pre_running_deadline_seconds": None}},
     "job.submission_mode", "SidecarMode needs KubeRay >= 1.5.0"),
    ("domain outside its dns zone", "dev", {"sandbox": {"domain": "sandbox.other.org"}}, "sandbox", "not inside dns_zone"),
    ("certificate id source without id", "dev", {"sandbox": {"tls": {"source": "certificate_id"}}}, "sandbox.tls",
     "needs certificate_id"),
    ("shell-unsafe experiment name", "dev", {"training": {"experiment_name": "my run"}}, "training.experiment_name",
     "shell word"),
]


@pytest.mark.parametrize("case,stack,overrides,field,text", BAD, ids=[b[0] for b in BAD])
def test_bad_settings_are_refused_naming_the_field(case, stack, overrides, field, text):
    found = problems(overrides, stack)
    assert any(p.startswith(field) and text in p for p in found), found


def test_all_problems_are_reported_at_once():
    found = problems({"gpu_pool": {"nodes": 0}, "storage": {"bucket_name": "x"}, "sandbox": {"pool_cap": 0}})
    assert len(found) >= 3


def test_layout_errors_come_after_the_model_validates_and_are_all_listed():
    found = problems({"model": {"rollout_tp": 8}, "training": {"agent_num_workers": 7}}, "multinode")
    assert any(p.startswith("model.rollout_tp") for p in found)
    assert any(p.startswith("training.agent_num_workers") for p in found)
