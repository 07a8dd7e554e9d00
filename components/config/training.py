"""Settings of the experiment: dataset, model, verl trainer, RayJob lifecycle, tracking."""

from __future__ import annotations

import itertools
import re
from typing import Literal, Optional

from pydantic import Field, PrivateAttr, field_validator, model_validator

from components.config.models import CUSTOM, FAMILIES, PRESET_NAMES, PRESETS, CustomModelSettings
from components.config.recipes import (
    ADV_ESTIMATORS,
    CriticSettings,
    DapoSettings,
    VerlScalar,
    apply_recipe,
)
from components.config.sharing import Coefficient, Rate, SampleCount, SweepSettings
from components.config.types import (
    INT64_MAX,
    Cidr,
    CpuQuantity,
    Dns1123Label,
    DottedKeyPath,
    EnvValue,
    EnvVarName,
    ExtendedResourceName,
    HydraName,
    MemoryQuantity,
    ObjectPrefix,
    PlainName,
    RayJobName,
    ResourceCount,
    StorageClassName,
    StorageClassNameOrEmpty,
    Strict,
)


# --------------------------------------------------------------------------------------------- data & model
class DatasetSettings(Strict):
    """The dataset Job (task.dataset.preset's rows): its subsets and resources; task.dataset says what it fetches."""

    config: PlainName | None = Field(
        None, description="Hub config of the task's preset dataset. Empty = the preset's (gsm8k: main).")
    train_subset: int = Field(
        20, ge=1, le=INT64_MAX, description="Rows in the small train subset (train<N>.parquet) smoke stacks use.")
    test_subset: int = Field(100, ge=1, le=INT64_MAX, description="Rows in the small test subset (test<N>.parquet).")
    use_subsets: bool = Field(True, description="Train on the small subsets (smoke runs) instead of the full splits.")
    full_train_rows: int | None = Field(
        None, ge=1, le=INT64_MAX, description="Rows in the preset's full train split. Empty = the dataset card's "
        "figure (components/config/task.py TASK_PRESETS: gsm8k 7473, math 7500, code 26758).")
    full_test_rows: int | None = Field(
        None, ge=1, le=INT64_MAX, description="Rows in the preset's full validation split. Empty = the dataset "
        "card's figure.")
    job_cpu: CpuQuantity = Field("2", description="CPU request and limit of the dataset and model staging Jobs.")
    job_memory: MemoryQuantity = Field("8Gi", description="Memory request and limit of the dataset and model staging Jobs.")
    backoff_limit: int = Field(2, ge=0, le=10, description="Pod retries of the dataset and model staging Jobs.")
    active_deadline_seconds: int = Field(
        7200, ge=60, le=INT64_MAX, description="Hard limit on one data Job's run time (a large model download included); "
        "`pulumi up` waits this long (plus 5 minutes) for the Jobs to complete.")
    ttl_seconds_after_finished: Optional[int] = Field(
        None, ge=0, le=2**31 - 1,
        description="Unset (default): a finished data Job (its pod and logs) stays until the stack deletes it, so "
        "Pulumi's state stays true. A value makes Kubernetes delete it that many seconds after it finishes, behind "
        "Pulumi: drift, and the next `pulumi up --refresh` runs the Job again.")
    staging_storage_class: StorageClassName = Field(
        "alicloud-disk-topology-alltype", description="StorageClass of the scratch disk the model staging Job "
        "downloads into (a generic ephemeral volume, deleted with the pod). The topology class binds in the pod's "
        "zone (WaitForFirstConsumer); check `kubectl get storageclass`.")


