"""The root `Settings` model: every section, and the rules that span sections."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from components.config.addons import ADDON_ROLES, condition_holds, condition_text
from components.config.cloud import (
    GPU_NODE_RESERVED_MEMORY_GIB,
    LINGJUN_MIN_ADDON_VERSIONS,
    LINGJUN_NODE_POOL_DOC,
    ClusterSettings,
    GpuPoolSettings,
    StorageSettings,
    SystemPoolSettings,
    addon_version_tuple,
)
from components.config.estimates import CostSettings, LatencySettings
from components.config.exposure import secret_value_problems, system_namespace_problem, world_open_problems
from components.config.image import ImageSettings, VersionSettings
from components.config.project import PROJECT
from components.config.rules import Problems, rule
from components.config.runs import run_start_problems
from components.config.sandbox import SandboxSettings, manager_image_problem
from components.config.sharing import LogSettings, QueueSettings
from components.config.stack_kind import stack_kind_problems
from components.config.task import TaskSettings, task_stack_problems
from components.config.training import DatasetSettings, JobSettings, ModelSettings, TrackingSettings, TrainingSettings
from components.config.types import (
    EnvironmentName,
    RegionId,
    Strict,
    TagKey,
    TagValue,
    ZoneId,
    zone_example,
    zone_in_region,
)

# Images of verl's Docker Hub repository carry one rollout engine each: verlai/verl:vllmNNN.* vLLM, :sglNNN.* SGLang.
VERL_IMAGE_ENGINE = re.compile(r"verlai/verl:(vllm|sgl)[0-9]")
# /dev/shm when job.shm_gib is empty (components/workloads/training/rayjob.py shm_gib uses the same numbers).
SHM_DEFAULT_MAX_GIB = 64
StackKind = Literal["single", "platform", "experiment"]
# What a credential in job.env looks like: a name that says so, or a value with a well-known token prefix
# (Hugging Face hf_, GitHub ghp_/gho_/github_pat_, OpenAI-style sk-, Alibaba Cloud AccessKey LTAI, AWS AKIA,
# Slack xox, GitLab glpat-, a PEM block). job.env lands in plaintext in the RayJob; secrets take secret config.
SECRET_ENV_NAME = re.compile(r".*(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL).*",
                             re.IGNORECASE)
SECRET_ENV_VALUE = re.compile(r"(hf_|ghp_|gho_|github_pat_|sk-|LTAI|AKIA|xox[abp]-|glpat-)[A-Za-z0-9_-]{8,}|"
                              r".*-----BEGIN [A-Z ]*PRIVATE KEY-----.*", re.DOTALL)


# --------------------------------------------------------------------------------------------- root
class Settings(Strict):
    kind: StackKind = Field(
        "single", description="What this stack builds. `single`: everything in one stack (cluster to RayJob). `platform`: "
        "the long-lived part (network, cluster, system pool, add-ons, bucket, RRSA, ALB/TLS, sandboxes + MCP, MLflow, "
        "registry) and its exports. `experiment`: one training run on a platform (GPU pool, data staging, its RAM "
        "roles and namespace, verl configs, RayJob), reading every platform value through a StackReference "
        "(docs/stacks.md).")
    platform_stack: str | None = Field(
        None, description="kind=experiment only: the platform stack's fully qualified name <organization>/<project>/"
        "<stack> (e.g. organization/verl-ack/dev-platform), read with pulumi.StackReference. The project is verl-ack "
        "and the organization this stack's (a self-managed backend's is `organization`); plan.py renders "
        "stacks/Pulumi.<stack>.yaml as the platform.")
    name: EnvironmentName = Field(description="Short name of this environment; prefixes cloud resource names (e.g. verl-dev).")
    region: RegionId = Field(description="Alibaba Cloud region id, e.g. ap-southeast-1 or cn-hangzhou.")
    zones: list[ZoneId] = Field(
        min_length=1, max_length=16, description="Zones of the node vSwitches; the GPU zone first is usual.")
    tags: dict[TagKey, TagValue] = Field(
        default_factory=dict, description="Extra cost tags on every taggable cloud resource. A key or value shaped like "
        "a credential (an AccessKey id, a token, a private key) is refused: tags are plaintext on every resource, in "
        "the state and in the plan.")
    ttl_hours: int | None = Field(
        None, ge=1, le=87600, description="Hours after the last deploy when the scheduled teardown may destroy this stack.")
    deploy_on_merge: bool = Field(False, description="`pulumi up` this stack when a PR touching it merges to main.")
    cluster: ClusterSettings = Field(default_factory=ClusterSettings, description="ACK cluster.")
    gpu_pool: GpuPoolSettings = Field(description="GPU node pool the training job runs on.")
    system_pool: SystemPoolSettings = Field(default_factory=SystemPoolSettings, description="CPU pool for everything else.")
    storage: StorageSettings = Field(description="OSS bucket for datasets, models and checkpoints.")
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings, description="Code sandboxes behind the MCP tool.")
    task: TaskSettings = Field(
        default_factory=TaskSettings, description="The task: dataset, reward and tools (GSM8K with its answer tool "
        "unless the stack says otherwise; docs/task.md).")
    dataset: DatasetSettings = Field(default_factory=DatasetSettings, description="The dataset Job of a preset task.")
    model: ModelSettings = Field(default_factory=ModelSettings, description="Model preset and parallelism overrides.")
    training: TrainingSettings = Field(default_factory=TrainingSettings, description="verl trainer settings.")
    job: JobSettings = Field(default_factory=JobSettings, description="RayJob lifecycle.")
    versions: VersionSettings = Field(default_factory=VersionSettings, description="Pinned versions of images, charts, add-ons.")
    tracking: TrackingSettings = Field(default_factory=TrackingSettings, description="MLflow tracking server.")
    image: ImageSettings = Field(
        default_factory=ImageSettings, description="Training image: official + pip, or built and pushed to ACR.")
    latency: LatencySettings = Field(
        default_factory=LatencySettings, description="Durations of the time-to-first-step model (offline/report/latency/).")
    cost: CostSettings = Field(
        default_factory=CostSettings, description="Prices and run assumptions of the cost ESTIMATE (offline/report/cost.py).")
    queue: QueueSettings = Field(
        default_factory=QueueSettings, description="Job queue of a shared platform: quotas per team, priorities, "
        "all-or-nothing starts (components/queue.py).")
    logs: LogSettings = Field(
        default_factory=LogSettings, description="Ray logs kept in Log Service after the job (components/logs.py).")

    @model_validator(mode="before")
    @classmethod
    def _split_stack_defaults(cls, data: Any) -> Any:
        """Platform and experiment stacks run the built image (no pip install at job start) from the in-region
        registry unless the stack says otherwise (`image.source: official` opts out)."""
        if isinstance(data, dict) and data.get("kind") in ("platform", "experiment"):
            image = data.get("image")
            if image is None or isinstance(image, dict) and "source" not in image:
                data = {**data, "image": {**(image or {}), "source": "built"}}
        return data

    @rule
    def _stack_kind(self) -> Problems:
        """Rules of the platform/experiment split (components/platform.py, components/experiment.py)."""
        yield from stack_kind_problems(self)

    @rule
    def _task(self) -> Problems:
        """Rules joining the task to the rest of the stack (components/config/task.py)."""
        yield from task_stack_problems(self)

    @rule
    def _cross(self) -> Problems:
        if self.gpu_pool.zone not in self.zones:
            yield "gpu_pool.zone", (
                f"gpu_pool.zone {self.gpu_pool.zone!r} is not one of zones {self.zones}; add it to zones or pick one of them")
        for z in self.zones:
            if not zone_in_region(z, self.region):
                yield "zones", (
                    f"zone {z!r} is not a zone of region {self.region!r}: its zones are the region id "
                    f"and one letter, like {zone_example(self.region)}")
        if len(set(self.zones)) != len(self.zones):
            yield "zones", (
                f"zones {self.zones} lists a zone twice; list each zone once")
        net = self.cluster.network
        if self.cluster.mode == "new" and net.vpc_id is None:
            for field in ("node_cidrs", "pod_cidrs"):
                if len(getattr(net, field)) < len(self.zones):
                    yield f"cluster.network.{field}", (
                        f"cluster.network.{field} needs one CIDR per zone ({len(self.zones)} zones)")
        if net.vpc_id is not None and len(net.node_vswitch_ids) != len(self.zones):
            yield "cluster.network.node_vswitch_ids", (
                "cluster.network.node_vswitch_ids needs one vSwitch id per zone, in zones order")
        if self.gpu_pool.kind == "lingjun":
            minor = self.cluster.minor_version()
            if minor is not None and minor < 31:
                yield "cluster.kubernetes_version", (
                    f"cluster.kubernetes_version {self.cluster.kubernetes_version} is too old for a Lingjun node pool "
                    "(ACK requires >= 1.31); pick 1.31 or newer or leave it empty for the newest")
            for role, addon in self.versions.addons.items():
                floor = LINGJUN_MIN_ADDON_VERSIONS.get(addon.name)
                if floor and addon.version and addon_version_tuple(addon.version) < addon_version_tuple(floor):
                    yield f"versions.addons.{role}.version", (
                        f"versions.addons.{role}.version {addon.version} is below v{floor}, the oldest {addon.name} ACK "
                        f"supports with Lingjun node pools ({LINGJUN_NODE_POOL_DOC}); pin v{floor} or newer, or leave "
                        "the version empty for the one ACK installs")
        # An experiment uses its platform's sandboxes (the MCP URL it reads); the domain is the platform's.
        if (self.sandbox.enabled and self.sandbox.domain is None and self.sandbox.manager == "ack-addon"
                and self.kind != "experiment"):
            yield "sandbox.domain", (
                "sandbox.manager=ack-addon needs sandbox.domain: the ACK sandbox manager add-on serves the E2B API on "
                "that domain through the ALB; set a domain or use manager: open-source")
        if self.job.submission_mode == "SidecarMode" and self.versions.kuberay_tuple() < (1, 5, 0):
            yield "job.submission_mode", (
                f"job.submission_mode SidecarMode needs KubeRay >= 1.5.0 but versions.kuberay is "
                f"{self.versions.kuberay}; use K8sJobMode or upgrade KubeRay")
        # Every RayJob authenticates Ray's job API with a token (authOptions.mode token; docs/training.md): KubeRay has
        # it from 1.5.1 and refuses it below Ray 2.52.0.
        for field, have, floor in (("versions.kuberay", self.versions.kuberay, "1.5.1"),
                                   ("versions.ray", self.versions.ray, "2.52.0")):
            if self.kind != "platform" and [int(x) for x in have.split(".")[:3]] < [int(x) for x in floor.split(".")]:
                yield field, (f"{field} {have}: every RayJob sets authOptions.mode token (Ray's job API runs any "
                              f"command on the GPU nodes), which needs {field} >= {floor}; upgrade it")
        if self.job.pre_running_deadline_seconds is not None and self.versions.kuberay_tuple() < (1, 6, 0):
            yield "job.pre_running_deadline_seconds", (
                f"job.pre_running_deadline_seconds needs KubeRay >= 1.6.0 (versions.kuberay is {self.versions.kuberay}); "
                "remove it or upgrade KubeRay")
        if not self.tracking.enabled and "mlflow" in self.training.logger:
            yield "training.logger", (
                "training.logger uses mlflow but tracking.enabled is false: verl would log to a pod-local sqlite file "
                "that is deleted with the Ray cluster; enable tracking or drop mlflow from training.logger")

    @rule
    def _runs_and_checkpoints(self) -> Problems:
        yield from run_start_problems(self)

    @rule
    def _cloud(self) -> Problems:
        """Rules of the cloud layer (components/cloud/network.py ... ingress.py) that span sections."""
        net = self.cluster.network
        if self.cluster.mode == "existing" and not net.vpc_id:
            yield "cluster.network.vpc_id", (
                "cluster.mode=existing needs cluster.network.vpc_id and node_vswitch_ids (the cluster's VPC and one "
                "vSwitch per zone, in zones order): the node pools and the ALB are placed in them")
        lj = self.gpu_pool.lingjun
        if lj is not None and self.owns_gpu_pool() and len(lj.node_ids) != self.gpu_pool.nodes:
            yield "gpu_pool.lingjun.node_ids", (
                f"gpu_pool.lingjun.node_ids lists {len(lj.node_ids)} machine(s) but gpu_pool.nodes is "
                f"{self.gpu_pool.nodes}: the job waits for `nodes` GPU nodes; list exactly that many EFLO node ids "
                "(Lingjun console > Nodes)")
        if lj is not None and self.owns_gpu_pool() and lj.security_group_id is None and (
                self.gpu_pool.nodes > 1 or lj.terway_exclusive_eni):
            why = ("a multi-node pool's Ray pods use the host network" if self.gpu_pool.nodes > 1 else
                   "NetworkPolicy does not cover the pool's Terway exclusive-ENI pods")
            yield "gpu_pool.lingjun.security_group_id", (
                f"this Lingjun pool needs gpu_pool.lingjun.security_group_id (and ray_admit_cidrs): {why}, so the Ray "
                "job API (8265), GCS (6379) and client port (10001) answer whatever the nodes' security group admits; "
                "give that group so the program fences them")
        if self.gpu_pool.kind == "lingjun" and self.kind != "experiment" and not net.vpc_id:
            yield "cluster.network.vpc_id", (
                "gpu_pool.kind=lingjun needs cluster.network.vpc_id, node_vswitch_ids and pod_vswitch_ids: the Lingjun "
                "nodes already sit in the VPC and vSwitch their node group attached them to (EFLO NodeGroupAttachment "
                "vpc_id/vswitch_id, create-only) and a node pool takes only nodes in the cluster's VPC; set that VPC "
                "(Lingjun console > Nodes > network) so the cluster is built in it, or use gpu_pool.kind: ecs")
        if self.cluster.mode == "new" and net.vpc_id and len(net.pod_vswitch_ids) != len(self.zones):
            yield "cluster.network.pod_vswitch_ids", (
                f"cluster.network.pod_vswitch_ids needs one Terway pod vSwitch per zone ({len(self.zones)}) when a new "
                "cluster reuses vpc_id; Lingjun nodes need one in the GPU zone")
        if self.sandbox.domain and not (self.sandbox.enabled and self.sandbox.manager == "ack-addon"):
            yield "sandbox.domain", (
                "sandbox.domain is served only by the ACK sandbox manager add-on (sandbox.enabled with manager: "
                "ack-addon); otherwise nothing routes from the ALB, which bills by the hour for nothing. Remove "
                "sandbox.domain and sandbox.dns_zone, or use manager: ack-addon")
        if self.sandbox.domain and len(self.zones) < 2:
            yield "zones", (
                "sandbox.domain puts an ALB in front of the sandboxes and ALB needs two zones: list at "
                "least two zones (with their vSwitches)")
        if self.sandbox.domain and self.sandbox.domain == self.sandbox.dns_zone:
            yield "sandbox.domain", (
                f"sandbox.domain {self.sandbox.domain!r} is the dns_zone apex, where a CNAME cannot live next to the "
                "zone's SOA/NS records (RFC 1034 3.6.2); use a subdomain such as sandbox." + self.sandbox.domain)
        if len(self.tags) > 7:
            yield "tags", (
                f"tags has {len(self.tags)} entries; OSS buckets take at most 10 tags and project, stack "
                "and environment use 3, so give at most 7")
        sb = self.sandbox
        if sb.dedicated_pool is not None and not sb.enabled:
            yield "sandbox.dedicated_pool", (
                "sandbox.dedicated_pool is set but sandbox.enabled is false: its nodes would bill for "
                "nothing; remove dedicated_pool or enable the sandboxes")
        if sb.runtime_class == "runv" and sb.dedicated_pool is None and self.cluster.mode == "new":
            yield "sandbox.runtime_class", (
                "sandbox.runtime_class runv needs nodes running ACK Sandboxed-Container and a new "
                "cluster has none: add sandbox.dedicated_pool with runtime_name: Sandboxed-Container.runv")

    @rule
    def _addon_switches(self) -> Problems:
        """`versions.addons.<role>.enabled` against the role's condition (components/config/addons.py): only an
        optional role is turned off while it is needed, and `true` cannot install what its condition leaves off."""
        for a in ADDON_ROLES:
            enabled, holds = self.versions.addons[a.role].enabled, condition_holds(self, a.role)
            if enabled is False and holds and not a.optional:
                needed = f"when {condition_text(a.role)}" if a.when else "always"
                yield f"versions.addons.{a.role}.enabled", (
                    f"{a.name} cannot be disabled: the program needs it {needed} "
                    f"(only {[r.role for r in ADDON_ROLES if r.optional]} are optional); remove `enabled: false`")
            elif enabled is True and not holds:
                yield f"versions.addons.{a.role}.enabled", (
                    f"{a.name} is installed only when {condition_text(a.role)}; set "
                    "that instead, or remove `enabled: true`")

    @rule
    def _no_secret_in_env(self) -> Problems:
        for name, value in self.job.env.items():
            if value and (SECRET_ENV_NAME.fullmatch(name) or SECRET_ENV_VALUE.match(value)):
                yield f"job.env.{name}", (
                    f"job.env.{name} looks like a credential, and job.env is written in plaintext into the RayJob "
                    "(and the plan): remove it. Tokens are secret config: `pulumi config set --secret hfToken ...` "
                    "or `modelscopeToken` (docs/settings.md lists the secret keys)")

    @rule
    def _gpu_pod(self) -> Problems:
        """Rules the RayJob builder would otherwise find only after validation (components/workloads/training)."""
        pod_gib = self.gpu_pool.memory_gib_per_node - GPU_NODE_RESERVED_MEMORY_GIB
        if self.job.shm_gib is not None and self.job.shm_gib >= pod_gib:
            yield "job.shm_gib", (
                f"job.shm_gib {self.job.shm_gib}: /dev/shm is memory-backed and counts against the Ray pod's {pod_gib} "
                f"GiB (gpu_pool.memory_gib_per_node less {GPU_NODE_RESERVED_MEMORY_GIB} for node daemons); use at most "
                f"{max(1, pod_gib // 2)} or leave it empty for a quarter of the pod")
        if self.job.shm_gib is None and max(1, min(SHM_DEFAULT_MAX_GIB, pod_gib // 4)) >= pod_gib:
            yield "gpu_pool.memory_gib_per_node", (
                f"gpu_pool.memory_gib_per_node {self.gpu_pool.memory_gib_per_node} leaves the Ray pod {pod_gib} GiB after "
                f"{GPU_NODE_RESERVED_MEMORY_GIB} GiB for node daemons, too little for its /dev/shm; give the node's real "
                "memory (GPU nodes have hundreds of GiB)")
        # Every image source runs on versions.verl_image: pulled, or built FROM it (image/Dockerfile's BASE_IMAGE).
        shipped, engine = VERL_IMAGE_ENGINE.match(self.versions.verl_image), self.training.rollout_engine
        if shipped and {"vllm": "vllm", "sgl": "sglang"}[shipped.group(1)] != engine:
            built = " (built FROM it: --build-arg BASE_IMAGE=<sglNNN image>)" if self.image.source == "built" else ""
            yield "training.rollout_engine", (
                f"training.rollout_engine {engine} does not run on versions.verl_image {self.versions.verl_image}, "
                f"which ships {'vLLM' if shipped.group(1) == 'vllm' else 'SGLang'}{built}; pick the matching "
                "verlai/verl image (vllmNNN.* or sglNNN.*) or change the engine")

    @rule
    def _sharing(self) -> Problems:
        """Rules of the queue, sweeps and logs (components/queue.py, sweep.py, logs.py)."""
        if self.training.sweep is not None and self.kind != "experiment":
            yield "training.sweep", (
                "training.sweep runs one RayJob per variant on a platform's queue: it needs kind: "
                "experiment with queue.enabled (docs/stacks.md); remove training.sweep here")
        if self.training.sweep is not None and not self.queue.enabled:
            yield "queue.enabled", (
                "training.sweep needs queue.enabled: true: without the queue every variant's RayJob "
                "would start at once and hold part of the GPU pool (a partial allocation deadlocks); "
                "enable the queue on the platform and here")
        if self.queue.enabled and self.kind == "single":
            yield "queue.enabled", (
                "queue.enabled applies to split stacks (a platform and its experiments); a single stack "
                "runs one job: remove queue.enabled, or split the stack (docs/stacks.md)")
        if self.queue.enabled and self.kind == "platform":
            total = self.gpu_pool.nodes * self.gpu_pool.gpus_per_node
            guaranteed = sum(t.min_gpus for t in self.queue.teams.values())
            if guaranteed > total:
                yield "queue.teams", (
                    f"queue.teams guarantee {guaranteed} GPUs (sum of min_gpus) but the GPU pool has "
                    f"{total}: the quota tree's children may not guarantee more than its root; lower "
                    "min_gpus")
            for ns, team in self.queue.teams.items():
                if team.gpus > total:
                    yield f"queue.teams.{ns}.gpus", (
                        f"queue.teams.{ns}.gpus {team.gpus} exceeds the GPU pool's {total} GPUs: a leaf's "
                        "max may not exceed the root's; lower it")
                if ns == self.job.namespace:
                    yield f"queue.teams.{ns}", (
                        f"queue.teams.{ns} is the platform's own namespace (job.namespace); teams are "
                        "the namespaces experiments use")

    @rule
    def _host_network_sources(self) -> Problems:
        """Multi-node Lingjun Ray pods run on the host network (components/wiring.py ray_pods_use_rdma): policies
        admit them by their nodes' CIDRs. A Lingjun stack runs in its machines' VPC, whose CIDRs only the user knows."""
        if self.gpu_pool.kind == "lingjun" and self.gpu_pool.nodes > 1 and not self.job.host_network_cidrs:
            yield "job.host_network_cidrs", (
                "job.host_network_cidrs is required: the multi-node Lingjun Ray pods run on the host network, where "
                "no pod selector matches them, and their nodes sit in the Lingjun machines' own vSwitch; list "
                "the GPU nodes' vSwitch CIDRs (VPC console > vSwitches, or `kubectl get nodes -o wide`) so MLflow "
                "and the other network policies admit them")

    @rule
    def _ray_namespace(self) -> Problems:
        """Only host-network RDMA Ray pods get a namespace of their own (components/wiring.py ray_namespace)."""
        j = self.job
        rdma = self.gpu_pool.kind == "lingjun" and self.gpu_pool.nodes > 1
        if j.ray_namespace is not None and not rdma:
            yield "job.ray_namespace", (
                "job.ray_namespace is only for multi-node Lingjun stacks, whose RDMA Ray pods need a "
                "`privileged` namespace of their own; here the Ray pods share job.namespace, remove it")
        if not rdma:
            return
        name = j.ray_namespace or f"{j.namespace}-ray"
        if len(name) > 63:
            yield "job.ray_namespace", (
                f"job.ray_namespace: the default `<job.namespace>-ray` ({name!r}) exceeds the 63 "
                "characters of a namespace name; set job.ray_namespace or shorten job.namespace")
        for field, other in (("job.namespace", j.namespace), ("sandbox.namespace", self.sandbox.namespace)):
            if name == other:
                yield "job.ray_namespace", (
                    f"job.ray_namespace {name!r} is {field}: the privileged Ray namespace must hold the "
                    "Ray pods only; pick another name")

    @rule
    def _no_world_open_cidrs(self) -> Problems:
        """The admit lists open ports that carry no authentication: they may name VPC-internal sources only."""
        for p in world_open_problems(
                "job.host_network_cidrs", self.job.host_network_cidrs,
                "the MLflow and Ray NetworkPolicies admit these sources to MLflow and the Ray pods"):
            yield "job.host_network_cidrs", p
        if self.gpu_pool.lingjun is not None:
            for p in world_open_problems(
                    "gpu_pool.lingjun.ray_admit_cidrs", self.gpu_pool.lingjun.ray_admit_cidrs,
                    "the security group accepts them on the Ray pods' job API (8265), GCS (6379), client port (10001), "
                    "metrics (8080) and dashboard agent (52365) ahead of its drop rule"):
                yield "gpu_pool.lingjun.ray_admit_cidrs", p

    @rule
    def _no_system_namespace(self) -> Problems:
        """The stack's namespaces are its own: labelled, filled and deleted by the program."""
        # The default Ray namespace, `<job.namespace>-ray`, is as safe as job.namespace is.
        for field, name in (("job.namespace", self.job.namespace), ("job.ray_namespace", self.job.ray_namespace),
                            ("sandbox.namespace", self.sandbox.namespace)):
            if name and (problem := system_namespace_problem(field, name)):
                yield field, problem

    @rule
    def _no_secret_in_tags(self) -> Problems:
        """The plaintext-secret rule of job.env, for the tags every taggable resource and the plan carry."""
        for key, value in self.tags.items():
            for p in secret_value_problems(f"tags.{key}", (key, value)):
                yield f"tags.{key}", p

    @rule
    def _queue_teams_are_the_platforms(self) -> Problems:
        """queue.teams renders the platform's quota tree; an experiment's copy would be read by nothing."""
        if self.kind == "experiment" and self.queue.teams:
            yield "queue.teams", (
                "queue.teams is the platform's quota tree (kind: platform renders it); an experiment's teams are read "
                "by nothing, so a quota written here never applies: remove queue.teams and set the team's quota in "
                "the platform's stack file")

    @rule
    def _sandbox_manager_image(self) -> Problems:
        """The open-source manager is started with the MCP flags of PR #165: refuse an image that lacks them."""
        if self.sandbox.enabled and self.sandbox.manager == "open-source":
            problem = manager_image_problem(self.versions.sandbox_manager_image)
            if problem:
                yield "sandbox.manager", problem

    @rule
    def _sandbox_mirror(self) -> Problems:
        if self.sandbox.enabled and self.sandbox.image_mirror and self.registry_namespace() is None:
            yield "sandbox.image_mirror", (
                "sandbox.image_mirror: true needs the stack's own ACR registry (image.source: built with "
                "image.registry); set image.source: built, or leave image_mirror empty to pull "
                f"{self.versions.code_interpreter_image} directly")

    def warnings(self) -> list[tuple[str, str]]:
        """(field, message) for what validation cannot decide: defaults no public source confirms, and facts about
        the user's cloud account the program cannot read. The Pulumi program prints them (pulumi.log.warn)."""
        out = list(self.versions.unverified())
        if self.sandbox.enabled and not self.versions.code_interpreter_image_digest:
            out.append(("versions.code_interpreter_image_digest", f"the sandbox image {self.versions.code_interpreter_image} "
                        "is pulled by tag, not pinned: a re-pushed tag changes what every warm sandbox runs. Set the "
                        "digest (`docker buildx imagetools inspect <image>`) in the stack"))
        img = self.image
        # An experiment pulls the image its platform exports; its own registry settings are not used.
        if img.source == "built" and img.registry == "personal" and img.credential_helper and self.kind != "experiment":
            out.append(("image.registry", "the ACR credential helper pulls from ACR Personal Edition instances created on "
                        "or before 2024-09-08 only (and from Enterprise Edition); on a newer Personal instance the GPU "
                        "nodes cannot pull the built image. Check the instance's creation date in the ACR console, or "
                        "use registry: enterprise (docs/facts.md §5)"))
        if img.source == "built" and img.registry == "personal" and self.kind != "experiment":
            out.append(("image.registry", f"registry: personal uses the ACR Personal Edition repository "
                        f"{img.namespace}/{img.repository}, which you create once in the ACR console: the provider "
                        "this program runs on (terraform-provider-alicloud v2) can no longer create one (its cr.Repo "
                        "drives the retired 2016-06-07 API; docs/facts-provider.md)"))
        if self.kind != "single" and self.gpu_pool.owner == "platform" and self.gpu_pool.kind == "ecs":
            out.append(("gpu_pool.owner", "a platform-owned pay-as-you-go ECS GPU pool bills while the platform lives, "
                        "not only while an experiment runs (its min_nodes always; up to nodes until the autoscaler "
                        "scales down), and destroying an experiment does not remove it; use owner: experiment unless "
                        "that is intended (a platform-owned pool pays off for Lingjun, which bills in a pool or not)"))
        return out

    def registry_namespace(self) -> str | None:
        """host/namespace of the stack's own ACR registry (the built training image's), None without one."""
        img = self.image
        if img.source != "built":
            return None
        if img.registry == "existing":
            return img.existing_repository.rsplit("/", 1)[0]  # type: ignore[union-attr]
        # ACR Personal Edition's VPC endpoint: pulls stay inside the VPC and cost no NAT traffic.
        host = img.registry_host or f"registry-vpc.{self.region}.aliyuncs.com"
        return f"{host}/{img.namespace}"

    def sandbox_image_mirrored(self) -> bool:
        """Whether the sandbox pods pull the code-interpreter image from the stack's registry (sandbox.image_mirror)."""
        return self.registry_namespace() is not None and self.sandbox.image_mirror is not False

    def sandbox_image(self) -> str:
        """The code-interpreter image the warm pool and its pre-pull run: the mirror in the stack's registry (same
        repository name, tag and digest: a copy of the manifest keeps its digest) or versions.code_interpreter_image,
        with the pinned digest either way."""
        ref = self.versions.code_interpreter_image_ref()
        if not self.sandbox_image_mirrored():
            return ref
        return f"{self.registry_namespace()}/{ref.rsplit('/', 1)[-1]}"

    def owns_gpu_pool(self) -> bool:
        """Whether this stack creates the GPU node pool (and its image pre-pull): a single stack always, a platform
        or an experiment when `gpu_pool.owner` names its kind."""
        return self.kind == "single" or self.kind == self.gpu_pool.owner

    def cloud_tags(self, stack: str) -> dict[str, str]:
        """Cost tags every taggable cloud resource carries."""
        return {"project": PROJECT, "stack": stack, "environment": self.name, **self.tags}
