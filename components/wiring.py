"""What the components hand to each other.

The cloud layer (cluster, node pools, bucket, RRSA identities) produces these; the workloads (volumes,
verl configs, RayJob, sandboxes, data jobs, tracking) consume them. Keeping the hand-over typed and in one
place means no file repeats a taint, a label, a service-account name or an endpoint literal.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import pulumi

from components.config import REPO_ROOT, Settings
from components.config.task import resolve_task_path
from components.model import preset_of

# Labels and taints the program puts on its node pools. The GPU taint keeps everything but training off
# the GPUs; Lingjun nodes additionally carry ACK's own `node-role.alibabacloud.com/lingjun` taint (the
# tutorial's RayJob tolerates it), which training pods must tolerate too.
POOL_LABEL = "verl-ack/pool"
GPU_TAINT_KEY = "verl-ack/gpu"
LINGJUN_TAINT_KEY = "node-role.alibabacloud.com/lingjun"
# What a workload is for (e.g. `prepull`), read back by the time-to-first-step model (offline/report/latency/).
ROLE_LABEL = "verl-ack/role"


@dataclass(frozen=True)
class Scheduling:
    """Where a workload runs: the node selector and tolerations of one pool."""

    node_selector: dict[str, str]
    tolerations: list[dict] = field(default_factory=list)


def gpu_scheduling(s: Settings) -> Scheduling:
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if s.gpu_pool.kind == "lingjun":
        tolerations.append({"key": LINGJUN_TAINT_KEY, "operator": "Exists"})
    return Scheduling(node_selector={POOL_LABEL: "gpu"}, tolerations=tolerations)


def system_scheduling(s: Settings) -> Scheduling:
    return Scheduling(node_selector={POOL_LABEL: "system"}, tolerations=[])


# The dedicated sandbox pool (sandbox.dedicated_pool) is tainted so only the sandboxes, which tolerate it, land there.
SANDBOX_TAINT_KEY = "verl-ack/sandbox"


def sandbox_scheduling(s: Settings) -> Scheduling:
    """Where the sandbox pods run: the dedicated pool when there is one, else the system pool."""
    if s.sandbox.dedicated_pool is None:
        return system_scheduling(s)
    return Scheduling(node_selector={POOL_LABEL: "sandbox"},
                      tolerations=[{"key": SANDBOX_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}])


# Pod Security Admission (https://kubernetes.io/docs/concepts/security/pod-security-admission/): the namespace labels
# that enforce a Pod Security Standard level. warn and audit always name `restricted`, so anything below it shows up
# in kubectl warnings and the audit log even where a lower level is enforced.
PSA_LEVELS = ("privileged", "baseline", "restricted")


def pod_security_version(s: Settings) -> str:
    """The Pod Security Standards version the namespaces pin (`v<major>.<minor>`): the cluster's Kubernetes minor
    (cluster.kubernetes_version), else the minor the manifests are validated against (cluster.schema_version), never
    `latest`, which moves the rules under running pods when the control plane is upgraded (kubernetes.io "Enforce Pod
    Security Standards by Configuring the Built-in Admission Controller": version label values are "latest" or "a
    specific version like v1.35"; "... with Namespace Labels" pins v1.30 that way; docs/facts.md)."""
    version = s.cluster.kubernetes_version or s.cluster.schema_version
    major, minor = version.split(".")[:2]
    return f"v{major}.{minor}"


def pod_security_labels(enforce: str, s: Settings) -> dict[str, str]:
    if enforce not in PSA_LEVELS:
        raise ValueError(f"{enforce!r} is not a Pod Security Standard level ({', '.join(PSA_LEVELS)})")
    version = pod_security_version(s)
    return {"pod-security.kubernetes.io/enforce": enforce, "pod-security.kubernetes.io/enforce-version": version,
            "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": version,
            "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": version}


def restricted_container_security() -> dict:
    """A container securityContext that meets the restricted Pod Security Standard with the pod's
    `non_root_pod_security`: no privilege escalation, a read-only root filesystem, every capability dropped."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def non_root_pod_security(uid: int) -> dict:
    """The pod securityContext of a restricted pod running as `uid` (user and group), RuntimeDefault seccomp."""
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "seccompProfile": {"type": "RuntimeDefault"}}


def ray_pods_use_rdma(s: Settings) -> bool:
    """Multi-node Lingjun jobs talk over RDMA, so their Ray pods run as root and add IPC_LOCK and SYS_RESOURCE
    (components/workloads/training/rayjob.py uses_rdma with layout.nodes == gpu_pool.nodes; a test keeps the two
    equal)."""
    return s.gpu_pool.kind == "lingjun" and s.gpu_pool.nodes > 1


# On the namespace the program creates for a job's Ray pods (components/cloud/identity.py): MLflow, which has no
# authentication, admits Ray pods only from namespaces carrying it (network_policies.mlflow_network_policy_manifest).
TRACKING_CLIENT_LABEL = "verl-ack/tracking-client"


def ray_namespace(s: Settings) -> str:
    """Where the Ray pods (and what they mount or run as) live: a namespace of their own when they need
    `privileged` (job.ray_namespace, default `<job.namespace>-ray`), so nothing else runs without enforcement;
    otherwise job.namespace."""
    if not ray_pods_use_rdma(s):
        return s.job.namespace
    return s.job.ray_namespace or f"{s.job.namespace}-ray"


def job_namespace_pod_security(s: Settings) -> str:
    """With RDMA the Ray pods have their own namespace and every pod left in the job namespace (hardened data, gate,
    MLflow, pre-pull pods) meets restricted; otherwise the Ray pods share it, run as the image's user with no added
    capabilities and meet baseline."""
    return "restricted" if ray_pods_use_rdma(s) else "baseline"


def ray_namespace_pod_security(s: Settings) -> str:
    """RDMA Ray pods use the host network and add IPC_LOCK/SYS_RESOURCE, which baseline forbids; otherwise the Ray
    namespace is the job namespace."""
    return "privileged" if ray_pods_use_rdma(s) else job_namespace_pod_security(s)


def sandbox_namespace_pod_security(s: Settings) -> str:
    """restricted needs runAsNonRoot, which the root code-interpreter image cannot meet (sandbox.run_as_user)."""
    return "restricted" if s.sandbox.run_as_user is not None else "baseline"


def oss_endpoint(region: str, internal: bool = True) -> str:
    """OSS endpoint of a region; pods use the free intranet endpoint
    (https://www.alibabacloud.com/help/en/oss/user-guide/regions-and-endpoints)."""
    return f"oss-{region}{'-internal' if internal else ''}.aliyuncs.com"


# Service accounts of the workloads that reach OSS through RRSA (one RAM role each, least privilege).
DATASET_SERVICE_ACCOUNT = "verl-data"
TRAINING_SERVICE_ACCOUNT = "verl-train"
TRACKING_SERVICE_ACCOUNT = "verl-mlflow"
# The pre-pull DaemonSet (components/workloads/prepull.py) runs as the namespace's `default` service account, named
# so the ACR credential helper's config can list it (components/cloud/registry.py). KubeRay's submitter Job, which
# runs the training image too, uses `default` as well.
PREPULL_SERVICE_ACCOUNT = "default"


# The ALB IngressClass the cloud layer creates (components/cloud/ingress.py) when sandbox.domain is set, and the
# annotation an Ingress on it needs to listen on 443 only: the AlbConfig has no HTTP listener, so the E2B key never
# crosses the network in clear text (ALB Ingress dictionary:
# https://www.alibabacloud.com/help/en/cs/user-guide/alb-ingress-configuration-dictionary).
ALB_INGRESS_CLASS = "alb"
ALB_HTTPS_ANNOTATIONS = {
    "alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS": 443}]',
}


