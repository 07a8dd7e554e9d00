"""The modelled time to the first training step and its critical path, over the schedule of the recorded graph.

After the RayJob is created the training pods still have to pull the image, start Ray, submit the job and start
verl before the first step runs; those phases come last. If a pre-pull DaemonSet is in the graph (label
`verl-ack/role: prepull`), the pull starts as soon as the GPU pool is ready and overlaps everything the RayJob
waits for. An autoscaled ECS GPU pool (min_nodes < nodes) boots its GPU nodes only when the Ray pods are pending,
so that boot follows the RayJob.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from components.config import Settings
from components.model.wait import gpu_pool_autoscales, mbit_minutes, model_bytes, pull_minutes
from offline.engine import Recording
from offline.report.latency.kinds import (
    RAYJOB_TYPE,
    create_minutes,
    is_prepull,
    model_prefetched,
    submit_minutes,
    training_image,
)
from offline.report.latency.pair import PlatformRun, with_platform_network
from offline.report.latency.schedule import Schedule
from offline.report.warm_pool import WarmPool, warm_pool


@dataclass(frozen=True)
class ImagePull:
    image: str
    gib: float
    mbps: float  # effective per-node rate
    via_nat: bool
    minutes: float
    prepulled: bool
    on_critical_path: bool


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
    model_read: dict[str, Any] = field(default_factory=dict)  # where verl reads the weights from (model_read_phase)

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
        d["model_read"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in d["model_read"].items()}
        if d["warm_pool"]:
            d["warm_pool"] = {k: round(v, 2) if isinstance(v, float) else v for k, v in d["warm_pool"].items()}
        return d


def model_read_phase(s: Settings, prefetched: bool) -> dict[str, Any]:
    """verl's read of the weights during its init. From the OSS volume: the model at `oss_read_mbps`. With the
    prefetch (job.model_prefetch): the pods' copy reads OSS at the same rate from the moment their containers start,
    alongside Ray's start and the submission; verl waits for whatever part of the copy outlasts them, then reads
    the copy at `local_read_mbps`."""
    L = s.latency
    oss = mbit_minutes(model_bytes(s), L.oss_read_mbps)
    if not prefetched:
        return {"source": "OSS volume", "minutes": oss, "oss_read_minutes": oss}
    window = L.ray_start_minutes + submit_minutes(s)
    wait = max(0.0, oss - window)
    local = mbit_minutes(model_bytes(s), L.local_read_mbps)
    return {"source": "pod memory copy (job.model_prefetch)", "minutes": wait + local, "oss_read_minutes": oss,
            "copy_overlapped_minutes": oss - wait, "copy_wait_minutes": wait, "local_read_minutes": local}


def critical_path(recording: Recording, s: Settings, repeat: bool = False) -> CriticalPath:
    """The modelled time to the first training step, its critical path, the serial sum of the same steps
    and the GPU-idle minutes before training, from the recorded graph and `settings.latency`. `repeat`: with the
    model and dataset in the staging cache already (Schedule)."""
    sched = Schedule(recording, s, repeat)
    urns = list(sched.regs)
    graph = max((sched.finish(u) for u in urns), default=0.0)
    last = max(urns, key=sched.finish, default=None)
    notes: list[str] = []

    image = training_image(s, recording)
    pull, rate, via_nat = pull_minutes(s, image)
    L = s.latency
    read = model_read_phase(s, model_prefetched(recording))
    init = L.verl_init_minutes + read["minutes"]
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
        warm_pool_on_critical_path=pool_on_path, model_read=read)


def plan_critical_path(recording: Recording, s: Settings, repeat: bool = False) -> CriticalPath:
    """The critical path the plan reports, one for every section: an experiment's hub downloads leave through its
    platform's NAT (`with_platform_network`), so its time and its cost use the platform's network."""
    return critical_path(recording, with_platform_network(s, getattr(recording, "platform", None)), repeat)


def own_start_minutes(s: Settings, cp: CriticalPath) -> float:
    """What the GPU nodes wait for that no plan can remove: the in-region image on the node (lazy loading
    counted), Ray start, submission and verl init with the model read. GPU idle beyond this is avoidable."""
    L = s.latency
    in_region = mbit_minutes(L.training_image_gib * 2**30, L.node_pull_mbps) * (
        L.lazy_pull_fraction if s.image.lazy_loading else 1.0)
    return in_region + L.ray_start_minutes + submit_minutes(s) + cp.phases["verl init and model load"]


def unavoidable_chain_minutes(s: Settings, cp: CriticalPath) -> float:
    """What no ordering can shorten: the cluster (none for an existing one), then the GPU pool join (the boot of an
    autoscaled pool), then the job's own start."""
    cluster = create_minutes(s, "ack_cluster") if s.cluster.mode == "new" else 0.0
    return cluster + create_minutes(s, "gpu_node_pool") + own_start_minutes(s, cp)
