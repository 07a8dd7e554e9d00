"""Time to the first training step: a latency model over the recorded resource graph.

Every resource gets a creation time from its TYPE TOKEN (`kind_of`: `alicloud:cs/managedKubernetes:...` is an
`ack_cluster`, any `kubernetes:` object a `k8s_object`, an unknown custom type `default`, a component or a
provider nothing), looked up in `settings.latency.create_minutes`; data Jobs get a time from their data size.
The schedule follows the engine's rules: a resource starts when every resource it depends on (explicit
`depends_on`, property dependencies and its provider) has finished and never before its parent could start; a
component finishes when its last child does. After the RayJob is created the training pods still have to
pull the image, start Ray, submit the job and start verl before the first step runs; those phases come last.
If a pre-pull DaemonSet is in the graph (label `verl-ack/role: prepull`), the pull starts as soon as the GPU
pool is ready and overlaps everything the RayJob waits for. An autoscaled ECS GPU pool (min_nodes < nodes)
boots its GPU nodes only when the Ray pods are pending, so that boot follows the RayJob.

Platform and experiment stacks (docs/stacks.md): an experiment's own graph gives the figure on a warm platform;
plan.py also renders the pair as one program (`single_of_pair`) for the figure of a new platform + experiment,
and `split_figures` holds both to their targets.

Pure functions of (recording, settings); every number is a modelled ESTIMATE (docs/latency.md).
Longer than 500 lines because the platform/experiment figures reuse this module's schedule and critical path;
split apart they would import each other.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from components.cloud.registry import runtime_pip_packages
from components.cloud.registry import training_image as configured_image
from components.config import Settings
from components.model.wait import gpu_pool_autoscales, mbit_minutes, model_bytes, nat_cap_mbps, pull_minutes
from components.wiring import GPU_TAINT_KEY, LINGJUN_TAINT_KEY, POOL_LABEL, ROLE_LABEL
from offline.engine import Recording, Registration
from offline.report.section import Section, table
from offline.report.warm_pool import WarmPool, warm_pool

RAYJOB_TYPE = "kubernetes:ray.io/v1:RayJob"  # pulumi_kubernetes CustomResource: f"kubernetes:{apiVersion}:{kind}"
JOB_TYPE = "kubernetes:batch/v1:Job"
DAEMONSET_TYPE = "kubernetes:apps/v1:DaemonSet"
NODE_POOL_TYPE = "alicloud:cs/nodePool:NodePool"
PREPULL_ROLE = "prepull"
SKIP_AWAIT = "pulumi.com/skipAwait"

# Exact type tokens -> kind (a key of latency.create_minutes, or a data-sized kind handled below).
TYPE_KINDS: dict[str, str] = {
    "alicloud:cs/managedKubernetes:ManagedKubernetes": "ack_cluster",
    NODE_POOL_TYPE: "node_pool",  # `gpu_node_pool` when the pool is the GPU pool (is_gpu_pool)
    "alicloud:cs/kubernetesAddon:KubernetesAddon": "addon",
    "alicloud:vpc/natGateway:NatGateway": "nat_gateway",
    "alicloud:ecs/eipAddress:EipAddress": "eip",
    "alicloud:ecs/eipAssociation:EipAssociation": "eip",
    "alicloud:vpc/network:Network": "vpc",
    "alicloud:vpc/switch:Switch": "vpc",
    "alicloud:alb/loadBalancer:LoadBalancer": "load_balancer",
    "alicloud:cas/serviceCertificate:ServiceCertificate": "certificate",
    "kubernetes:helm.sh/v3:Release": "helm_release",
    "kubernetes:apps/v1:Deployment": "k8s_workload",
    "kubernetes:apps/v1:StatefulSet": "k8s_workload",
    DAEMONSET_TYPE: "k8s_workload",
    "kubernetes:networking.k8s.io/v1:Ingress": "ingress",
    JOB_TYPE: "job",
    RAYJOB_TYPE: "k8s_object",  # creating the object is quick; the training phases follow it
}
# Prefixes for the rest of a package: control-plane API calls that finish in seconds.
PREFIX_KINDS: list[tuple[str, str]] = [
    ("alicloud:vpc/", "vpc"),
    ("alicloud:ram/", "cloud_api"),
    ("alicloud:oss/", "cloud_api"),
    ("alicloud:dns/", "cloud_api"),
    ("alicloud:alidns/", "cloud_api"),
    ("alicloud:ecs/", "cloud_api"),
    ("alicloud:alb/", "cloud_api"),
    ("kubernetes:", "k8s_object"),
]
# Kinds with no creation time of their own.
INSTANT = {"component", "provider"}


def _labels(reg: Registration) -> dict[str, str]:
    meta = reg.inputs.get("metadata") or {}
    return meta.get("labels") or {} if isinstance(meta, dict) else {}


def _annotations(reg: Registration) -> dict[str, str]:
    meta = reg.inputs.get("metadata") or {}
    return meta.get("annotations") or {} if isinstance(meta, dict) else {}


def is_gpu_pool(reg: Registration) -> bool:
    """The GPU node pool: labelled `verl-ack/pool: gpu`, tainted with the GPU or Lingjun taint, or a Lingjun pool."""
    if reg.type != NODE_POOL_TYPE:
        return False
    labels = {x.get("key"): x.get("value") for x in reg.inputs.get("labels") or [] if isinstance(x, dict)}
    taints = {x.get("key") for x in reg.inputs.get("taints") or [] if isinstance(x, dict)}
    return (labels.get(POOL_LABEL) == "gpu" or bool(taints & {GPU_TAINT_KEY, LINGJUN_TAINT_KEY})
            or reg.inputs.get("type") == "lingjun")


def is_prepull(reg: Registration) -> bool:
    return reg.type == DAEMONSET_TYPE and (
        _labels(reg).get(ROLE_LABEL) == PREPULL_ROLE or "prepull" in reg.name.replace("-", ""))


def job_kind(reg: Registration) -> str:
    """`model_job` (model staging), `dataset_job` or `job`, from the role label (`verl-ack/role` or
    `app.kubernetes.io/component`), the command (`pipeline.stage_model`, `pipeline.gsm8k`), or the name."""
    labels = _labels(reg)
    role = labels.get(ROLE_LABEL) or labels.get("app.kubernetes.io/component") or ""
    text = json.dumps(reg.inputs.get("spec") or {})
    if role.startswith("model") or "pipeline.stage_model" in text:
        return "model_job"
    if role.startswith("data") or "pipeline.gsm8k" in text:
        return "dataset_job"
    if "model" in reg.name:
        return "model_job"
    if "data" in reg.name:
        return "dataset_job"
    return "job"


def kind_of(reg: Registration) -> str:
    if reg.type.startswith("pulumi:providers:"):
        return "provider"
    if not reg.custom:
        return "component"
    if (getattr(reg, "options", None) or {}).get("read"):
        return "read"  # `Resource.get` of something that exists (an existing cluster): one API read
    kind = TYPE_KINDS.get(reg.type)
    if kind is None:
        kind = next((k for prefix, k in PREFIX_KINDS if reg.type.startswith(prefix)), "default")
    if kind == "node_pool" and is_gpu_pool(reg):
        return "gpu_node_pool"
    if kind == "job":
        return job_kind(reg)
    return kind


def hub_mbps(s: Settings) -> float:
    cap = nat_cap_mbps(s)
    return min(s.latency.hub_download_mbps, cap) if cap else s.latency.hub_download_mbps


def job_minutes(s: Settings, kind: str) -> float:
    """A data Job, awaited by Pulumi until complete: pod start, download from the hub, upload to OSS."""
    L = s.latency
    if kind == "model_job":
        size = model_bytes(s)
    elif kind == "dataset_job":
        size = L.dataset_mib * 2**20
    else:
        return L.job_start_minutes
    return L.job_start_minutes + mbit_minutes(size, hub_mbps(s)) + mbit_minutes(size, L.oss_upload_mbps)


def submit_minutes(s: Settings) -> float:
    """RayJob submission: with a runtime_env pip install (official image) or without one (built image)."""
    L = s.latency
    return L.job_submit_minutes if runtime_pip_packages(s) else L.job_submit_no_pip_minutes


def create_minutes(s: Settings, kind: str) -> float:
    if kind in INSTANT:
        return 0.0
    if kind in ("model_job", "dataset_job", "job"):
        return job_minutes(s, kind)
    if kind == "read":
        return s.latency.create_minutes["cloud_api"]
    return s.latency.create_minutes.get(kind, s.latency.create_minutes["default"])


@dataclass(frozen=True)
class ImagePull:
    image: str
    gib: float
    mbps: float  # effective per-node rate
    via_nat: bool
    minutes: float
    prepulled: bool
    on_critical_path: bool


def training_image(s: Settings, recording: Recording) -> str:
    """The image of the RayJob's head pod as recorded, else the one the settings name (a platform stack has no
    RayJob)."""
    for reg in recording.by_type(RAYJOB_TYPE):
        try:
            containers = reg.inputs["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
            image = containers[0].get("image") if containers else None
            if isinstance(image, str) and not image.startswith("["):  # not "[unknown]" / "[secret]"
                return image
        except (KeyError, TypeError):
            continue
    return configured_image(s)


@dataclass(frozen=True)
class Step:
    name: str
    type: str
    kind: str
    start: float
    minutes: float
    finish: float


@dataclass(frozen=True)
class Timeline:
    """The three times the cost estimate needs, minutes from the start of `pulumi up`."""

    setup_minutes: float  # first training step
    gpu_pool_start_minutes: float  # ECS GPU nodes bill from here
    gpu_pool_ready_minutes: float
    source: str


@dataclass
class CriticalPath:
    first_step_minutes: float
    graph_minutes: float  # every resource created (Pulumi's `up` returns here)
    serial_minutes: float  # the same steps one after another, as the manual tutorial does them
    path: list[Step]
    gpu_pool_start_minutes: Optional[float]
    gpu_pool_ready_minutes: Optional[float]
    gpu_idle_minutes: Optional[float]
    image_pull: ImagePull
    phases: dict[str, float]
    notes: list[str] = field(default_factory=list)
    pods_start_minutes: float = 0.0  # the Ray pods start on the GPU nodes (they hold them from here)
    warm_pool: Optional[WarmPool] = None  # the SandboxSet's cold start (offline/report/warm_pool.py)
    warm_pool_on_critical_path: bool = False  # the first tool call waits for it

    def timeline(self, source: str = "recorded resource graph") -> Timeline:
        return Timeline(self.first_step_minutes, self.gpu_pool_start_minutes or 0.0,
                        self.gpu_pool_ready_minutes or 0.0, source)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in list(d.items()):
            if isinstance(v, float):
                d[k] = round(v, 2)
        d["path"] = [{k: round(v, 2) if isinstance(v, float) else v for k, v in st.items()} for st in d["path"]]
        d["image_pull"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in d["image_pull"].items()}
        d["phases"] = {k: round(v, 2) for k, v in d["phases"].items()}
        if d["warm_pool"]:
            d["warm_pool"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in d["warm_pool"].items()}
        return d


def _provider_urn(ref: str) -> str:
    return ref.rsplit("::", 1)[0] if ref else ""


Event = tuple[str, str]  # ("ready", urn) or ("finish", urn)


class _Schedule:
    """Earliest start ("ready") and finish of every resource under the engine's ordering rules, evaluated
    iteratively (no recursion limit however long the dependency chains grow)."""

    def __init__(self, recording: Recording, s: Settings):
        self.regs = {r.urn: r for r in recording.resources}
        self.children: dict[str, list[str]] = {}
        for r in recording.resources:
            if r.parent in self.regs:
                self.children.setdefault(r.parent, []).append(r.urn)
        self.kind = {u: kind_of(r) for u, r in self.regs.items()}
        self.minutes = {u: create_minutes(s, k) for u, k in self.kind.items()}
        for u, r in self.regs.items():  # Pulumi does not wait for these (the sandbox image pull DaemonSet)
            if r.custom and _annotations(r).get(SKIP_AWAIT) == "true":
                self.minutes[u] = create_minutes(s, "k8s_object")
        self.pull = pull_minutes(s, training_image(s, recording))[0]
        self.gpu_pool = next((u for u, k in self.kind.items() if k == "gpu_node_pool"), None)
        # An ECS pool below its node count autoscales: creating it boots only min_nodes (modelled as a plain
        # node pool) and the GPU nodes' boot (`gpu_node_pool` minutes) follows the Ray pods (critical_path).
        self.autoscaled = bool(self.gpu_pool) and gpu_pool_autoscales(s)
        self.boot = create_minutes(s, "gpu_node_pool")
        if self.autoscaled:
            self.minutes[self.gpu_pool] = create_minutes(s, "node_pool")
        self.prepull = next((u for u, r in self.regs.items() if is_prepull(r)), None)
        if self.prepull:
            self.kind[self.prepull] = "prepull"
            self.minutes[self.prepull] = create_minutes(s, "k8s_object")  # the pull itself is modelled apart
        self.pull_end: Optional[float] = None
        self.time: dict[Event, float] = {}
        self.why: dict[Event, Optional[Event]] = {}  # the event that decided this one (None: t=0)
        for u in self.regs:
            self._evaluate(("finish", u))

    def deps(self, urn: str) -> set[str]:
        r = self.regs[urn]
        out = set(r.dependencies) | {d for ds in r.property_dependencies.values() for d in ds}
        out.add(_provider_urn(r.provider))
        out.discard(urn)
        return {d for d in out if d in self.regs}

    def _inputs(self, ev: Event) -> list[Event]:
        what, u = ev
        if what == "finish":
            return [("ready", u)] + [("finish", c) for c in self.children.get(u, [])
                                     if self.kind[u] == "component"]
        out = [("finish", d) for d in sorted(self.deps(u))]
        parent = self.regs[u].parent
        if parent in self.regs:
            out.append(("ready", parent))  # a child never starts before its parent could
        if u == self.prepull and self.gpu_pool and self.gpu_pool != u:
            out.append(("finish", self.gpu_pool))  # its pods run on the GPU nodes
        return out

    def _evaluate(self, root: Event) -> None:
        stack: list[tuple[Event, bool]] = [(root, False)]
        open_: set[Event] = set()
        while stack:
            ev, expanded = stack.pop()
            if ev in self.time:
                continue
            if not expanded:
                if ev in open_:
                    r = self.regs[ev[1]]
                    raise ValueError(f"dependency cycle through {r.type}::{r.name}")
                open_.add(ev)
                stack.append((ev, True))
                stack += [(i, False) for i in self._inputs(ev) if i not in self.time]
                continue
            open_.discard(ev)
            best, why = 0.0, None
            for i in self._inputs(ev):
                if self.time[i] > best or (why is None and i[0] == "ready" and ev[0] == "finish"):
                    best, why = max(best, self.time[i]), i
            if ev[0] == "finish" and self.kind[ev[1]] != "component":
                best += self.minutes[ev[1]]
                if ev[1] == self.prepull:
                    self.pull_end = best + self.pull
                    if _annotations(self.regs[ev[1]]).get(SKIP_AWAIT) != "true":
                        best += self.pull  # Pulumi awaits the DaemonSet's rollout, i.e. the pull on every node
            self.time[ev], self.why[ev] = best, why

    def start(self, urn: str) -> float:
        return self.time[("ready", urn)]

    def finish(self, urn: str) -> float:
        return self.time[("finish", urn)]

    def trace(self, urn: str) -> list[str]:
        """Custom resources on the chain of events that decided `urn`'s finish, latest first."""
        out: list[str] = []
        ev: Optional[Event] = ("finish", urn)
        while ev is not None:
            if ev[0] == "finish" and self.kind[ev[1]] != "component":
                out.append(ev[1])
            ev = self.why[ev]
        return out


