"""Every supported combination of choices renders a complete offline plan (plan.md, plan.json, manifests):
a stack switching one option must never crash the plan in CI or the preview."""

import json

import pytest
import yaml

from components.config import STACKS_DIR
from offline import plan as offline_plan
from tests.conftest import deep_merge

VARIANTS = {
    "built image in a personal ACR": ("dev", {"image": {"source": "built", "tag": "t1"}}),
    "built image in an enterprise ACR": ("dev", {"image": {
        "source": "built", "registry": "enterprise", "enterprise_instance_id": "cri-abc123",
        "registry_host": "team-registry-vpc.ap-southeast-1.cr.aliyuncs.com", "tag": "t1"}}),
    "no image pre-pull": ("dev", {"image": {"prepull": False}}),
    "access-key fallback for OSS": ("dev", {"storage": {"auth": "access_key"}}),
    "existing bucket": ("dev", {"storage": {"mode": "existing"}}),
    "bucket deleted on destroy": ("dev", {"storage": {"keep_on_destroy": False}}),
    "certificate by id": ("dev", {"sandbox": {"tls": {"source": "certificate_id", "certificate_id": "12345678"}}}),
    "domain without a DNS zone": ("dev", {"sandbox": {"dns_zone": None}}),
    "open-source sandbox manager": ("dev", {"sandbox": {"manager": "open-source", "domain": None, "dns_zone": None,
                                                        "mcp_port": 8082},
                                            "versions": {"sandbox_manager_image": "registry.example.com/a/sm:pr165"}}),
    "no sandboxes": ("existing-ecs", {"sandbox": {"enabled": False}}),
    "no tracking": ("dev", {"tracking": {"enabled": False}, "training": {"logger": ["console"]}}),
    "ECS GPU pool in a new cluster": ("dev", {"gpu_pool": {
        "kind": "ecs", "lingjun": None, "ecs": {"instance_types": ["ecs.gn7i-c32g1.8xlarge"]},
        "cpus_per_node": 32, "memory_gib_per_node": 188}}),
    "new cluster in an existing VPC": ("dev", {"cluster": {"network": {
        "vpc_id": "vpc-abc", "node_vswitch_ids": ["vsw-a", "vsw-b"], "pod_vswitch_ids": ["vsw-c", "vsw-d"]}}}),
    "KubeRay from the ACK add-on": ("dev", {"versions": {"kuberay_source": "addon"}}),
    "K8sJobMode submission": ("dev", {"job": {"submission_mode": "K8sJobMode"}}),
    "ModelScope download": ("dev", {"model": {"source": "modelscope"}}),
    # verl's run_qwen3-8b.sh micro batch (32) exceeds dev's per-GPU mini batch of 16 (rule 5): 16 it is.
    "Qwen3-8B preset": ("dev", {"model": {"preset": "qwen3-8b", "ppo_micro_batch_size_per_gpu": 16}}),
    "Qwen3 thinking on": ("dev", {"model": {"preset": "qwen3-4b", "thinking": True, "ppo_micro_batch_size_per_gpu": 8},
                                  "training": {"max_response_length": 4096}}),
    "custom model from ModelScope": ("existing-ecs", {"model": {
        "preset": "custom", "source": "modelscope", "custom": {
            "modelscope_id": "acme/Qwen2.5-0.5B-gsm8k", "family": "qwen2", "layers": 24, "hidden_size": 896,
            "intermediate_size": 4864, "attention_heads": 14, "kv_heads": 2, "vocab_size": 151936,
            "tie_word_embeddings": True}}}),
    "full dataset, several epochs": ("dev", {"dataset": {"use_subsets": False},
                                             "training": {"total_training_steps": None, "total_epochs": 2}}),
}

SECRETS = {k: f"variant-secret-{k}-7c1e" for k in
           ("sandboxApiKey", "hfToken", "modelscopeToken", "tlsCertificate", "tlsPrivateKey",
            "ossAccessKeyId", "ossAccessKeySecret")}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_offline_plan_renders_every_variant_without_leaking_a_secret(variant, tmp_path):
    stack, overrides = VARIANTS[variant]
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["verl-ack:settings"] = deep_merge(doc["config"]["verl-ack:settings"], overrides)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    result = offline_plan.build_plan(path, stack, out, secret_values=SECRETS)
    assert result["resources"] and (out / "plan.md").is_file()
    entry = json.loads((out / "plan.json").read_text())["training_entrypoint"]
    assert entry.startswith("python3 /etc/verl-ack/config/verl_ack_entrypoint.py ")
    text = "".join(f.read_text() for f in out.rglob("*") if f.is_file())
    assert not any(v in text for v in SECRETS.values())


def test_a_custom_model_read_from_a_config_json_in_the_stacks_folder_plans_with_its_familys_calibration(
        tmp_path, monkeypatch):
    from components.config import models

    monkeypatch.setattr(models, "STACKS_DIR", tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "qwen3-1.7b-tuned.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 28, "hidden_size": 2048,
        "intermediate_size": 6144, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 151936, "tie_word_embeddings": True}))
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"]["verl-ack:settings"] = deep_merge(doc["config"]["verl-ack:settings"], {"model": {
        "preset": "custom", "custom": {"hf_id": "acme/qwen3-1.7b-tuned", "config_json": "models/qwen3-1.7b-tuned.json"}}})
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(doc))
    offline_plan.build_plan(path, "dev", tmp_path / "out", secret_values=SECRETS)
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "acme/qwen3-1.7b-tuned (1.721 B parameters, qwen3; layout defaults from the nearest qwen3 preset, qwen3-1.7b)" in md
    # its family's measured points (docs/memory.md) back its estimate
    assert "uncalibrated" not in md and "points (qwen2, qwen3) on NVIDIA H200" in md
    assert "actor_rollout_ref.rollout.multi_turn.format=hermes" in md