class ModelSettings(Strict):
    preset: Literal[(*PRESET_NAMES, CUSTOM)] = Field(  # type: ignore[valid-type]
        "qwen2.5-3b-instruct", description="Model preset (architecture facts and default parallelism; docs/settings.md "
        "lists them), or `custom` for the model in model.custom.")
    custom: Optional[CustomModelSettings] = Field(
        None, description="Your own dense model (model.preset: custom): its hub repository and architecture numbers, "
        "or a config.json in the stacks folder. Default parallelism is the same-family preset nearest in size.")
    source: Literal["huggingface", "modelscope", "oss"] = Field(
        "huggingface", description="Where the starting weights come from: the hub the model staging job downloads "
        "from (ModelScope is faster in mainland regions), or `oss`: a Hugging Face model directory already in the "
        "stack's bucket at model.path (an SFT checkpoint, a previous run's export), read from there with no "
        "staging Job. The architecture still comes from model.preset or model.custom.")
    path: ObjectPrefix | None = Field(
        None, description="model.source: oss only: the key prefix in the stack's bucket that holds the model "
        "(config.json, the weights, the tokenizer), under storage.models_prefix or storage.checkpoints_prefix (the "
        "volumes the Ray pods mount), e.g. checkpoints/<project>/<experiment>/global_step_100/actor/huggingface/ (a "
        "run's Hugging Face export). The preview checks it holds config.json and weights where the bucket exists "
        "before the stack (an experiment stack, storage.mode: existing).")
    thinking: bool | None = Field(
        None, description="Thinking mode of a model whose chat template has the switch (Qwen3): verl's "
        "data.apply_chat_template_kwargs.enable_thinking, which both the dataset's prompt rendering and the "
        "agent loop's rollout read. Empty = off (short answers: GSM8K's 1024-token responses; thinking needs far "
        "longer ones). Other families have no switch: true is refused.")
    revision: Optional[str] = Field(
        None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="Hub revision (branch, tag or commit) the model staging Job downloads. The bucket's model cache is "
        "keyed by repo and revision (models/<name>/<key>/, staged once per bucket): pin a commit so the key names fixed "
        "weights. Empty = the hub's default branch, cached as first staged (a later push to it is not picked up).")
    rollout_tp: int | None = Field(None, ge=1, le=4096, description="Override: vLLM tensor parallel size.")
    actor_param_offload: bool | None = Field(None, description="Override: FSDP actor parameter offload.")
    actor_optimizer_offload: bool | None = Field(None, description="Override: FSDP actor optimizer offload.")
    ref_param_offload: bool | None = Field(None, description="Override: reference policy parameter offload.")
    gpu_memory_utilization: float | None = Field(None, gt=0, lt=1, description="Override: vLLM gpu_memory_utilization.")
    ppo_micro_batch_size_per_gpu: int | None = Field(None, ge=1, le=1 << 20, description="Override: actor micro batch per GPU.")
    log_prob_micro_batch_size_per_gpu: int | None = Field(
        None, ge=1, le=1 << 20, description="Override: log-prob micro batch per GPU.")
    lora_rank: int = Field(
        0, ge=0, le=512, description="LoRA rank of the actor (verl's actor_rollout_ref.model.lora_rank); 0 = full "
        "fine-tuning. With LoRA the frozen base keeps its fp32 shard but only the adapters have gradients and Adam "
        "state (the memory estimate counts both), the reference policy is the base with the adapters off, and vLLM "
        "serves the adapter (verl sets max_loras 1, max_lora_rank = this; at most 512, vLLM's largest MaxLoRARanks, "
        "verl workers/rollout/vllm_rollout/utils.py).")
    lora_alpha: int = Field(16, ge=1, le=1 << 16, description="LoRA alpha (model.lora_alpha; verl's default 16).")
    target_modules: Literal["all-linear"] | list[PlainName] = Field(
        "all-linear", description="Modules the adapters wrap (model.target_modules): `all-linear` (verl's default: "
        "q/k/v/o and the MLP's gate/up/down projections) or a list of module names such as [q_proj, v_proj].")

    @model_validator(mode="after")
    def _custom_model(self) -> "ModelSettings":
        if self.preset == CUSTOM and self.custom is None:
            raise ValueError("model.preset is custom but model.custom is empty; declare the model there (hf_id and "
                             "config_json, or its architecture numbers)")
        if self.preset != CUSTOM and self.custom is not None:
            raise ValueError(f"model.custom is set but model.preset is {self.preset!r}; set model.preset: custom to "
                             "train it, or remove model.custom")
        if self.source == "oss" and self.path is None:
            raise ValueError("model.source is oss but model.path is empty; set it to the key prefix of the model in "
                             "the bucket (e.g. models/my-sft/ or a run's .../actor/huggingface/)")
        if self.source != "oss" and self.path is not None:
            raise ValueError(f"model.path is set but model.source is {self.source}; set model.source: oss to start "
                             "from the bucket, or remove model.path")
        if self.source == "oss" and self.revision is not None:
            raise ValueError("model.revision names a hub revision; a model from the bucket (model.source: oss) has "
                             "none: remove it")
        c = self.custom
        if c is not None and self.source == "huggingface" and c.hf_id is None:
            raise ValueError("model.source is huggingface but model.custom has no hf_id; add it or set model.source: "
                             "modelscope")
        family = c.family if c is not None else PRESETS[self.preset].arch.family
        if self.thinking and not FAMILIES[family].thinking:
            raise ValueError(f"model.thinking is true but the {family} family's chat template has no thinking switch; "
                             "remove it (or use a Qwen3 model)")
        return self