def critical_path(recording: Recording, s: Settings) -> CriticalPath:
    """The modelled time to the first training step, its critical path, the serial sum of the same steps
    and the GPU-idle minutes before training, from the recorded graph and `settings.latency`."""
    sched = _Schedule(recording, s)
    urns = list(sched.regs)
    graph = max((sched.finish(u) for u in urns), default=0.0)
    last = max(urns, key=sched.finish, default=None)
    notes: list[str] = []

    image = training_image(s, recording)
    pull, rate, via_nat = pull_minutes(s, image)
    L = s.latency
    init = L.verl_init_minutes + mbit_minutes(model_bytes(s), L.oss_read_mbps)
    phases = {"image pull": pull, "Ray cluster start": L.ray_start_minutes,
              "RayJob submission": submit_minutes(s), "verl init and model load": init}

    rayjobs = recording.by_type(RAYJOB_TYPE)
    if rayjobs:
        train = rayjobs[0].urn
        created = sched.finish(train)
    else:
        train = None
        created = graph
        notes.append(f"no {RAYJOB_TYPE} in the graph: the training phases are modelled after the last resource")
    if len(rayjobs) > 1:
        notes.append(f"{len(rayjobs)} RayJobs in the graph; the model follows {rayjobs[0].name}")

    chain: list[Step] = []  # the steps that decided the first step, in time order
    gpu_start = gpu_ready = None
    prepulled = sched.prepull is not None
    pull_end = sched.pull_end
    autoscaled, boot = sched.autoscaled, sched.boot
    if s.kind == "experiment" and not s.owns_gpu_pool():
        # gpu_pool.owner: platform: the pool was created with the platform, before this stack's `up`.
        autoscaled = gpu_pool_autoscales(s)
        platform: Optional[PlatformRun] = getattr(recording, "platform", None)
        warm_image = (any(is_prepull(r) for r in platform.recording.resources) if platform is not None
                      else s.image.prepull)
        if autoscaled:
            # Below its node count the autoscaler boots the nodes for this job's pods: join and pull follow them.
            gpu_start = created
            gpu_ready = created + boot
            phases = {"GPU nodes scale up": boot, **phases}
            notes.append("gpu_pool.owner=platform with an autoscaled ECS pool: its GPU nodes boot when this job's Ray "
                         "pods are pending, and pull the image then")
            prepulled = False
        else:
            gpu_start = gpu_ready = 0.0
            notes.append("gpu_pool.owner=platform: the GPU nodes joined with the platform, before this stack's `up`"
                         + (", and its pre-pull put the image on them" if warm_image else
                            "; the platform pre-pulls nothing, so the pods pull the image"))
            if warm_image:
                pull = 0.0  # the layers are on the nodes' disks: the pods start without a pull
                phases["image pull"] = 0.0
                prepulled, pull_end = True, 0.0
    elif sched.gpu_pool is None:
        notes.append("no GPU node pool in the graph (alicloud:cs/nodePool:NodePool labelled or tainted as GPU): "
                     "GPU nodes are modelled as ready at t=0")
    elif sched.autoscaled:
        # The pool starts with min_nodes; the cluster-autoscaler boots the GPU nodes once the Ray pods are
        # pending, so the boot follows the RayJob and a pre-pull cannot start earlier than the pods' own pull.
        pool_done = sched.finish(sched.gpu_pool)
        gpu_start = max(created, pool_done)
        gpu_ready = gpu_start + sched.boot
        phases = {"GPU nodes scale up": sched.boot, **phases}
        notes.append(f"gpu_pool.ecs.min_nodes={s.gpu_pool.ecs.min_nodes} < nodes={s.gpu_pool.nodes}: "  # type: ignore[union-attr]
                     "the GPU nodes boot when the Ray pods are pending (cluster-autoscaler)")
        prepulled = False
    else:
        gpu_ready = sched.finish(sched.gpu_pool)
        gpu_start = sched.start(sched.gpu_pool)

    pods_start = max(created, gpu_ready or 0.0)
    if prepulled:
        image_ready = max(pods_start, pull_end or 0.0)
        pull_on_path = (pull_end or 0.0) > pods_start
    else:
        image_ready = pods_start + pull
        pull_on_path = True
    first_step = image_ready + L.ray_start_minutes + submit_minutes(s) + init

    if pull_on_path and prepulled and sched.prepull:
        anchor = sched.prepull
    elif sched.gpu_pool and sched.finish(sched.gpu_pool) > created:
        anchor = sched.gpu_pool
    else:
        anchor = train or last
    for u in reversed(sched.trace(anchor) if anchor else []):
        r, start, end = sched.regs[u], sched.start(u), sched.finish(u)
        if u == sched.prepull and pull_on_path:
            end = start + sched.minutes[u]  # the pull that follows is its own step below
        if end > start:
            chain.append(Step(r.name, r.type, sched.kind[u], start, end - start, end))
    if autoscaled and gpu_start is not None and gpu_ready is not None:
        chain.append(Step("GPU nodes scale up", "cluster-autoscaler", "gpu_scale_up", gpu_start, boot, gpu_ready))
    if pull_on_path:
        pull_start = image_ready - pull
        chain.append(Step("image pull", image, "image_pull", pull_start, pull, image_ready))
    t = image_ready
    for name in ("Ray cluster start", "RayJob submission", "verl init and model load"):
        chain.append(Step(name, "training phase", "training_phase", t, phases[name], t + phases[name]))
        t += phases[name]

    # The first rollout's first tool call claims a warm sandbox: a pool still pulling its image delays the step.
    pool = warm_pool(s, recording, sched.finish)
    pool_on_path = pool is not None and pool.ready > first_step
    if pool_on_path:
        chain.append(Step("first tool call waits for the warm sandbox pool", pool.image, "sandbox_warm_pool",
                          first_step, pool.ready - first_step, pool.ready))
        first_step = pool.ready
    serial = sum(sched.minutes[u] for u in urns) + sum(phases.values())
    idle = first_step - gpu_ready if gpu_ready is not None else None
    return CriticalPath(
        first_step_minutes=first_step, graph_minutes=graph, serial_minutes=serial, path=chain,
        gpu_pool_start_minutes=gpu_start, gpu_pool_ready_minutes=gpu_ready, gpu_idle_minutes=idle,
        image_pull=ImagePull(image, L.training_image_gib, rate, via_nat, pull, prepulled, pull_on_path),
        phases=phases, notes=notes, pods_start_minutes=pods_start, warm_pool=pool,
        warm_pool_on_critical_path=pool_on_path)


