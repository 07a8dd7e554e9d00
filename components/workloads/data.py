"""The dataset Job and the model staging Job: they fill the bucket before training reads it.

- A ConfigMap ships the in-cluster code (`pipeline/*.py`, read when the program runs). Its name carries a digest
  of those files, and each Job's name carries a digest of the code and of its own spec: Jobs are immutable, so a
  change to the code or to a setting the Job uses makes a new Job (a new run) instead of a failed update.
- `<dataset>-<digest>` (e.g. `gsm8k-…`, `math-lighteval-…`, `eurus-2-rl-data-…`) runs the task preset's converter
  (`wiring.PRESET_CONVERTERS`: `python -m pipeline.gsm8k`, or `python -m pipeline.task_dataset` for math and code):
  the hub dataset -> verl parquet files under `wiring.dataset_files(settings).prefix` (full splits and the small
  subsets), every row checked first (pipeline/rows.py). Its rows name verl's single_turn_agent when the task has no
  tools (`wiring.single_turn`), else tool_agent. A task on its own files has no dataset Job (`dataset_job_needed`).
- `stage-<model>-<digest>` runs `python -m pipeline.stage_model`: the preset's weights from Hugging Face or
  ModelScope into `wiring.model_path(settings)` (content-addressed by hub, repo and revision), skipped when its
  completion marker is already there.
- A Job whose prefix the program found complete before the `up` (components/workloads/cache.py) is not created.

Both run on the system pool as the RRSA-annotated dataset service account, as a non-root user with a read-only
root filesystem; they pip-install exact pins (`versions.pipeline_packages`) into scratch space at start.
pulumi-kubernetes waits for a Job to complete (or fail) before it reports the resource created, so
`DataJobs.ready` is a list the RayJob can depend on (see the note on `DataJobs`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.config import PIPELINE_IMPORTS, REPO_ROOT, Settings
from components.model import preset_of
from components.wiring import (
    PRESET_CONVERTERS,
    RERUN_FAILED_JOB,
    ClusterRefs,
    StorageRefs,
    WorkloadIdentity,
    dataset_files,
    model_path,
    model_repo,
    oss_endpoint,
    resource_kwargs,
    restricted_container_security,
    single_turn,
    system_scheduling,
)
from components.workloads.cache import CacheEntry, Staged, dataset_job_needed
from components.workloads.training.verl_config import TOOL_AGENT_NAME

PIPELINE_DIR = REPO_ROOT / "pipeline"
CODE_ROOT = "/opt/verl-ack"  # the ConfigMap is mounted at <CODE_ROOT>/pipeline, so `python -m pipeline.x` works
SCRATCH = "/scratch"
SITE = f"{SCRATCH}/site"  # pip --target: the root filesystem stays read-only
HUB_TOKENS_SECRET = "verl-hub-tokens"
HUB_TOKEN_KEYS = {"hf": "hf-token", "modelscope": "modelscope-token"}
# Keys of the access-key Secret (the OSS CSI driver's convention, which the cloud layer follows).
ACCESS_KEY_ID_KEY, ACCESS_KEY_SECRET_KEY = "akId", "akSecret"
NOBODY = 65534
# verl's agent loop without tools (verl 0.9.1 experimental/agent_loop/single_turn_agent_loop.py
# `@register("single_turn_agent")`); pipeline/rows.py names the same (the pod cannot import components/, and
# components may not import the pod's code: tests/components/workloads/test_data.py compares them).
SINGLE_TURN_AGENT = "single_turn_agent"
# A ConfigMap holds at most 1 MiB; leave room for its metadata.
CONFIGMAP_LIMIT = 900 * 1024
DATASET_SCRATCH = "4Gi"
PART_OF = {"app.kubernetes.io/part-of": "verl-ack"}


# --------------------------------------------------------------------------------------------- code
@dataclass(frozen=True)
class PipelineCode:
    files: dict[str, str]  # file name -> text, sorted by name
    digest: str  # sha256 over names and contents

    @property
    def short(self) -> str:
        return self.digest[:10]


def pipeline_code(directory: Path = PIPELINE_DIR) -> PipelineCode:
    """The `*.py` files of the pipeline package as they are now, and their digest."""
    paths = sorted(directory.glob("*.py"))
    if not any(p.name == "__init__.py" for p in paths):
        raise FileNotFoundError(f"{directory} has no __init__.py: the Jobs import it as the `pipeline` package")
    files = {p.name: p.read_text() for p in paths}
    h = hashlib.sha256()
    for name, text in files.items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    size = sum(len(k) + len(v.encode()) for k, v in files.items())
    if size > CONFIGMAP_LIMIT:
        raise ValueError(f"pipeline/*.py holds {size} bytes; a ConfigMap carries at most ~1 MiB")
    return PipelineCode(files=files, digest=h.hexdigest())


def code_configmap_name(code: PipelineCode) -> str:
    return f"verl-pipeline-{code.short}"


def code_configmap_manifest(s: Settings, code: PipelineCode) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": code_configmap_name(code), "namespace": s.job.namespace,
                     "labels": {"app.kubernetes.io/name": "verl-pipeline", "verl-ack/code-digest": code.short,
                                **PART_OF}},
        # Named by its content, so it never needs to change: immutable also spares the API server the watch.
        "immutable": True,
        "data": dict(code.files),
    }


# --------------------------------------------------------------------------------------------- pieces
def packages(s: Settings, job: str) -> list[str]:
    """Exact pins for one Job (`dataset`, `model-huggingface` or `model-modelscope`)."""
    pins = s.versions.pipeline_packages
    return [f"{name}=={pins[name]}" for name in PIPELINE_IMPORTS[job]]


def job_script(s: Settings, pins: list[str], module: str) -> str:
    """The container's shell script: install the pins into scratch, then run the module."""
    index = f" --index-url {shlex.quote(s.versions.pip_index_url)}" if s.versions.pip_index_url else ""
    return "\n".join([
        "set -eu",
        'mkdir -p "$HOME"',
        "python -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location --quiet "
        f"--target {shlex.quote(SITE)}{index} " + " ".join(shlex.quote(p) for p in pins),
        f"exec python -m {shlex.quote(module)}",
    ])


