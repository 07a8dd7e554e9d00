"""GPU node gate: wait (bounded) until the GPU pool's nodes are Ready with the resources the job needs, or fail
with a message naming the pool, how many nodes joined and what to check.

Runs as a Kubernetes Job before the RayJob is created (components/workloads/training/gate.py): pulumi-kubernetes
awaits the Job's completion and reports a failed pod's termination message in `pulumi up`, so an empty or
half-joined pool stops the run within minutes instead of leaving the RayJob Pending until its deadline.

Reads its whole configuration from the environment (the Job's manifest writes it):

    GATE_POOL              the pool's name, for messages (e.g. verl-dev-gpu)
    GATE_SELECTOR          label selector of its nodes (e.g. verl-ack/pool=gpu)
    GATE_NODES             how many nodes must be Ready
    GATE_RESOURCES         JSON {"nvidia.com/gpu": "8", "rdma/hca": "1"}: least allocatable per node
    GATE_TIMEOUT_SECONDS   how long to wait for them
    GATE_POLL_SECONDS      how often to look (default 15)
    GATE_HINTS             JSON list of what to check when they do not come, appended to the message
    GATE_COLLECTOR         optional `<namespace>/<daemonset>` of the platform's log collector (logs.enabled): once
                           the nodes are there, the gate fails unless that DaemonSet tolerates every taint they carry
                           (else no collector pod runs beside the Ray pods and their logs are never collected)

Lists nodes with the pod's service-account token (a ClusterRole that may only get and list nodes); standard library
only, so the Job starts without installing anything.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TERMINATION_LOG = "/dev/termination-log"


def quantity(text: str) -> float:
    """A Kubernetes quantity as a number (the extended resources this gate reads are plain counts; CPU-style
    suffixes are handled for completeness)."""
    text = str(text).strip()
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
    for suffix, factor in binary.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    if text and text[-1] in decimal:
        return float(text[:-1]) * decimal[text[-1]]
    return float(text)


@dataclass
class NodeReport:
    name: str
    ready: bool
    short: dict[str, str] = field(default_factory=dict)  # resource -> allocatable, where below what is needed


@dataclass
class Verdict:
    ok: bool
    joined: int
    ready: int
    usable: int
    nodes: list[NodeReport]


def judge(node_list: dict, expected: int, needed: dict[str, str]) -> Verdict:
    """The gate's verdict from a NodeList: enough nodes Ready with at least `needed` allocatable."""
    reports = []
    for node in node_list.get("items") or []:
        status = node.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        allocatable = status.get("allocatable") or {}
        short = {r: str(allocatable.get(r, "0")) for r, q in needed.items()
                 if quantity(allocatable.get(r, "0")) < quantity(q)}
        reports.append(NodeReport((node.get("metadata") or {}).get("name", "?"), ready, short))
    usable = sum(1 for r in reports if r.ready and not r.short)
    return Verdict(ok=usable >= expected, joined=len(reports), ready=sum(r.ready for r in reports), usable=usable,
                   nodes=sorted(reports, key=lambda r: r.name))


def message(pool: str, selector: str, expected: int, needed: dict[str, str], v: Verdict, waited: float,
            hints: list[str]) -> str:
    want = ", ".join(f"{r} >= {q}" for r, q in needed.items())
    head = (f"GPU pool {pool}: {v.usable} of {expected} node(s) usable after {waited / 60:.1f} min "
            f"({v.joined} joined with labels {selector}, {v.ready} Ready, {v.usable} with allocatable {want})")
    detail = [f"{n.name}: {'Ready' if n.ready else 'NotReady'}"
              + (", allocatable " + ", ".join(f"{r}={q}" for r, q in n.short.items()) if n.short else "")
              for n in v.nodes if not n.ready or n.short]
    out = head + (". " + "; ".join(detail) if detail else "")
    if hints:
        out += ". Check: " + "; ".join(hints)
    return out