def plan_critical_path(recording: Recording, s: Settings) -> CriticalPath:
    """The critical path the plan reports, one for every section: an experiment's hub downloads leave through its
    platform's NAT (`with_platform_network`), so its time and its cost use the platform's network."""
    return critical_path(recording, with_platform_network(s, getattr(recording, "platform", None)))


def own_start_minutes(s: Settings, cp: CriticalPath) -> float:
    """What the GPU nodes wait for that no plan can remove: the in-region image on the node (lazy loading
    counted), Ray start, submission and verl init with the model read. GPU idle beyond this is avoidable."""
    L = s.latency
    in_region = mbit_minutes(L.training_image_gib * 2**30, L.node_pull_mbps) * (
        L.lazy_pull_fraction if s.image.lazy_loading else 1.0)
    return in_region + L.ray_start_minutes + submit_minutes(s) + cp.phases["verl init and model load"]


def warm_pool_row(s: Settings, w: WarmPool, on_path: bool) -> tuple[str, str]:
    where = (f"through the NAT: {s.cluster.network.nat_bandwidth_mbps} Mbit/s shared by the sandbox nodes"
             if w.via_nat else "in-region VPC endpoint")
    return ("warm sandbox pool ready " + ("(on the critical path: the first tool call waits)" if on_path
                                          else "(off the critical path)"),
            f"{w.ready:.1f} min: {s.latency.sandbox_image_gib:g} GiB of {w.image} at {w.mbps:.0f} Mbit/s per node "
            f"({where}) from {w.pull_start:.1f} min, then {s.latency.sandbox_start_minutes:g} min pod start")