def scratch_disk_gib(s: Settings) -> int:
    """Scratch disk of the model staging Job: the bf16 weights (2 bytes per parameter) plus a quarter for the
    tokenizer, the hub client's caches and pip, plus 10 GiB; at least 20 GiB (the ESSD minimum)."""
    weights_gib = preset_of(s).arch.params * 2 / 2**30
    return max(20, math.ceil(weights_gib * 1.25) + 10)


def _oss_env(s: Settings, storage: StorageRefs, prefix: str) -> list[dict]:
    env = [
        {"name": "OSS_BUCKET", "value": storage.bucket_name},
        {"name": "OSS_REGION", "value": s.region},
        {"name": "OSS_ENDPOINT", "value": storage.endpoint},
        {"name": "OSS_PREFIX", "value": prefix},
    ]
    if storage.auth == "access_key":
        # Fallback only: with RRSA the pod identity webhook injects the role's OIDC variables instead.
        if not storage.access_key_secret_name:
            raise ValueError("storage.auth=access_key but the storage layer gave no access-key Secret name")
        env += [
            {"name": "OSS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
                "name": storage.access_key_secret_name, "key": ACCESS_KEY_ID_KEY}}},
            {"name": "OSS_ACCESS_KEY_SECRET", "valueFrom": {"secretKeyRef": {
                "name": storage.access_key_secret_name, "key": ACCESS_KEY_SECRET_KEY}}},
        ]
    return env


def _token_env(name: str, token: str) -> dict:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": HUB_TOKENS_SECRET, "key": HUB_TOKEN_KEYS[token]}}}