@dataclass
class AddonRefs:
    """Cluster add-ons Kubernetes objects must wait for; an empty list means not installed by this stack."""

    csi: list[pulumi.Resource] = field(default_factory=list)  # OSS/disk CSI (PersistentVolumes, disks)
    kuberay: list[pulumi.Resource] = field(default_factory=list)  # RayJob CRD and operator
    sandbox: list[pulumi.Resource] = field(default_factory=list)  # ACK sandbox controller + manager add-ons
    pod_identity: list[pulumi.Resource] = field(default_factory=list)  # RRSA webhook (pods using RRSA SAs)


@dataclass
class ClusterRefs:
    """The cluster every Kubernetes object is applied to."""

    cluster_id: pulumi.Input[str]
    k8s_provider: pulumi.ProviderResource
    # Resources Kubernetes objects must wait for (e.g. the node pools, so pods have somewhere to run).
    ready: list[pulumi.Resource] = field(default_factory=list)
    addons: AddonRefs = field(default_factory=AddonRefs)


@dataclass
class StorageRefs:
    """The OSS bucket and how pods authenticate to it."""

    bucket_name: pulumi.Input[str]
    endpoint: str  # intranet endpoint for pods
    auth: str  # "rrsa" | "access_key"
    csi_role_name: pulumi.Input[str] | None = None  # RAM role the OSS CSI fuse pods assume (rrsa)
    access_key_secret_name: str | None = None  # k8s Secret with akId/akSecret (access_key fallback)