def _m(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1f} min"


def latency_section(s: Settings, recording: Recording):
    if s.kind == "platform":
        return platform_latency_section(s, recording)
    platform: Optional[PlatformRun] = getattr(recording, "platform", None)
    cp = plan_critical_path(recording, s)
    s = with_platform_network(s, platform)
    p = cp.image_pull
    pull_note = (f"{p.gib:g} GiB at {p.mbps:.0f} Mbit/s per node"
                 + (f" (through the NAT: {s.cluster.network.nat_bandwidth_mbps} Mbit/s shared by "
                    f"{s.gpu_pool.nodes} node(s))" if p.via_nat else "")
                 + (", already on the platform's GPU nodes (its pre-pull)" if p.prepulled and not s.owns_gpu_pool()
                    else ", pre-pulled from GPU-pool ready" if p.prepulled else ", pulled when the Ray pods start"))
    rows = [
        ("modelled time to first training step", _m(cp.first_step_minutes)),
        ("all resources created (`pulumi up` returns)", _m(cp.graph_minutes)),
        ("serial sum of the same steps (manual, one after another)", _m(cp.serial_minutes)),
        ("GPU pool ready", _m(cp.gpu_pool_ready_minutes)),
        ("GPU idle before the first step", _m(cp.gpu_idle_minutes)),
        ("image pull " + ("(on the critical path)" if p.on_critical_path else "(off the critical path)"),
         f"{p.minutes:.1f} min: {pull_note}"),
    ]
    if cp.warm_pool:
        rows.append(warm_pool_row(s, cp.warm_pool, cp.warm_pool_on_critical_path))
    md = "**ESTIMATE** from typical durations in `latency` settings (docs/latency.md), not a measurement.\n\n"
    if s.kind == "experiment":
        md += ("Times below are from the start of this experiment's `pulumi up` on a platform that is already up "
               "(everything the platform stack owns is excluded).\n\n")
    md += table(rows, ("time to first step", "value"))
    md += "\n\nCritical path:\n\n| start | minutes | step | kind |\n|---|---|---|---|\n"
    md += "\n".join(f"| {st.start:.1f} | {st.minutes:.2f} | {st.name} | {st.kind} |" for st in cp.path)
    if cp.notes:
        md += "\n\n" + "\n".join(f"- note: {n}" for n in cp.notes)
    data = cp.as_dict()
    if s.kind == "single" and s.cluster.mode == "new":
        chain = unavoidable_chain_minutes(s, cp)
        data["chain_minutes"], data["chain_ratio"] = round(chain, 2), round(cp.first_step_minutes / chain, 2)
        md += (f"\n\nUnavoidable chain (cluster -> GPU pool join -> in-region image on node -> Ray start -> verl init): "
               f"{_m(chain)}; the modelled first step is {cp.first_step_minutes / chain:.2f}x of it.")
    data["assumptions"] = s.latency.model_dump(exclude=unused_inputs(s))
    if s.kind == "experiment":
        if platform is not None and platform.fresh is not None:
            split = split_figures(s, cp, platform)
            md += "\n\n" + split_markdown(split)
            data["split"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(split).items()}
        else:
            md += "\n\n- note: the platform stack was not rendered, so only the warm-platform figure is shown"
        md += "\n\n" + ownership(s)
    return Section("latency", "Time to first training step (ESTIMATE)", md, data)