def _runtime_env() -> list[dict]:
    return [
        {"name": "PYTHONPATH", "value": f"{SITE}:{CODE_ROOT}"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # the code mount is read-only
        {"name": "PYTHONUNBUFFERED", "value": "1"},  # progress lines reach `kubectl logs` as they happen
        {"name": "HOME", "value": f"{SCRATCH}/home"},  # hub clients write caches under $HOME
        {"name": "HF_HOME", "value": f"{SCRATCH}/hf"},
    ]


def _job(s: Settings, code: PipelineCode, *, component: str, module: str, pins: list[str], env: list[dict],
         scratch: dict, service_account: str, extra_resources: dict) -> dict:
    d = s.dataset
    sched = system_scheduling(s)
    labels = {"app.kubernetes.io/name": "verl-data", "app.kubernetes.io/component": component,
              "verl-ack/code-digest": code.short, **PART_OF}
    resources = {"cpu": d.job_cpu, "memory": d.job_memory}
    pod_spec: dict = {
        # Never: a failed pod stays for its logs and the Job makes a new one (backoffLimit), instead of the
        # kubelet restarting the container in place and overwriting them.
        "restartPolicy": "Never",
        "serviceAccountName": service_account,
        # The Job never calls the Kubernetes API; RRSA's OIDC token is a separate projected volume the pod
        # identity webhook adds.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(sched.node_selector),
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY, "fsGroup": NOBODY,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": component,
            "image": s.versions.dataset_image,
            "command": ["/bin/sh", "-c", job_script(s, pins, module)],
            "env": _runtime_env() + env,
            "resources": {"requests": {**resources, **extra_resources}, "limits": {**resources, **extra_resources}},
            "securityContext": restricted_container_security(),
            "volumeMounts": [
                {"name": "code", "mountPath": f"{CODE_ROOT}/pipeline", "readOnly": True},
                {"name": "scratch", "mountPath": SCRATCH},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }],
        "volumes": [
            {"name": "code", "configMap": {"name": code_configmap_name(code), "defaultMode": 0o444}},
            {"name": "scratch", **scratch},
            {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
        ],
    }
    if sched.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in sched.tolerations]
    spec: dict = {"backoffLimit": d.backoff_limit, "activeDeadlineSeconds": d.active_deadline_seconds}
    if d.ttl_seconds_after_finished is not None:
        # Only on request: the TTL controller deletes the Job behind Pulumi (drift, a re-run on `up --refresh`).
        spec["ttlSecondsAfterFinished"] = d.ttl_seconds_after_finished
    spec["template"] = {"metadata": {"labels": labels}, "spec": pod_spec}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "", "namespace": s.job.namespace, "labels": dict(labels)},
        "spec": spec,
    }


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _named(base: str, build, s: Settings, code: PipelineCode, storage: StorageRefs) -> dict:
    """The Job from `build(storage)`, named `<base>-<digest>` where the digest covers the code and the Job as
    rendered from the settings alone (the bucket name from settings stands in for the bucket's Output)."""
    # An experiment's bucket and endpoint are Outputs of its platform reference; the settings name the same ones.
    plain = build(dataclasses.replace(storage, bucket_name=s.storage.bucket_name, endpoint=oss_endpoint(s.region)))
    digest = hashlib.sha256((code.digest + json.dumps(plain, sort_keys=True)).encode()).hexdigest()[:10]
    job = build(storage)
    job["metadata"]["name"] = f"{base[:52]}-{digest}"  # <= 63 characters: it becomes a pod label value
    return job


# --------------------------------------------------------------------------------------------- Jobs
def dataset_agent_env(s: Settings) -> list[dict]:
    """The agent loop every row names (AGENT_NAME): verl's single_turn_agent for a task without tools, else
    tool_agent (whose rows carry the answer tool's ground truth)."""
    return [{"name": "AGENT_NAME", "value": SINGLE_TURN_AGENT if single_turn(s) else TOOL_AGENT_NAME}]