# --------------------------------------------------------------------------------------------- training
class PreflightSettings(Strict):
    enabled: bool | None = Field(
        None, description="Run the fabric preflight (agent_tools/verl_ack_preflight.py) from the RayJob entrypoint "
        "before verl: every GPU's state from nvidia-smi and an NCCL all-reduce across all GPUs of all nodes; the job "
        "fails naming the node when a check fails. Empty = on for multi-node stacks (gpu_pool.nodes > 1) only.")
    min_busbw_gbps: float | None = Field(
        None, ge=0, le=100000, description="Least all-reduce bus bandwidth (GB/s, nccl-tests' busbw) across all GPUs. "
        "Empty = 20 on Lingjun (RDMA between nodes) and 0 on ECS (only GPU state and a completed all-reduce are "
        "checked: the VPC network's speed depends on the instance type). 20 is a floor, not a target: it fails a job "
        "whose NCCL fell back to TCP sockets between Lingjun nodes (a missing or broken RDMA NIC), which moves a few "
        "GB/s, and passes a working RDMA fabric; UNVERIFIED on Lingjun (docs/uncertain-facts.md): set it from a "
        "measured healthy run.")
    size_mib: int = Field(256, ge=1, le=16384, description="All-reduce message per GPU, MiB (large enough for "
                          "the bus bandwidth, not the latency, to dominate).")
    iters: int = Field(20, ge=1, le=10000, description="Timed all-reduce iterations (after 5 warm-up ones).")
    timeout_seconds: int = Field(
        600, ge=30, le=86400, description="Bound on the preflight's process-group start and all-reduce; a hang "
        "(NCCL waiting on a dead link) fails the job after this, naming the ranks that did not finish.")


class AnswerToolSettings(Strict):
    reveal: Literal["parsed", "correctness"] = Field(
        "parsed", description="What the calc_gsm8k_reward tool tells the model. `parsed` (safe): the number the final "
        "reward would read from `#### <answer>`, or that it reads none; never whether it is right. `correctness`: "
        "verl's removed Gsm8kTool's `reward=1.0/0.0`, an oracle a policy can learn to query until it says 1.0 "
        "(the final reward scores only what the model writes, so that no longer pays by itself, but each guess is "
        "information the model did not earn).")
    max_calls: int = Field(
        1, ge=1, le=1000, description="calc_gsm8k_reward calls one trajectory may make; later calls are refused "
        "unchecked (the model is told to write its answer). Each checked wrong answer still costs the tool "
        "penalty in the trajectory's reward.")


