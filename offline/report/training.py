"""The training job section of the plan: the RayJob, its volumes, configs and checkpoints."""

from __future__ import annotations

import yaml

from components.config import Settings
from components.model.layout import resolve_layout
from components.wiring import TRAINING_SERVICE_ACCOUNT, gpu_scheduling, mcp_url, ray_namespace
from components.workloads.training import verl_compose
from components.workloads.training.rayjob import model_prefetch_of, override_values, pod_wiring, rayjob_manifest
from components.workloads.training.verl_config import GSM8K_TOOL, tool_config, trainer_config
from components.workloads.training.volumes import (
    checkpoint_dir,
    checkpoint_key_prefix,
    dataset_paths,
    model_dir,
    oss_volumes,
)
from offline.report.section import Section, rows_data, table


def recipe_line(s: Settings, layout) -> str:
    """What the job trains: the recipe, the estimator, the critic and LoRA when present, the training steps."""
    t = s.training
    parts = [f"{t.recipe} (algorithm.adv_estimator {t.algorithm})"]
    if layout.uses_critic:
        parts.append(f"with a critic (`{t.critic.model_path or 'the actor model'}`, lr {t.critic.lr:g}, micro batch "
                     f"{layout.critic_micro_batch_size_per_gpu})")
    if s.model.lora_rank:
        parts.append(f"LoRA rank {s.model.lora_rank}, alpha {s.model.lora_alpha}, modules {s.model.target_modules}")
    if t.temperature != 1.0 or t.top_p != 1.0:
        parts.append(f"sampling temperature {t.temperature:g}, top_p {t.top_p:g}")
    return "; ".join(parts)


def reward_line(s: Settings, reward_kwargs: dict) -> str:
    """What the job's reward function scores with, read back from the reward kwargs the trainer file carries."""
    if "task_reward" in reward_kwargs:
        return (f"your `{reward_kwargs['task_reward']['function']}` (`{s.task.reward.file}`, shipped as "
                f"`{reward_kwargs['task_reward']['path']}`), on the tokens the model generated (tool replies "
                "excluded), plus the tool rewards")
    if "sandbox" in reward_kwargs:
        return ("the row's unit tests, run in the sandboxes against the model's last code block (MCP "
                f"`{reward_kwargs['sandbox']['mcp_tool']}`), on the tokens the model generated")
    preset = s.task.preset
    if preset is not None and preset.data_source == "openai/gsm8k":
        return (f"verl's GSM8K scorer, `{reward_kwargs['gsm8k_method']}` mode, on the tokens the model generated "
                "(tool replies excluded), plus the tool rewards")
    return ("verl's default_compute_score by each row's data_source, on the tokens the model generated (tool replies "
            "excluded), plus the tool rewards")