def dataset_job_manifest(s: Settings, code: PipelineCode, storage: StorageRefs, service_account: str,
                         tokens: frozenset[str] = frozenset()) -> dict:
    """`tokens`: which hub tokens the hub-token Secret holds ({"hf", "modelscope"}). Only for a preset task
    (`dataset_job_needed`): own files are uploaded by the program, not converted by a Job."""
    if not dataset_job_needed(s):
        raise ValueError("dataset_job_manifest: task.dataset names your own files; no dataset Job converts them")
    d, preset, name = s.dataset, s.task.preset, s.task.dataset.preset_name
    config = d.config or preset.config

    def build(st: StorageRefs) -> dict:
        env = _oss_env(s, st, dataset_files(s).prefix) + [
            {"name": "DATASET_NAME", "value": preset.hub_id},
            *([{"name": "DATASET_CONFIG", "value": config}] if config else []),
            *dataset_agent_env(s),
            # Always write the small subsets too: smoke stacks train on them, and they are tiny.
            {"name": "SUBSETS", "value": f"train:{d.train_subset},test:{d.test_subset}"},
            {"name": "OUTPUT_DIR", "value": f"{SCRATCH}/out"},
        ]
        if "hf" in tokens:
            env.append(_token_env("HF_TOKEN", "hf"))
        return _job(s, code, component="dataset", module=f"pipeline.{PRESET_CONVERTERS[name]}",
                    pins=packages(s, "dataset"), env=env,
                    scratch={"emptyDir": {"sizeLimit": DATASET_SCRATCH}}, service_account=service_account,
                    extra_resources={"ephemeral-storage": DATASET_SCRATCH})

    return _named(_slug(preset.hub_id.split("/")[-1]), build, s, code, storage)


def model_job_manifest(s: Settings, code: PipelineCode, storage: StorageRefs, service_account: str,
                       tokens: frozenset[str] = frozenset()) -> dict:
    source = s.model.source
    preset = preset_of(s)

    def build(st: StorageRefs) -> dict:
        env = _oss_env(s, st, model_path(s)) + [
            {"name": "MODEL_SOURCE", "value": source},
            {"name": "MODEL_ID", "value": model_repo(s)},
            *([{"name": "MODEL_REVISION", "value": s.model.revision}] if s.model.revision else []),
            {"name": "DOWNLOAD_DIR", "value": f"{SCRATCH}/model"},
            {"name": "MODELSCOPE_CACHE", "value": f"{SCRATCH}/modelscope"},
        ]
        if source == "huggingface" and "hf" in tokens:
            env.append(_token_env("HF_TOKEN", "hf"))
        if source == "modelscope" and "modelscope" in tokens:
            env.append(_token_env("MODELSCOPE_TOKEN", "modelscope"))
        # A disk of its own, sized for the model and deleted with the pod: the node's system disk cannot hold a
        # 72B model, and a failed run must not leave tens of GiB behind.
        scratch = {"ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app.kubernetes.io/name": "verl-data", **PART_OF}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": s.dataset.staging_storage_class,
                     "resources": {"requests": {"storage": f"{scratch_disk_gib(s)}Gi"}}},
        }}}
        return _job(s, code, component="model-staging", module="pipeline.stage_model",
                    pins=packages(s, f"model-{source}"), env=env, scratch=scratch, service_account=service_account,
                    extra_resources={})

    return _named(f"stage-{_slug(preset.dir_name)}", build, s, code, storage)


def hub_token_keys(hf_token: bool, modelscope_token: bool) -> frozenset[str]:
    return frozenset(k for k, present in (("hf", hf_token), ("modelscope", modelscope_token)) if present)