@dataclass
class WorkloadIdentity:
    """Namespace and RRSA-annotated service accounts of the training side."""

    namespace: str
    # The Ray pods' namespace (wiring.ray_namespace): the training service account, the RayJob and what it mounts.
    # Empty = `namespace`.
    ray_namespace: str = ""
    dataset_service_account: str = DATASET_SERVICE_ACCOUNT
    training_service_account: str = TRAINING_SERVICE_ACCOUNT
    tracking_service_account: str = TRACKING_SERVICE_ACCOUNT
    # The Namespace/ServiceAccount resources, for depends_on of objects placed in them.
    resources: list[pulumi.Resource] = field(default_factory=list)
    # The Namespace resources alone, for objects that run under a service account of their own: they need not
    # wait for the RRSA roles the identity's service accounts name (the node gate, components/workloads/training).
    namespaces: list[pulumi.Resource] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ray_namespace = self.ray_namespace or self.namespace


# ------------------------------------------------------------------------------------------------
# The platform/experiment hand-over: what a platform stack exports and an experiment stack reads back through
# `pulumi.StackReference` (components/platform.py, components/experiment.py; docs/stacks.md). A `single` stack
# builds the same object from its own resources and passes it directly.


# The one organization of the self-managed (DIY: file or object store) backend: every stack there is
# organization/<project>/<stack> (pulumi/pulumi@1b5949891b pkg/backend/diy/backend.go diyBackendReference.Organization,
# state.go), and it is what pulumi.get_organization() returns on it.
DIY_ORGANIZATION = "organization"


def stack_reference_name(full_name: str) -> str:
    """The name to give `pulumi.StackReference` for the stack `full_name` (<organization>/<project>/<stack>, a stack of
    this project). On a DIY backend the bare <stack>: its legacy layout (a bucket without projects) parses the name
    as a stack name, which may not contain "/" (pkg/backend/diy/store.go legacyReferenceStore.ParseReference,
    tokens.ParseStackName), and its project layout reads a bare name as a stack of the current project
    (projectReferenceStore.ParseReference), which is this one. Elsewhere (Pulumi Cloud) the full name: a bare one
    would be read in the user's default organization."""
    if pulumi.get_organization() == DIY_ORGANIZATION:
        return full_name.rsplit("/", 1)[-1]
    return full_name