# --------------------------------------------------------------------------------------------- platform/experiment
def ownership(s: Settings) -> str:
    """Which stack owns the GPU nodes, which bill by the hour (gpu_pool.owner; docs/stacks.md says the same)."""
    if s.gpu_pool.owner == "platform":
        return ("**Who owns the GPU nodes:** the platform stack (`gpu_pool.owner: platform`). Its GPU node pool and "
                "the image pre-pull live with the platform, so an experiment starts on joined nodes with the image on "
                "disk and its destroy leaves the pool up; the GPU nodes bill to the platform. Lingjun machines are "
                "bought outside Pulumi and bill while they exist, in a pool or not; an ECS pool would bill while the "
                "platform lives. The experiment stacks own no GPU node.")
    return ("**Who owns the GPU nodes:** the experiment stack. Its GPU node pool (ECS: the instances; Lingjun: the "
            "pool that joins the EFLO node group's nodes) is created by the experiment and destroyed with it; Lingjun "
            "machines themselves are bought outside Pulumi and bill while they exist, in a pool or not. The platform "
            "stack owns no GPU node.")
TARGET_FRESH_RATIO = 1.1  # fresh platform + experiment: at most 1.1x the unavoidable chain
TARGET_AVOIDABLE_IDLE_MINUTES = 5.0
TARGET_WARM_MINUTES = 15.0