class Api:
    """The in-cluster API server, authenticated with the pod's service-account token."""

    def __init__(self, sa_dir: str = SA_DIR):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        self.base = f"https://{host}:{port}"
        with open(f"{sa_dir}/token", encoding="utf-8") as f:
            self.token = f.read().strip()
        self.context = ssl.create_default_context(cafile=f"{sa_dir}/ca.crt")

    def nodes(self, selector: str) -> dict:
        url = f"{self.base}/api/v1/nodes?" + urllib.parse.urlencode({"labelSelector": selector})
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            return json.load(response)

    def daemonset(self, namespace: str, name: str) -> dict:
        url = f"{self.base}/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            return json.load(response)


def tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint): an empty key with Exists matches every key; Exists
    matches any value, Equal (the default) only the same; an empty effect matches every effect."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def collector_gaps(node_list: dict, tolerations: list[dict]) -> list[str]:
    """`node: key=value:Effect` for each taint that keeps a pod with `tolerations` off a node (NoSchedule,
    NoExecute; PreferNoSchedule only steers)."""
    out = []
    for node in node_list.get("items") or []:
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
                out.append(f"{(node.get('metadata') or {}).get('name', '?')}: {taint.get('key')}"
                           f"{'=' + taint['value'] if taint.get('value') else ''}:{taint.get('effect')}")
    return out


def wait(list_nodes: Callable[[], dict], expected: int, needed: dict[str, str], timeout: float, poll: float,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         log: Callable[[str], None] = print) -> tuple[Verdict, float]:
    """Poll until the verdict is ok or `timeout` seconds passed; an API error is logged and retried."""
    start = clock()
    verdict = Verdict(False, 0, 0, 0, [])
    while True:
        try:
            verdict = judge(list_nodes(), expected, needed)
            log(f"node gate: {verdict.joined} joined, {verdict.ready} Ready, {verdict.usable} usable of {expected}")
        except Exception as err:  # noqa: BLE001 (the API server may be briefly unreachable; retried until timeout)
            log(f"node gate: listing nodes failed: {err!r}")
        waited = clock() - start
        if verdict.ok or waited >= timeout:
            return verdict, waited
        sleep(min(poll, max(0.0, timeout - waited)))


def fail(text: str) -> int:
    """Exit status 1 with `text` on stderr and as the pod's termination message, which pulumi-kubernetes shows for
    the failed Job."""
    print(text, file=sys.stderr, flush=True)
    try:
        with open(TERMINATION_LOG, "w", encoding="utf-8") as f:
            f.write(text[:4000])
    except OSError:
        pass
    return 1


def main() -> int:
    env = os.environ
    pool, selector, expected = env["GATE_POOL"], env["GATE_SELECTOR"], int(env["GATE_NODES"])
    needed = json.loads(env["GATE_RESOURCES"])
    hints = json.loads(env.get("GATE_HINTS", "[]"))
    api = Api()
    verdict, waited = wait(lambda: api.nodes(selector), expected, needed, float(env["GATE_TIMEOUT_SECONDS"]),
                           float(env.get("GATE_POLL_SECONDS", "15")))
    text = message(pool, selector, expected, needed, verdict, waited, hints)
    if verdict.ok:
        print(f"node gate: GPU pool {pool}: {verdict.usable} of {expected} node(s) Ready with the resources the job "
              "needs", flush=True)
        collector = env.get("GATE_COLLECTOR")
        if not collector:
            return 0
        namespace, name = collector.split("/", 1)
        try:
            tolerations = api.daemonset(namespace, name)["spec"]["template"]["spec"].get("tolerations") or []
            gaps = collector_gaps(api.nodes(selector), tolerations)
        except Exception as err:  # noqa: BLE001 (no such DaemonSet, or no access: say so rather than guess)
            gaps = [f"cannot read DaemonSet {collector} ({type(err).__name__}: {err})"]
        if not gaps:
            print(f"node gate: the log collector {collector} tolerates every taint of the GPU nodes", flush=True)
            return 0
        text = (f"logs.enabled, but the log collector DaemonSet {collector} would not run beside the Ray pods: "
                f"{'; '.join(gaps)}. Their logs would never be collected: add those tolerations to the DaemonSet "
                "(`kubectl -n " + namespace + " edit ds " + name + "`), set logs.collector_daemonset to the "
                "collector this cluster runs, or set logs.enabled false")
    return fail(text)


if __name__ == "__main__":
    sys.exit(main())