def hub_tokens_secret_manifest(s: Settings) -> dict:
    """The hub-token Secret without its values (the component adds them as secret Outputs)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": HUB_TOKENS_SECRET, "namespace": s.job.namespace, "labels": dict(PART_OF)}}


# --------------------------------------------------------------------------------------------- component
@dataclass(kw_only=True)
class DataArgs:
    settings: Settings
    cluster: ClusterRefs
    storage: StorageRefs
    identity: WorkloadIdentity
    hf_token: Optional[pulumi.Input[str]] = None  # secrets.hf_token
    modelscope_token: Optional[pulumi.Input[str]] = None  # secrets.modelscope_token
    # What the staging cache holds already (components/workloads/cache.py); None or an entry not known complete:
    # the Job runs.
    cache: Optional[dict[Staged, CacheEntry]] = None


class DataJobs(pulumi.ComponentResource):
    """The pipeline ConfigMap, the dataset Job and the model staging Job.

    `ready` lists the two Jobs. pulumi-kubernetes reports a Job created only once it has completed, and fails the
    update when it fails, so a RayJob with `depends_on=data.ready` is created only after the parquet files and
    the model are in the bucket: training never starts (and never holds GPUs) on missing inputs. A later code or
    settings change re-runs the Jobs under new names; that does not replace the RayJob (depends_on orders
    creation, it does not propagate replacement).
    """

    def __init__(self, name: str, args: DataArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("verl-ack:data:DataJobs", name, None, opts)
        s = args.settings
        code = pipeline_code()  # pipeline/*.py as they are when the program runs
        provider = args.cluster.k8s_provider
        identity = args.identity
        if identity.namespace != s.job.namespace:
            raise ValueError(f"workload namespace {identity.namespace!r} differs from job.namespace "
                             f"{s.job.namespace!r}")

        def child(depends_on: list[pulumi.Resource], **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on, **extra)

        # Objects in the workload namespace wait for it; the Jobs also for their RRSA accounts (identity.resources),
        # the ConfigMap and Secret they mount do not (the node gate mounts the ConfigMap beside the RayJob's wait
        # for those accounts' roles).
        in_namespace = list(identity.namespaces)
        tokens = hub_token_keys(args.hf_token is not None, args.modelscope_token is not None)
        token_secret: list[pulumi.Resource] = []
        if tokens:
            values = {HUB_TOKEN_KEYS["hf"]: args.hf_token, HUB_TOKEN_KEYS["modelscope"]: args.modelscope_token}
            token_secret.append(k8s.core.v1.Secret(
                f"{name}-hub-tokens", **resource_kwargs(hub_tokens_secret_manifest(s)),
                string_data={k: v for k, v in values.items() if v is not None}, opts=child(in_namespace)))

        self.code_config_map = k8s.core.v1.ConfigMap(
            f"{name}-code", **resource_kwargs(code_configmap_manifest(s, code)), opts=child(in_namespace))

        # A Job's pod needs: its namespace and RRSA service account (identity), the code ConfigMap and token
        # Secret it mounts, nodes (cluster.ready), the pod identity webhook that injects the RRSA variables at pod
        # creation, and the disk CSI for the model Job's scratch disk. Pulumi waits for completion, bounded by the
        # Job's own activeDeadlineSeconds plus a margin for scheduling and image pulls.
        needs = [*identity.resources, self.code_config_map, *token_secret, *args.cluster.ready,
                 *args.cluster.addons.pod_identity, *args.cluster.addons.csi]
        wait = pulumi.CustomTimeouts(create=f"{s.dataset.active_deadline_seconds // 60 + 5}m",
                                     update=f"{s.dataset.active_deadline_seconds // 60 + 5}m")
        sa = identity.dataset_service_account
        cache = args.cache or {}
        # A prefix whose completion marker the program found (an experiment on its platform's bucket) gets no Job:
        # nothing on the RayJob's path stages it again. The cache entry is named in the outputs instead.
        staged = {what: e for what, e in cache.items() if not e.needs_job}
        # A task on its own files has no dataset Job: the program uploads those files (no conversion to wait for).
        own_files = not dataset_job_needed(s)
        self.dataset_job: Optional[k8s.batch.v1.Job] = None if own_files or "dataset" in staged else k8s.batch.v1.Job(
            f"{name}-dataset", **resource_kwargs(dataset_job_manifest(s, code, args.storage, sa, tokens)),
            opts=child(needs, custom_timeouts=wait, **RERUN_FAILED_JOB))  # a failed Job runs again next `up`
        self.model_job: Optional[k8s.batch.v1.Job] = None if "model" in staged else k8s.batch.v1.Job(
            f"{name}-model", **resource_kwargs(model_job_manifest(s, code, args.storage, sa, tokens)),
            opts=child(needs, custom_timeouts=wait, **RERUN_FAILED_JOB))
        self.ready: list[pulumi.Resource] = [j for j in (self.dataset_job, self.model_job) if j is not None]
        self.register_outputs({
            "dataset_job": (self.dataset_job.metadata["name"] if self.dataset_job
                            else "none: task.dataset names your own files" if own_files
                            else f"cached: {staged['dataset'].marker}"),
            "model_job": self.model_job.metadata["name"] if self.model_job else f"cached: {staged['model'].marker}",
            "code_config_map": self.code_config_map.metadata["name"],
        })


# --------------------------------------------------------------------------------------------- plan