@dataclass(frozen=True)
class PlatformRun:
    """An experiment's platform as plan.py rendered it: its stack name, settings (validated and raw) and recording,
    and `fresh`: the
    pair as one program (the settings `single_of_pair` gives, and that run's recording)."""

    stack: str
    settings: Settings
    recording: Recording
    raw: dict  # the platform's `verl-ack:settings` as its stack file holds them (single_of_pair merges them)
    fresh: Optional[tuple[Settings, Recording]] = None


# Sections of a pair's stack files that belong to the platform; the rest (GPU pool, data, model, training, job,
# latency, cost) to the experiment.
PLATFORM_SECTIONS = ("name", "region", "zones", "tags", "cluster", "system_pool", "storage", "sandbox", "tracking",
                     "image", "versions")


def single_of_pair(platform_raw: dict, experiment_raw: dict) -> dict:
    """The settings of a `single` stack that builds what a platform stack and one experiment on it build, for the
    "new platform + experiment" figure: platform sections from the platform, the rest from the experiment."""
    out = {k: v for k, v in platform_raw.items() if k in PLATFORM_SECTIONS}
    out.update({k: v for k, v in experiment_raw.items() if k not in PLATFORM_SECTIONS
                and k not in ("kind", "platform_stack", "ttl_hours", "deploy_on_merge", "queue", "logs")})
    if isinstance(out.get("training"), dict):  # the figure is one run's: a sweep's variants queue one after another
        out["training"] = {k: v for k, v in out["training"].items() if k != "sweep"}
    if isinstance(out.get("gpu_pool"), dict):  # a single stack owns its GPU pool whichever half of the pair does
        out["gpu_pool"] = {k: v for k, v in out["gpu_pool"].items() if k != "owner"}
    out["kind"] = "single"
    return out