class TrainingSettings(Strict):
    recipe: Literal["grpo", "dapo"] = Field(
        "grpo", description="`grpo`: the settings as they are. `dapo`: verl's DAPO recipe (training.dapo: "
        "clip-higher, dynamic sampling with filter_groups and gen_batch_size, token-mean loss, the dapo reward "
        "manager with its overlong buffer, no KL), each key overridable there or in verl_overrides.")
    algorithm: Literal[ADV_ESTIMATORS] = Field(  # type: ignore[valid-type]
        "grpo", description="verl algorithm.adv_estimator (any estimator verl 0.9.1 ships). `gae` is PPO with a "
        "critic, configured in training.critic and counted in the memory estimate.")
    critic: CriticSettings = Field(
        default_factory=CriticSettings, description="The critic of training.algorithm: gae (ignored otherwise).")
    dapo: DapoSettings = Field(
        default_factory=DapoSettings, description="DAPO's keys, used with training.recipe: dapo (ignored otherwise).")
    temperature: float = Field(
        1.0, ge=0, le=100, description="actor_rollout_ref.rollout.temperature of the training rollouts (verl's 1.0).")
    top_p: float = Field(1.0, gt=0, le=1, description="actor_rollout_ref.rollout.top_p (verl's 1.0).")
    val_temperature: float = Field(
        0.0, ge=0, le=100, description="rollout.val_kwargs.temperature: 0 (the default) validates greedily, so scores "
        "compare across runs; the v1 agent loop reads only val_kwargs temperature/top_p/top_k.")
    val_top_p: float = Field(1.0, gt=0, le=1, description="rollout.val_kwargs.top_p (verl's 1.0).")
    verl_overrides: dict[DottedKeyPath, VerlScalar | list | dict] = Field(
        default_factory=dict, max_length=256,
        description="Any other verl key, as `dotted.key: value` (e.g. `actor_rollout_ref.actor.clip_ratio_c: 10`). "
        "plan.py composes the job's whole config against the installed verl config tree in Hydra's struct mode: a "
        "key verl does not have is refused naming the nearest one; a key the program owns (paths, GPUs and nodes, "
        "tool and reward config) or one a setting already writes is refused naming the setting. Scalars go on the "
        "command line, lists and mappings into the trainer file; they are listed in plan.md and part of the "
        "config hash that replaces the job.")
    train_batch_size: int = Field(16, ge=1, le=1 << 20, description="Prompts per step (data.train_batch_size).")
    ppo_mini_batch_size: int = Field(8, ge=1, le=1 << 20, description="Prompts per PPO mini batch (actor.ppo_mini_batch_size).")
    rollout_n: SampleCount = Field(16, description="Responses sampled per prompt (rollout.n).")
    max_prompt_length: int = Field(1024, ge=16, le=1 << 24, description="data.max_prompt_length (tokens).")
    max_response_length: int = Field(1024, ge=16, le=1 << 24, description="data.max_response_length (tokens).")
    lr: Rate = Field(1e-6, description="Actor learning rate.")
    use_kl_loss: bool = Field(True, description="KL loss against the reference policy (needs a ref model).")
    kl_loss_coef: Coefficient = Field(0.001, description="KL loss coefficient.")
    kl_loss_type: Literal["low_var_kl", "kl", "abs", "mse", "full"] = Field("low_var_kl", description="KL estimator.")
    use_kl_in_reward: bool = Field(False, description="algorithm.use_kl_in_reward.")
    entropy_coeff: Coefficient = Field(0.0, description="Entropy bonus coefficient.")
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean", description="actor.loss_agg_mode.")
    use_dynamic_bsz: bool = Field(False, description="Token-based dynamic batch sizes (micro batch rules then do not apply).")
    ppo_max_token_len_per_gpu: int = Field(16384, ge=256, le=1 << 26, description="Token budget per GPU when use_dynamic_bsz.")
    ulysses_sequence_parallel_size: int = Field(1, ge=1, le=4096, description="Ulysses sequence parallel size of the actor.")
    total_training_steps: int | None = Field(
        None, ge=0, le=INT64_MAX, description="Stop after this many steps. Empty = verl's own: total_epochs x steps "
        "per epoch (train rows // train_batch_size, the dataloader drops the last partial batch); the plan's time "
        "and cost use the same count. 0 only with training.val_only.")
    total_epochs: int = Field(1, ge=1, le=1 << 20, description="Epochs over the train set.")
    save_freq: int = Field(
        1, ge=-1, le=INT64_MAX, description="Checkpoint every N steps (-1 = never; a last-step checkpoint is written when > 0).")
    test_freq: int = Field(
        -1, ge=-1, le=INT64_MAX, description="Validate every N steps (-1 = never; when > 0 it also validates at the last step).")
    val_before_train: bool = Field(False, description="Validate before the first step (off for smoke runs: it costs a full pass).")
    max_assistant_turns: int = Field(5, ge=1, le=1000, description="multi_turn.max_assistant_turns.")
    max_parallel_calls: int = Field(
        1, ge=1, le=1000, description="multi_turn.max_parallel_calls: tool calls one turn may run at once.")
    agent_num_workers: int = Field(8, ge=1, le=4096, description="rollout.agent.num_workers (agent-loop worker processes).")
    rollout_engine: Literal["vllm", "sglang"] = Field("vllm", description="Rollout engine (rollout.name).")
    logger: list[Literal["console", "mlflow", "tensorboard", "wandb", "swanlab", "file"]] = Field(
        default_factory=lambda: ["console", "mlflow"], min_length=1, description="trainer.logger backends.")
    project_name: HydraName = Field("gsm8k-tool-agent", description="trainer.project_name (MLflow experiment).")
    experiment_name: HydraName = Field("qwen2.5-3b-grpo-tool-agent", description="trainer.experiment_name (MLflow run).")
    save_contents: list[Literal["model", "optimizer", "extra", "hf_model"]] = Field(
        default_factory=lambda: ["model", "optimizer", "extra", "hf_model"],
        description="Checkpoint contents. model+optimizer+extra make a resume restore optimizer and dataloader state.")
    max_actor_ckpt_to_keep: int | None = Field(
        None, ge=1, le=1 << 20, description="verl trainer.max_actor_ckpt_to_keep: keep only the newest N global_step_* "
        "folders of this run (verl deletes older ones as it saves). Empty = keep every one (each is a full copy of "
        "the model and optimizer in the bucket).")
    resume_from: ObjectPrefix | None = Field(
        None, description="Start from a checkpoint: the key prefix of any run's `global_step_N/` folder under "
        "storage.checkpoints_prefix (e.g. checkpoints/<project>/<other-experiment>/global_step_40/): verl's "
        "trainer.resume_mode: resume_path with trainer.resume_from_path on the checkpoint volume, so a new "
        "experiment branches from another's weights, optimizer and step. Once this run has a checkpoint of its own, "
        "a rerun or a retry continues from its newest one instead (the entrypoint switches to resume_mode auto). "
        "Empty = resume_mode auto: a rerun with the same project and experiment names continues the newest "
        "checkpoint under them.")
    val_only: bool = Field(
        False, description="Evaluate and stop: verl validates the starting model (model.*, or training.resume_from's "
        "checkpoint, or this experiment's newest) on the val set once and exits, with no training step and no "
        "checkpoint (trainer.val_only, which verl reads only with val_before_train, so both are set). "
        "total_training_steps may then be 0.")

    preflight: PreflightSettings = Field(
        default_factory=PreflightSettings, description="The fabric preflight before verl starts.")
    answer_tool: AnswerToolSettings = Field(
        default_factory=AnswerToolSettings, description="What the reward tool (calc_gsm8k_reward) may reveal and "
        "how often a trajectory may call it.")
    gsm8k_scoring: Literal["strict", "flexible"] = Field(
        "strict", description="verl's GSM8K scoring mode for the final reward and the reward tool alike "
        "(verl/utils/reward_score/gsm8k.py). `strict` (verl's default and the tutorial's): the number right after "
        "`#### `, compared as a string with commas dropped: `18.`, `$18`, `18.0`, `\\boxed{18}` and a U+2212 minus "
        "score 0, and `1,8` scores 1 against 18. `flexible`: the last number anywhere in the model's text (no "
        "`####` needed), same string comparison. Only what the model itself wrote is scored in either mode.")
    tool_timeout_seconds: int = Field(
        120, ge=1, le=3600, description="Timeout of one run_code_once call through the sandbox manager's MCP server.")
    max_tool_response_chars: int = Field(
        1024, ge=128, le=16384,
        description="Characters of one tool response the model sees (verl's multi_turn.max_tool_response_length, "
        "default 256, which cut tracebacks in the middle). The code tool clips to it itself, keeping the head and "
        "the tail around a marker. The text counts against max_response_length (about 4 characters a token), so "
        "it may be at most 2 x max_response_length.")

    sweep: SweepSettings | None = Field(
        None, description="Experiment: a small grid over verl settings (lr, kl_loss_coef, rollout_n, entropy_coeff); "
        "each combination runs as its own queued RayJob with its own run name, checkpoint folder and MLflow run "
        "(components/sweep.py). Empty = one run with the values above.")
    # Set by components/sweep.py on a variant's settings, never by a stack file: the variant's folder under the
    # sweep's checkpoint prefix (components/wiring.py checkpoint_key_prefix), so the one training role of the
    # experiment covers every variant and teardown keeps each variant's latest step.
    _sweep_variant: str | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _sweep_variants_valid(self) -> "TrainingSettings":
        # Every variant must be a valid training section on its own (e.g. an lr of 2 is refused here, by name).
        if self.sweep is not None:
            base = self.model_dump(exclude={"sweep"})
            axes = self.sweep.axes()
            for combo in itertools.product(*axes.values()):
                overrides = dict(zip(axes, combo, strict=True))
                try:
                    TrainingSettings.model_validate({**base, **overrides})
                except ValueError as err:
                    raise ValueError(f"training.sweep variant {overrides} is not valid: {err}") from None
        return self

    @model_validator(mode="after")
    def _recipe(self) -> "TrainingSettings":
        apply_recipe(self)  # components/config/recipes.py: DAPO's defaults and rules
        return self

    @model_validator(mode="after")
    def _token_budget(self) -> "TrainingSettings":
        # verl's dynamic batching packs whole sequences into a budget per GPU and asserts max_token_len >=
        # max_seq_len (utils/seqlen_balancing.py get_seqlen_balanced_partitions' caller), mid-run.
        seq = self.max_prompt_length + self.max_response_length
        if self.use_dynamic_bsz and self.ppo_max_token_len_per_gpu * self.ulysses_sequence_parallel_size < seq:
            raise ValueError(
                f"ppo_max_token_len_per_gpu {self.ppo_max_token_len_per_gpu} (x sequence parallel "
                f"{self.ulysses_sequence_parallel_size}) is below one sequence, max_prompt_length + max_response_length = "
                f"{seq}: verl asserts the budget covers the longest sequence (utils/seqlen_balancing.py) after the first "
                f"rollout; raise it to at least {seq} (verl's examples use 2-3x)")
        return self

    @model_validator(mode="after")
    def _tool_response_fits(self) -> "TrainingSettings":
        # The tool's text lands in the response (masked from the loss, but counted): a response that one tool
        # reply could fill ends the trajectory at its first call.
        if self.max_tool_response_chars > 2 * self.max_response_length:
            raise ValueError(
                f"max_tool_response_chars {self.max_tool_response_chars} (about {self.max_tool_response_chars // 4} "
                f"tokens) may be at most 2 x max_response_length ({2 * self.max_response_length}): one tool reply "
                "would take over half the response budget; lower it or raise max_response_length")
        return self

    @model_validator(mode="after")
    def _run_shape(self) -> "TrainingSettings":
        if self.total_training_steps == 0 and not self.val_only:
            raise ValueError("total_training_steps 0 trains nothing; set training.val_only: true to only evaluate, or "
                             "at least 1 step")
        if self.resume_from is not None and not re.fullmatch(r".*/global_step_[0-9]+/", self.resume_from):
            raise ValueError(f"resume_from {self.resume_from!r} must name one checkpoint folder, ending in "
                             "global_step_<N>/ (verl's resume_path reads the step from the name), e.g. "
                             "checkpoints/<project>/<experiment>/global_step_40/")
        return self

    @field_validator("save_contents")
    @classmethod
    def _resumable(cls, v: list[str]) -> list[str]:
        # resume_mode=auto loads `model` from the newest checkpoint; without it a rerun starts from the base
        # weights while skipping the steps already done.
        if "model" not in v:
            raise ValueError("save_contents must include 'model' (resume_mode=auto restores it); keep "
                             "model, optimizer, extra so a resume also restores optimizer and dataloader state")
        if len(set(v)) != len(v):
            raise ValueError("save_contents lists an entry twice")
        return v