@dataclass
class PlatformRefs:
    """Every platform value an experiment uses. Each field is one stack output of the platform (same name); an
    experiment never derives one of these from its own settings."""

    region: pulumi.Input[str]
    cluster_id: pulumi.Input[str]
    node_vswitch_ids: pulumi.Input[dict[str, str]]  # zone -> node vSwitch id (GPU pools go in the GPU zone's)
    bucket_name: pulumi.Input[str]
    oss_endpoint: pulumi.Input[str]  # intranet endpoint for pods
    csi_role_name: pulumi.Input[str]  # RRSA role of the OSS CSI fuse pods (the experiment's volumes name it)
    oidc_provider_arn: pulumi.Input[str]  # the cluster's RRSA OIDC provider: the experiment's RAM roles trust it
    oidc_issuer_url: pulumi.Input[str]
    training_image: pulumi.Input[str]  # in-region registry, pinned by digest
    namespace: pulumi.Input[str]  # the platform's namespace (MLflow); experiments use their own job.namespace
    mcp_url: pulumi.Input[str]  # "" when the platform runs no sandboxes
    tracking_uri: pulumi.Input[str]  # "" when the platform runs no MLflow
    # gpu_pool.owner: "platform" when the platform keeps the GPU pool (Lingjun: joined, image pre-pulled), with its
    # id; "experiment" and "" when each experiment creates its own. An experiment refuses a platform that disagrees.
    gpu_pool_owner: pulumi.Input[str]
    gpu_pool_id: pulumi.Input[str]
    # The queue's quota leaves: RayJob namespace -> its team and the most one job may take (components/queue.py
    # team_limits); {} when the platform runs no queue. A queued experiment refuses a namespace that is in none.
    queue_teams: pulumi.Input[dict]

    # No credential: an experiment fetches its own for `cluster_id` (components/cloud/cluster.py kubernetes_provider),
    # so nothing that expires, and nothing that logs in, crosses the StackReference.
    KEYS = ("region", "cluster_id", "node_vswitch_ids", "bucket_name", "oss_endpoint", "csi_role_name",
            "oidc_provider_arn", "oidc_issuer_url", "training_image", "namespace", "mcp_url", "tracking_uri",
            "gpu_pool_owner", "gpu_pool_id", "queue_teams")

    def to_exports(self) -> dict[str, pulumi.Input]:
        """The platform stack's outputs, one per field."""
        return {k: getattr(self, k) for k in self.KEYS}

    @classmethod
    def from_stack_reference(cls, ref: pulumi.StackReference) -> PlatformRefs:
        """Every field from the platform's outputs; a missing output fails the preview (require_output)."""
        return cls(**{k: ref.require_output(k) for k in cls.KEYS})


def checked_gpu_pool_owner(s: Settings, exported: str) -> str:
    """The platform's exported `gpu_pool_owner` when this experiment's `gpu_pool.owner` says the same; otherwise the
    preview fails here: an experiment that expects the platform's pool would schedule onto nodes nobody created, one
    that brings its own would put a second pool on the platform's node group (or bill a second ECS pool)."""
    if exported != s.gpu_pool.owner:
        raise ValueError(
            f"gpu_pool.owner is {s.gpu_pool.owner!r} but the platform {s.platform_stack} exports gpu_pool_owner "
            f"{exported!r}: the stacks of a pair must agree on who owns the GPU pool; set gpu_pool.owner: {exported} "
            "in this experiment's stack file (or change the platform's and `pulumi up` it first)")
    return exported


# ------------------------------------------------------------------------------------------------
# Addresses and object keys the training job reads from the sandbox, data and tracking components.
# Pure functions of the settings, so the RayJob can be rendered (and tested) without those components.

MLFLOW_SERVICE = "mlflow"
MLFLOW_PORT = 5000


def mcp_url(s: Settings) -> str:
    """In-cluster MCP endpoint (Streamable HTTP) of the sandbox manager, through the Service the sandbox
    component creates."""
    sb = s.sandbox
    return f"http://{sb.service_name}.{sb.namespace}.svc.cluster.local:{sb.mcp_port}{sb.mcp_path}"


def tracking_uri(s: Settings) -> str | None:
    """MLFLOW_TRACKING_URI of the tracking server, or None when `tracking.enabled` is false (settings
    then refuse an mlflow logger, so the job never falls back to a pod-local sqlite file)."""
    if not s.tracking.enabled:
        return None
    return f"http://{MLFLOW_SERVICE}.{s.job.namespace}.svc.cluster.local:{MLFLOW_PORT}"


@dataclass(frozen=True)
class DatasetFiles:
    """Object keys (relative to the bucket root) the dataset Job writes and the trainer reads."""

    prefix: str  # <datasets_prefix><dataset>/<key>/, e.g. datasets/gsm8k/0123456789ab/
    train: str  # data.train_files: the subset or the full split, per dataset.use_subsets
    test: str  # data.val_files
    written: tuple[str, ...]  # every parquet key the Job uploads


# The module of the dataset Job per preset (pipeline/): its code is part of the cache key, so a change to how rows
# are built stages the dataset again under a new prefix.
PRESET_CONVERTERS = {"gsm8k": "gsm8k", "math": "task_dataset", "code": "task_dataset", "hub": "task_dataset"}


@functools.cache
def _converter_digest(module: str = "gsm8k") -> str:
    """sha256 of the preset's converting module (pipeline/<module>.py) and the row rule it applies
    (pipeline/rows.py), as the program found them (read once per run)."""
    h = hashlib.sha256((REPO_ROOT / "pipeline" / f"{module}.py").read_bytes())
    h.update((REPO_ROOT / "pipeline" / "rows.py").read_bytes())
    return h.hexdigest()