def with_platform_network(s: Settings, platform: Optional[PlatformRun]) -> Settings:
    """An experiment's hub downloads leave through its platform's NAT: model them with the platform's network."""
    if platform is None:
        return s
    return s.model_copy(update={"cluster": platform.settings.cluster})


def unused_inputs(s: Settings) -> set[str]:
    """Inputs of `latency` this stack's model does not read (left out of plan.json's assumptions)."""
    out = {"job_submit_no_pip_minutes"} if runtime_pip_packages(s) else set()
    if not s.image.lazy_loading:
        out.add("lazy_pull_fraction")
    return out


@dataclass(frozen=True)
class SplitFigures:
    """The two figures of a platform + experiment pair, with the targets they are held to (docs/latency.md)."""

    fresh_first_step_minutes: float  # new platform + experiment, one `pulumi up` of both (kind: single)
    chain_minutes: float  # cluster -> GPU pool join -> in-region image on node -> Ray start -> verl init
    fresh_ratio: float
    gpu_idle_minutes: float  # fresh: GPU pool ready -> first step
    gpu_avoidable_idle_minutes: float  # of which not the job's own start (image, Ray, submission, verl init)
    platform_up_minutes: float  # the platform stack's `pulumi up`
    warm_first_step_minutes: float  # experiment on a platform that is up
    sequential_first_step_minutes: float  # platform `up` returns, then the experiment's `up`
    model_load: str
    targets: dict[str, bool]