def training_section(s: Settings, recording):
    """Plan section: the Ray cluster, what verl reads and writes, the tools and the job's lifecycle."""

    layout = resolve_layout(s)
    recorded = [r for r in recording.by_type("kubernetes:ray.io/v1:RayJob") if r.name.endswith("-rayjob")]
    if recorded:
        manifest = {k: v for k, v in recorded[0].inputs.items() if not k.startswith("__")}
    else:  # a program run without the component (e.g. a partial plan): show what it would render
        wiring = pod_wiring(s, namespace=ray_namespace(s), service_account=TRAINING_SERVICE_ACCOUNT)
        manifest = rayjob_manifest(s, layout, gpu_scheduling(s), wiring)
    spec = manifest["spec"]
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    container = head["containers"][0]
    limits = container["resources"]["limits"]
    copier = model_prefetch_of(spec)
    read_path = override_values(spec["entrypoint"], "actor_rollout_ref.model.path")[-1]
    shm = next(v["emptyDir"]["sizeLimit"] for v in head["volumes"] if v["name"] == "dshm")
    workers = sum(g["replicas"] for g in spec["rayClusterSpec"].get("workerGroupSpecs", []))
    tool_docs = tool_config(s)["tools"]
    tools = [t["tool_schema"]["function"]["name"] if "tool_schema" in t else t["class_name"] for t in tool_docs]
    # Read back from the rendered files the job gets: the reward function's kwargs and the answer tool's config.
    reward_kwargs = trainer_config(s)["reward"]["custom_reward_function"]["reward_kwargs"]
    answer = next((t["config"] for t in tool_docs if t.get("tool_schema", {}).get("function", {}).get("name") ==
                   GSM8K_TOOL), None)
    vols = oss_volumes(s)
    train, val = dataset_paths(s)
    # A built image installs nothing at start: its runtime env carries PYTHONPATH but no `pip` list.
    pip = (yaml.safe_load(spec["runtimeEnvYAML"]) or {}).get("pip", []) if "runtimeEnvYAML" in spec else []
    rows = [
        ("RayJob", f"`{manifest['metadata']['namespace']}/{manifest['metadata']['name']}` ({spec['submissionMode']}, "
                   f"KubeRay {s.versions.kuberay}, Ray {spec['rayClusterSpec']['rayVersion']})"),
        ("Ray cluster", f"GPU head (trains) + {workers} GPU worker(s) = {layout.nodes} node(s)"),
        ("each GPU pod", f"{limits['nvidia.com/gpu']} GPUs; its Ray container {layout.ray_cpus_per_gpu_pod} CPUs, "
                         f"{layout.memory_gib_per_gpu_pod}Gi memory, /dev/shm {shm}" + (
                             f" (the head's Ray container: {layout.head_ray_cpus} CPUs, {layout.head_memory_gib}Gi "
                             "memory, beside KubeRay's SidecarMode submitter with limits 1 CPU / 1Gi)"
                             if spec["submissionMode"] == "SidecarMode" else "") + (
                             f"; beside the Ray container the model prefetch's {copier['resources']['limits']['cpu']} "
                             f"CPU / {copier['resources']['limits']['memory']}" if copier else "")),
        ("image", f"`{container['image']}`"),
        ("installed at start", ", ".join(f"`{p}`" for p in pip) or "nothing (built image)"),
        ("lifecycle", f"cluster deleted {spec['ttlSecondsAfterFinished']} s after the job; deadline "
                      f"{spec['activeDeadlineSeconds']} s; must be running within "
                      f"{spec.get('preRunningDeadlineSeconds', '-')} s; retries {spec['backoffLimit']}"),
        ("train / val files", f"`{train}`, `{val}`"),
        ("model", f"`{model_dir(s)}`" + (
            f", copied into each Ray pod's memory while Ray starts (model prefetch); verl reads `{read_path}`, or the "
            "OSS volume if a copy fails" if copier else "")),
        ("checkpoints", f"`{checkpoint_dir(s)}` = `{checkpoint_key_prefix(s)}` in the bucket "
                        f"(save {', '.join(s.training.save_contents)}; resume_mode auto)"),
        ("volumes", ", ".join(f"{k}: {v.fuse_type} {v.access_mode} `{v.prefix}`" for k, v in vols.items())),
        ("tools", (", ".join(f"`{t}`" for t in tools) or "none (single turn)") +
                  (f" (MCP `{mcp_url(s)}`)" if s.sandbox.enabled and tools else "")),
        ("reward", reward_line(s, reward_kwargs)),
    ]
    if answer is not None:
        rows.append(("answer tool", f"`{GSM8K_TOOL}` reveals `{answer['reveal']}`, at most {answer['max_calls']} "
                                    f"call(s) per trajectory, scored in `{answer['gsm8k_method']}` mode"))
    composition = verl_compose.validate(s, layout) if s.kind != "platform" else None
    overrides = verl_compose.overrides_table(s)
    rows += [
        ("recipe", recipe_line(s, layout)),
        ("verl config", composition.summary() if composition else "-"),
        ("verl overrides", ", ".join(f"`{k}={v}`" for k, v in overrides) + " (training.verl_overrides, in the config "
                           "hash)" if overrides else "none (training.verl_overrides)"),
    ]
    data = {"recipe": s.training.recipe, "algorithm": s.training.algorithm, "critic": layout.uses_critic,
            "lora_rank": s.model.lora_rank, "verl_overrides": dict(overrides),
            "verl_composed": bool(composition and composition.ran), "verl_validated": bool(composition and composition.validated),
            "rayjob": manifest["metadata"]["name"], "namespace": manifest["metadata"]["namespace"],
            "submission_mode": spec["submissionMode"], "gpu_pods": layout.nodes, "image": container["image"],
            "runtime_pip": pip, "train_files": train, "val_files": val, "model_path": model_dir(s),
            "model_read_path": read_path, "model_prefetch": copier is not None,
            "checkpoint_dir": checkpoint_dir(s), "checkpoint_key_prefix": checkpoint_key_prefix(s), "tools": tools,
            "gsm8k_scoring": reward_kwargs["gsm8k_method"], "reward_kind": s.task.reward_kind,
            "answer_tool_reveal": answer["reveal"] if answer else None,
            "answer_tool_max_calls": answer["max_calls"] if answer else None, "table": rows_data(rows)}
    return Section("training", "Training job", table(rows, ("training job", "value")), data)