def single_turn(s: Settings) -> bool:
    """No tools: verl's single_turn_agent runs every row (task.tools: [], or a preset/own data without tools)."""
    return not task_tools(s)


def task_tools(s: Settings) -> list:
    """The tools in force: task.tools, or the preset's (the code tool only where the sandboxes run)."""
    t = s.task
    if t.tools is not None:
        return list(t.tools)
    preset = t.preset
    return [name for name in (preset.tools if preset else ()) if name != "code" or s.sandbox.enabled]


def dataset_cache_key(s: Settings) -> str:
    """The dataset cache's content address: the first 12 hex digits of sha256 over what decides the files: the
    preset's dataset, its config, the subset sizes, the agent loop the rows name and the converting code."""
    d, p, name = s.dataset, s.task.preset, s.task.dataset.preset_name
    if p is None or name is None:
        raise ValueError("dataset_cache_key: the task uses its own files, which are addressed by their content")
    config = d.config or p.config or ""
    ident = f"{p.hub_id}:{config}:train{d.train_subset}:test{d.test_subset}:{_converter_digest(PRESET_CONVERTERS[name])}"
    if single_turn(s) != (not p.tools):  # the rows name another agent loop than the preset's own
        ident += f":single_turn={single_turn(s)}"
    hub = s.task.dataset.hub
    if hub is not None:  # a hub dataset's rows are your script's: its content, function, revision and splits
        script = hashlib.sha256(resolve_task_path(hub.script).read_bytes()).hexdigest()
        ident += f":{hub.function}:{script}:{hub.revision or ''}:{sorted(hub.splits.items())}"
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


def own_file_key(s: Settings, location: str) -> str:
    """The bucket key of a task file: as given for oss://, else <datasets_prefix>own/<sha256[:12]>/<name> (its
    content addresses it: the same file is uploaded once per bucket, a changed one gets a new key)."""
    if location.startswith("oss://"):
        return location.removeprefix("oss://").partition("/")[2]
    path = resolve_task_path(location)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"{s.storage.datasets_prefix}own/{digest}/{path.name}"


def dataset_files(s: Settings) -> DatasetFiles:
    """A preset's: <datasets_prefix><dataset>/<dataset_cache_key>/, staged once per bucket for the same content.
    Own files: each one's key (`own_file_key`); the program uploads the local ones (no Job)."""
    d, task = s.dataset, s.task
    if task.dataset.own_files:
        train, test = own_file_key(s, task.dataset.train), own_file_key(s, task.dataset.val)
        local = tuple(k for k, loc in ((train, task.dataset.train), (test, task.dataset.val)) if not loc.startswith("oss://"))
        return DatasetFiles(prefix="", train=train, test=test, written=local)
    prefix = f"{s.storage.datasets_prefix}{task.preset.hub_id.split('/')[-1].lower()}/{dataset_cache_key(s)}/"
    full = (f"{prefix}train.parquet", f"{prefix}test.parquet")
    subsets = (f"{prefix}train{d.train_subset}.parquet", f"{prefix}test{d.test_subset}.parquet")
    train, test = subsets if d.use_subsets else full
    return DatasetFiles(prefix=prefix, train=train, test=test, written=full + subsets)


def checkpoint_key_prefix(s: Settings) -> str:
    """<checkpoints_prefix><project>/<experiment>/: where this experiment's checkpoints land in the bucket (the
    training role may write only there; teardown.py keeps the newest step from there)."""
    t = s.training
    variant = t._sweep_variant  # a sweep variant's folder sits under the sweep's prefix (components/sweep.py)
    if variant:
        return f"{s.storage.checkpoints_prefix}{t.project_name}/{variant_base_name(t.experiment_name, variant)}/{variant}/"
    return f"{s.storage.checkpoints_prefix}{t.project_name}/{t.experiment_name}/"


def variant_base_name(run_name: str, variant: str) -> str:
    """The sweep's experiment name from a variant's run name `<sweep>-<variant>` (components/sweep.py)."""
    return run_name[:-len(variant) - 1] if run_name.endswith(f"-{variant}") else run_name


def model_repo(s: Settings) -> str:
    """The hub repo the model staging Job downloads (the preset's id on `model.source`)."""
    preset = preset_of(s)
    return preset.hf_id if s.model.source == "huggingface" else preset.modelscope_id