def unavoidable_chain_minutes(s: Settings, cp: CriticalPath) -> float:
    """What no ordering can shorten: the cluster, then the GPU pool join, then the job's own start."""
    return create_minutes(s, "ack_cluster") + create_minutes(s, "gpu_node_pool") + own_start_minutes(s, cp)


def split_figures(s: Settings, warm: CriticalPath, platform: PlatformRun) -> SplitFigures:
    assert platform.fresh is not None
    fs, frec = platform.fresh
    fresh = critical_path(frec, fs)
    start = own_start_minutes(fs, fresh)
    chain = unavoidable_chain_minutes(fs, fresh)
    L = fs.latency
    idle = fresh.gpu_idle_minutes or 0.0
    avoidable = max(0.0, idle - start)
    up = critical_path(platform.recording, platform.settings).graph_minutes
    targets = {
        f"fresh <= {TARGET_FRESH_RATIO}x chain": fresh.first_step_minutes <= TARGET_FRESH_RATIO * chain,
        f"avoidable GPU idle <= {TARGET_AVOIDABLE_IDLE_MINUTES:g} min": avoidable <= TARGET_AVOIDABLE_IDLE_MINUTES,
        f"warm experiment <= {TARGET_WARM_MINUTES:g} min": warm.first_step_minutes <= TARGET_WARM_MINUTES,
    }
    load = (f"model weights read once from the OSS volume `models` (ossfs 2.0, read-only) at {L.oss_read_mbps:g} "
            "Mbit/s during verl init; staged into OSS by the experiment's model Job, in parallel with the GPU pool join"
            + (" (on a warm platform the pool is joined already: the Job is on the warm path)"
               if not s.owns_gpu_pool() else ""))
    return SplitFigures(fresh.first_step_minutes, chain, fresh.first_step_minutes / chain, idle, avoidable, up,
                        warm.first_step_minutes, up + warm.first_step_minutes, load, targets)


def split_markdown(f: SplitFigures) -> str:
    rows = [
        ("new platform + experiment (both in one `pulumi up`, as a single stack of these settings builds them)",
         _m(f.fresh_first_step_minutes)),
        ("unavoidable chain: cluster -> GPU pool join -> in-region image on node -> Ray start -> verl init",
         _m(f.chain_minutes)),
        ("ratio to the chain", f"{f.fresh_ratio:.2f}x"),
        ("GPU idle before the first step (new platform + experiment)", _m(f.gpu_idle_minutes)),
        ("of which avoidable (waiting on anything but image, Ray, submission and verl init)",
         _m(f.gpu_avoidable_idle_minutes)),
        ("experiment on a warm platform (this stack's `pulumi up`)", _m(f.warm_first_step_minutes)),
        ("platform `pulumi up`, then this experiment's `pulumi up`", _m(f.sequential_first_step_minutes)),
        ("model load assumed", f.model_load),
    ]
    rows += [(f"target: {k}", "met" if v else "**NOT met**") for k, v in f.targets.items()]
    return "Platform + experiment (ESTIMATE):\n\n" + table(rows, ("figure", "value"))


def platform_latency_section(s: Settings, recording: Recording):
    """A platform stack has no training job: its `pulumi up` time, and where the experiments' figures are."""
    cp = critical_path(recording, s)
    # rounded once, so plan.md shows exactly what plan.json holds (a 87.149 printed 87.1 beside a stored 87.15)
    serial = round(sum(create_minutes(s, kind_of(r)) for r in recording.resources), 2)
    graph = round(cp.graph_minutes, 2)
    rows = [("all resources created (`pulumi up` returns)", _m(graph)),
            ("serial sum of the same steps", _m(serial))]
    if cp.warm_pool:
        rows.append(warm_pool_row(s, cp.warm_pool, False))
    md = ("**ESTIMATE** from typical durations in `latency` settings (docs/latency.md), not a measurement. A platform "
          "stack runs no training: each experiment stack's plan shows its time to the first step on this platform "
          "(warm) and for a new platform + experiment.\n\n" + table(rows, ("platform", "value")) + "\n\n" + ownership(s))
    data = {"graph_minutes": graph, "serial_minutes": serial,
            "assumptions": s.latency.model_dump(exclude=unused_inputs(s))}
    if cp.warm_pool:
        data["warm_pool"] = cp.as_dict()["warm_pool"]
    return Section("latency", "Time to first training step (ESTIMATE)", md, data)
