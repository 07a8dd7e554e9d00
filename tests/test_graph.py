"""The recorded resource graph: no false edges to the GPU pool (time to first step), and dependencies that
make `pulumi destroy` remove workloads before their controllers, node pools and cluster (nothing orphaned)."""

from __future__ import annotations

import pytest

from tests.conftest import record

POOL = "alicloud:cs/nodePool:NodePool"


class Graph:
    """Dependencies as the engine sees them: depends_on, property dependencies and the provider used."""

    def __init__(self, rec):
        self.rec = rec
        self.by_urn = rec.by_urn()
        self._closure: dict[str, set[str]] = {}

    def edges(self, reg) -> set[str]:
        deps = set(reg.dependencies) | {u for us in reg.property_dependencies.values() for u in us}
        if reg.provider:
            deps.add(reg.provider.rsplit("::", 1)[0])
        return {d for d in deps if d in self.by_urn}

    def upstream(self, urn: str) -> set[str]:
        """Everything `urn` waits for, transitively (iterative: the graph has ~100 nodes)."""
        if urn not in self._closure:
            seen, todo = set(), [urn]
            while todo:
                for d in self.edges(self.by_urn[todo.pop()]):
                    if d not in seen:
                        seen.add(d)
                        todo.append(d)
            self._closure[urn] = seen
        return self._closure[urn]

    def waits_for(self, reg, pred) -> bool:
        return any(pred(self.by_urn[u]) for u in self.upstream(reg.urn))


def is_gpu_pool(r) -> bool:
    return r.type == POOL and r.name == "pools-gpu"


def is_system_pool(r) -> bool:
    return r.type == POOL and r.name == "pools-system"


def is_cluster(r) -> bool:
    return r.type == "alicloud:cs/managedKubernetes:ManagedKubernetes"


@pytest.fixture
def graph(stack_name) -> Graph:
    return Graph(record(stack_name))


def test_only_the_training_job_waits_for_the_gpu_pool(graph):
    waiting = sorted(r.name for r in graph.rec.resources if graph.waits_for(r, is_gpu_pool))
    # The node gate checks the pool's nodes (components/workloads/training/gate.py); it runs on a system node.
    assert waiting in (["train-rayjob"], ["train-gate", "train-rayjob"]), (
        "these resources gained a dependency path to the GPU node pool; unless they run on GPUs, the edge puts "
        f"them (and the GPUs' first step) behind the slowest resource: {waiting}")


def test_data_staging_and_the_image_prepull_start_before_gpu_nodes_exist(graph):
    for r in graph.rec.resources:
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:apps/v1:DaemonSet"):
            assert r.name == "train-gate" or not graph.waits_for(r, is_gpu_pool), r.name
            assert graph.waits_for(r, is_system_pool) or r.type.endswith("DaemonSet"), r.name


def test_the_training_job_waits_for_gpu_nodes_staged_data_and_kuberay(graph):
    (job,) = graph.rec.by_type("kubernetes:ray.io/v1:RayJob")
    assert graph.waits_for(job, is_gpu_pool)
    # The rows: the dataset Job's, or a task's own files, uploaded as bucket objects.
    assert graph.waits_for(job, lambda r: r.type == "kubernetes:batch/v1:Job" and r.name == "data-dataset") or \
        graph.waits_for(job, lambda r: r.type == "alicloud:oss/bucketObject:BucketObject" and r.name == "task-files-train")
    assert graph.waits_for(job, lambda r: r.type == "kubernetes:batch/v1:Job" and r.name == "data-model")
    assert graph.waits_for(job, lambda r: r.name == "addons-kuberay")


# ------------------------------------------------------------------------------------------ destroy order
# Pulumi deletes a resource before everything it depends on. Each workload must therefore depend on the
# controller that cleans up after it (else the controller goes first and leaves its cloud resources or
# finalizers behind), on the node pool its pods run on, and on the cluster.
WORKLOAD_CONTROLLERS = {
    "kubernetes:ray.io/v1:RayJob": lambda r: r.name == "addons-kuberay",
    "kubernetes:agents.kruise.io/v1alpha1:SandboxSet": lambda r: "sandbox" in r.name and "controller" in r.name,
    "kubernetes:alibabacloud.com/v1:AlbConfig": lambda r: r.name == "addons-alb",
    "kubernetes:core/v1:PersistentVolumeClaim": lambda r: r.name == "addons-csi-plugin",
    "kubernetes:batch/v1:Job": is_system_pool,
}


def test_workloads_are_destroyed_before_their_controllers_node_pools_and_cluster(graph):
    checked = 0
    for r in graph.rec.resources:
        controller = WORKLOAD_CONTROLLERS.get(r.type)
        if controller is None:
            continue
        checked += 1
        assert graph.waits_for(r, controller), f"{r.name} does not depend on its controller"
        assert graph.waits_for(r, is_system_pool), f"{r.name} does not depend on the system node pool"
        on_cluster = graph.waits_for(r, is_cluster) or graph.rec.get(
            "alicloud:cs/managedKubernetes:ManagedKubernetes", "ack-cluster").options.get("read")
        assert on_cluster, f"{r.name} does not depend on the cluster"
    assert checked >= 6  # RayJob, SandboxSet, two Jobs, PVCs (+ AlbConfig where a domain is set)


def test_every_kubernetes_object_of_a_new_cluster_depends_on_it_through_its_provider(graph):
    cluster = graph.rec.get("alicloud:cs/managedKubernetes:ManagedKubernetes", "ack-cluster")
    if cluster.options.get("read"):
        pytest.skip("an existing cluster is read, never destroyed by this stack")
    for r in graph.rec.resources:
        if r.is_kubernetes:
            assert cluster.urn in graph.upstream(r.urn), r.name


def test_every_depends_on_in_the_program_says_why_in_a_comment():
    """Each explicit edge must justify itself: a reader (and tests above) decide whether it is needed."""
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    missing = []
    for path in [repo / "__main__.py", *sorted((repo / "components").glob("*.py"))]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0]
            if ("depends_on=" not in code or "`depends_on=" in code  # prose in a docstring
                    or "depends_on=depends_on" in code or "depends_on=list(deps)" in code):
                continue  # helpers forwarding their caller's (commented) list
            if not any("#" in w for w in lines[max(0, i - 4):i + 1]):
                missing.append(f"{path.name}:{i + 1}")
    assert missing == [], f"depends_on without a comment saying why: {missing}"