def model_cache_key(s: Settings) -> str:
    """The model cache's content address: the first 12 hex digits of sha256 over `<hub>:<repo>@<revision>` (the
    revision `default` when none is pinned). Two stacks that stage the same repo and revision share one entry."""
    ident = f"{s.model.source}:{model_repo(s)}@{s.model.revision or 'default'}"
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


def model_path(s: Settings) -> str:
    """Key prefix training reads the weights from: the one the model staging Job fills, content-addressed by repo
    and revision (<models_prefix><dir_name>/<model_cache_key>/), or with `model.source: oss` the user's own
    `model.path` in the bucket (nothing stages it)."""
    if s.model.source == "oss" and s.model.path is not None:
        return s.model.path
    return f"{s.storage.models_prefix}{preset_of(s).dir_name}/{model_cache_key(s)}/"


def completion_marker(prefix: str) -> str:
    """The object a staging Job writes LAST, beside its prefix (`a/b/` -> `a/b.complete`): present means every file
    under the prefix is in the bucket (pipeline/stage_model.py, pipeline/gsm8k.py write it)."""
    return prefix.rstrip("/") + ".complete"


# Every Job whose completion Pulumi awaits (the data Jobs, the node gate, the queue admission check). pulumi-kubernetes
# records a Job whose await failed as created with initialisation errors, and by default the next `up` only awaits the
# same Failed Job again, so it fails in seconds even after the cause is fixed. The provider's documented switch for
# that is the annotation `pulumi.com/replaceUnready: "true"` ("to schedule a replacement for an unready resource on the
# next update"; pulumi_kubernetes batch/v1 Job docs), which the Job manifests carry (REPLACE_UNREADY): the failed Job is
# replaced and runs again, with no option keyed on the engine's internal "#initerror" marker. Deleted first: a Job's
# name is fixed for its spec, and any other change of a Job replaces it anyway (its spec is immutable).
REPLACE_UNREADY = {"pulumi.com/replaceUnready": "true"}
RERUN_FAILED_JOB = {"delete_before_replace": True}


# A namespace this program keeps after a destroy (one that may hold more than this stack's objects, or outlive it on an
# existing cluster) is a NamespacePatch: a server-side apply that creates it when absent and adopts it when present
# (pulumi-kubernetes@94977969 provider/pkg/await/await.go :190, `kinds.IsPatchResource`), and whose delete only
# relinquishes the fields it applied (provider/pkg/ssa/actions.go Relinquish), so the namespace stays and the next `up`
# on that cluster finds nothing it would create twice (docs/facts.md "Kept namespaces"). `pulumi.com/patchForce`: the
# labels it declares (Pod Security levels) win over another field manager's, e.g. one whose stack state was lost.
KEPT_NAMESPACE_ANNOTATIONS = {"pulumi.com/patchForce": "true"}
# Such a namespace was a retained `kubernetes:core/v1:Namespace` under the same logical name: the same object, adopted
# in place by the patch (an update of the same field manager) instead of created again.
KEPT_NAMESPACE_OLD_TYPE = "kubernetes:core/v1:Namespace"


def kept_namespace(manifest: dict) -> dict:
    """A Namespace manifest as the NamespacePatch that keeps it (KEPT_NAMESPACE_ANNOTATIONS added)."""
    meta = manifest["metadata"]
    return {**manifest, "metadata": {**meta, "annotations": {**meta.get("annotations", {}),
                                                               **KEPT_NAMESPACE_ANNOTATIONS}}}


def resource_kwargs(manifest: dict) -> dict:
    """Keyword arguments of a pulumi_kubernetes resource class from a manifest built by a pure function:
    top-level keys in snake_case (roleRef -> role_ref, stringData -> string_data); apiVersion and kind are
    implied by the class. Nested keys stay camelCase, as the provider takes them."""
    out = {}
    for key, value in manifest.items():
        if key not in ("apiVersion", "kind"):
            out["".join("_" + c.lower() if c.isupper() else c for c in key)] = value
    return out


def set_dotted(doc: dict, dotted: str, value) -> None:
    """doc[a][b][c] = value for "a.b.c", creating the mappings on the way (add-on configs, the verl trainer file)."""
    *parents, leaf = dotted.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    doc[leaf] = value