# --------------------------------------------------------------------------------------------- job
class JobSettings(Strict):
    name: RayJobName = Field("verl-grpo", description="RayJob name (DNS-1035 label, at most 47 characters).")
    namespace: Dns1123Label = Field("verl", description="Namespace of the training job, its volumes and configs.")
    ray_namespace: Dns1123Label | None = Field(
        None, description="Namespace of the Ray pods when they need the `privileged` Pod Security level (multi-node "
        "Lingjun: host network and RDMA capabilities): the RayJob with its volumes' claims, verl configs, MCP Secret, "
        "training service account and NetworkPolicy go there, so job.namespace (MLflow, the data Jobs, the node gate, "
        "the pre-pull) keeps enforcing `restricted`. Empty = `<job.namespace>-ray`. Refused for any other stack, "
        "whose Ray pods share job.namespace.")
    submission_mode: Literal["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"] = Field(
        "SidecarMode", description="KubeRay submission mode. SidecarMode needs KubeRay >= 1.5.0.")
    active_deadline_seconds: int = Field(
        86400, gt=0, le=INT64_MAX, description="Hard limit on the job's run time; KubeRay stops it after.")
    pre_running_deadline_seconds: int | None = Field(
        None, gt=0, le=2**31 - 1, description="Fail the job if KubeRay has not seen its Ray cluster Ready within this "
        "many seconds of creating it (preRunningDeadlineSeconds, KubeRay >= 1.6.0). Empty = derived from the modelled "
        "wait (GPU nodes' boot when the pool autoscales, the whole image pull, Ray start; components/model/wait.py) x "
        "pre_running_margin_factor + pre_running_margin_minutes. A value below the modelled wait is refused.")
    pre_running_margin_factor: float = Field(
        1.5, ge=1, le=100, description="Derived preRunningDeadlineSeconds: the modelled wait times this (the model's "
        "inputs are typical rates; 1.5 covers a pull at two thirds of the modelled rate).")
    pre_running_margin_minutes: float = Field(
        10, ge=0, le=10080, description="Derived preRunningDeadlineSeconds: minutes added after the factor (scheduling, "
        "volume mounts, a slow first probe).")
    ttl_seconds_after_finished: int = Field(
        300, ge=0, le=2**31 - 1, description="Seconds the finished Ray cluster stays for log inspection before it is deleted.")
    backoff_limit: int | None = Field(
        None, ge=0, le=100, description="RayJob retries (KubeRay backoffLimit): each creates a new Ray cluster and "
        "verl continues from the run's newest checkpoint (resume_mode auto), so a lost node costs one restart, not "
        "the run. Empty = 1 for a multi-node training run that checkpoints before its last step (a node lost in a "
        "long run is the case; verl itself fails on one), else 0; 0 turns retries off. The plan prices the worst "
        "case (every retry's wait to its first step again).")
    node_gate: bool = Field(
        True, description="Before the RayJob is created, a Job waits until the GPU pool's nodes are Ready with the "
        "allocatable the job requests (nvidia.com/gpu, rdma/hca with RDMA) and fails `pulumi up` otherwise, naming "
        "the pool, how many nodes joined and what to check (pipeline/node_gate.py). Not for an autoscaled ECS pool, "
        "whose nodes boot only for the Ray pods.")
    node_gate_timeout_seconds: int = Field(
        900, ge=60, le=86400, description="How long the node gate waits for the GPU nodes after the pool resource "
        "exists (ACK reports a pool created before its nodes are Ready).")
    shm_gib: int | None = Field(
        None, ge=1, le=65536, description="Size of the memory-backed /dev/shm of each Ray pod (vLLM, NCCL), GiB; it counts "
        "against the pod's memory. Empty = a quarter of the pod's memory, at most 64.")
    model_prefetch: bool | None = Field(
        None, description="Copy the staged model from the OSS models volume into a memory-backed directory of every "
        "Ray pod while Ray starts (the pods' `model-prefetch` container, agent_tools/verl_ack_model_prefetch.py), so "
        "verl reads the weights from memory and the OSS read leaves the path to the first step (docs/latency.md). The "
        "copy counts against the pod's memory: job.model_prefetch_gib plus 1 GiB and 1 CPU for the copier, taken from "
        "the Ray container. A copy that fails or does not finish falls back to reading OSS (the job log says so). "
        "Empty = on when that fits in a quarter of the Ray pod's memory.")
    model_prefetch_gib: int | None = Field(
        None, ge=1, le=65536, description="Size of the model copy's memory-backed directory, GiB. Empty = the model's "
        "bf16 weights (2 bytes per parameter) plus 10 % and 1 GiB for the tokenizer and configs; set it for a model "
        "published in fp32. A staged model larger than this is not copied: verl reads it from OSS.")
    env: dict[EnvVarName, EnvValue] = Field(
        default_factory=dict,
        description="Extra environment variables of every Ray pod, e.g. NCCL_SOCKET_IFNAME or NCCL_IB_HCA for RDMA. "
        "The right values depend on the node type's NICs (not preset: check `ibv_devices` / `ip link` on a node). "
        "NCCL_DEBUG defaults to WARN and may be overridden here.")
    host_network_cidrs: list[Cidr] = Field(
        default_factory=list, max_length=64,
        description="Where the Ray pods' traffic comes from when they run on the host network (multi-node Lingjun, "
        "RDMA): the GPU nodes' vSwitch CIDRs. NetworkPolicy pod selectors do not match host-network traffic, so the "
        "policies that admit Ray pods (MLflow's) admit these CIDRs too. Required for multi-node Lingjun: the machines "
        "sit in their own VPC's vSwitch (VPC console > vSwitches; the node IPs: `kubectl get nodes -o wide`).")
    gpu_pod_resources: dict[ExtendedResourceName, ResourceCount] = Field(
        default_factory=dict,
        description="Extended resources each GPU pod requests besides nvidia.com/gpu (e.g. an RDMA device-plugin "
        "resource). Empty = none; the resource name depends on the node type's device plugin.")

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        reserved = {"PYTHONPATH", "MLFLOW_TRACKING_URI"}
        for name in v:
            if name in reserved:
                raise ValueError(f"{name} is set by the program (tool module path / tracking server); remove it")
        return v

    @field_validator("gpu_pod_resources")
    @classmethod
    def _resources(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if name == "nvidia.com/gpu":
                raise ValueError(f"{name} is set from gpu_pool.gpus_per_node; remove it")
        return v


# --------------------------------------------------------------------------------------------- versions
# What each data Job pip-installs (pipeline/gsm8k.py, pipeline/stage_model.py and pipeline/oss_client.py import
# these); each needs a pin in versions.pipeline_packages.
PIPELINE_IMPORTS: dict[str, tuple[str, ...]] = {
    "dataset": ("datasets", "pyarrow", "alibabacloud-oss-v2", "alibabacloud-credentials"),
    "model-huggingface": ("huggingface-hub", "alibabacloud-oss-v2", "alibabacloud-credentials"),
    "model-modelscope": ("modelscope", "alibabacloud-oss-v2", "alibabacloud-credentials"),
}




# --------------------------------------------------------------------------------------------- tracking
class TrackingSettings(Strict):
    enabled: bool = Field(True, description="Run an MLflow tracking server that outlives the job.")
    storage_class: StorageClassNameOrEmpty | None = Field(
        "alicloud-disk-topology-alltype",
        description="StorageClass of the tracking server's backend-store disk (sqlite). The topology class creates "
        "the disk in the zone the pod lands in (WaitForFirstConsumer); ACK's alicloud-disk-essd binds Immediately, in "
        "the provisioner's zone, which a multi-zone system pool may not reach. Check `kubectl get storageclass`.")
    disk_gib: int = Field(20, ge=20, le=65536, description="Backend-store disk size (ESSD minimum is 20 GiB).")
    backend_disk: Literal["owned", "dynamic"] = Field(
        "owned", description="`owned` (a new cluster only): the backend disk is a Pulumi-owned ECS disk (category "
        "`disk_category`, zone `zones[0]`) bound through a static PersistentVolume and deleted after the cluster, so "
        "destroy never leaves it billing. `dynamic`: a PVC of `storage_class`, whose disk the CSI provisioner may not "
        "have deleted when the cluster goes (always used in an existing cluster). Switching replaces the disk: the "
        "MLflow run history (not the artifacts, which are in OSS) starts empty.")
    disk_category: Literal["cloud_essd", "cloud_ssd", "cloud_efficiency", "cloud_auto"] = Field(
        "cloud_essd", description="ECS category of the owned backend disk (backend_disk: owned).")
    cpu: CpuQuantity = Field("1", description="CPU request and limit of the MLflow server.")
    memory: MemoryQuantity = Field("2Gi", description="Memory request and limit of the MLflow server.")

    @model_validator(mode="after")
    def _storage(self) -> TrackingSettings:
        if self.enabled and not self.storage_class:
            raise ValueError("tracking.enabled needs storage_class (e.g. alicloud-disk-topology-alltype) for its "
                             "backend store; set one or set tracking.enabled: false")
        return self
