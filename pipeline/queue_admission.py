"""Queue admission check: a queued RayJob is taken by the queue within a bound, or `pulumi up` fails naming it.

Runs as a Kubernetes Job created right after the RayJob (components/workloads/training/admission.py);
pulumi-kubernetes awaits it and reports a failed pod's termination message, as it does for the node gate.

Why it exists (docs/facts.md "Shared platform"): koord-queue takes a RayJob (`ManagedByQueue`) only when it carries
the queue's enqueue annotation, or when `status.startTime` is empty and `spec.suspend` is true. KubeRay's first
reconcile of every RayJob sets `status.startTime` (New -> Initializing) and, for a suspended job, moves it to
Suspended without clearing it; in Suspended it writes no status at all. So a queue that is restarting, not yet Ready
or slower than KubeRay never takes the job, and nothing fails: it stays Suspended forever.

What it does, from the two controllers' documented rules only:

- taken: the RayJob is resumed (`spec.suspend` false), carries an enqueue annotation, or a QueueUnit names it
  (`spec.consumerRef`): pass at once. Waiting for quota is the queue's business, not a failure.
- lost to the race: Suspended, suspended, `status.startTime` set and not taken: clear `status.startTime` (a status
  patch that holds only if the RayJob is unchanged since it was read). KubeRay does not look at it while the job is
  Suspended and sets it anew when the job resumes (New -> Initializing), so no deadline changes; the queue's next
  look at the job (this update's watch event, or its start-up list) finds it suspended and not started, and takes it.
- not taken within ADMIT_TIMEOUT_SECONDS: fail, naming the job and what to check. The job stays suspended and
  not started, so a queue that comes up later still takes it.

Configuration from the environment (the Job's manifest writes it):

    ADMIT_NAMESPACE, ADMIT_RAYJOB   the RayJob
    ADMIT_QUEUE_UNIT_API            apiVersion of the queue's QueueUnit (scheduling.x-k8s.io/v1alpha1)
    ADMIT_TIMEOUT_SECONDS           the bound
    ADMIT_POLL_SECONDS              how often to look (default 10)
    ADMIT_HINTS                     JSON list of what to check, appended to the failure message

Standard library only; the service account may get and status-patch RayJobs and list QueueUnits in one namespace.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Callable, Literal

from pipeline.node_gate import Api, fail

# The enqueue marks of the open-source queues: koord-queue's RayJob handle, and kube-queue's (its other handles,
# and ACK's ack-kube-queue lineage). Either one means a queue has the job.
ENQUEUE_ANNOTATIONS = ("koord-queue/job-enqueue-timestamp", "kube-queue/job-enqueue-timestamp")
SUSPENDED = "Suspended"  # KubeRay v1.7.0 JobDeploymentStatusSuspended

Action = Literal["taken", "clear-start-time", "wait"]


def names_job(unit: dict, name: str) -> bool:
    ref = (unit.get("spec") or {}).get("consumerRef") or {}
    return ref.get("kind") == "RayJob" and ref.get("name") == name


def taken(rayjob: dict, units: list[dict]) -> bool:
    """A queue has the RayJob: resumed, annotated by the queue, or named by a QueueUnit."""
    meta, spec = rayjob.get("metadata") or {}, rayjob.get("spec") or {}
    if spec.get("suspend") is not True:
        return True
    if any((meta.get("annotations") or {}).get(a) for a in ENQUEUE_ANNOTATIONS):
        return True
    return any(names_job(u, meta.get("name", "")) for u in units)


def decide(rayjob: dict, units: list[dict]) -> Action:
    """What to do about the RayJob as it is now and the QueueUnits of its namespace."""
    if taken(rayjob, units):
        return "taken"
    status = rayjob.get("status") or {}
    if status.get("jobDeploymentStatus") == SUSPENDED and status.get("startTime"):
        return "clear-start-time"
    return "wait"  # KubeRay has not reached Suspended yet, or the start time is already clear: the queue's turn


def clear_start_time_patch(rayjob: dict) -> dict:
    """A merge patch of the status subresource: startTime gone, only if the RayJob is the one that was read."""
    return {"metadata": {"resourceVersion": rayjob["metadata"]["resourceVersion"]}, "status": {"startTime": None}}


def describe(rayjob: dict | None) -> str:
    if rayjob is None:
        return "not found"
    status = rayjob.get("status") or {}
    return (f"suspend={(rayjob.get('spec') or {}).get('suspend')}, "
            f"jobDeploymentStatus={status.get('jobDeploymentStatus') or '-'}, startTime={status.get('startTime') or '-'}")


class RayJobApi(Api):
    def __init__(self, namespace: str, name: str, queue_unit_api: str):
        super().__init__()
        self.namespace, self.name, self.queue_unit_api = namespace, name, queue_unit_api

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json"
            data = json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
            return json.load(response)

    def rayjob(self) -> dict:
        return self._call("GET", f"/apis/ray.io/v1/namespaces/{self.namespace}/rayjobs/{self.name}")

    def queue_units(self) -> list[dict]:
        return self._call("GET", f"/apis/{self.queue_unit_api}/namespaces/{self.namespace}/queueunits").get(
            "items") or []

    def patch_status(self, patch: dict) -> None:
        self._call("PATCH", f"/apis/ray.io/v1/namespaces/{self.namespace}/rayjobs/{self.name}/status", patch)


def wait(read_job: Callable[[], dict], read_units: Callable[[], list[dict]], patch_status: Callable[[dict], None],
         timeout: float, poll: float, clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep,
         log: Callable[[str], None] = print) -> tuple[bool, dict | None, list[str]]:
    """Poll until a queue has the RayJob or `timeout` seconds passed: (taken, the job as last read, what failed)."""
    start = clock()
    job: dict | None = None
    errors: list[str] = []
    while True:
        try:
            job = read_job()
            try:
                units = read_units()
            except urllib.error.HTTPError as err:
                if err.code != 404:
                    raise
                units = []
                errors.append("the QueueUnit API is not served (404): is the queue installed?")
            action = decide(job, units)
            log(f"queue admission: {describe(job)}: {action}")
            if action == "taken":
                return True, job, errors
            if action == "clear-start-time":
                patch_status(clear_start_time_patch(job))
        except Exception as err:  # noqa: BLE001 (an API error or a lost update is retried until the bound)
            errors.append(f"{type(err).__name__}: {err}")
            log(f"queue admission: {errors[-1]}")
        if clock() - start >= timeout:
            return False, job, errors
        sleep(min(poll, max(0.0, timeout - (clock() - start))))


def message(namespace: str, name: str, job: dict | None, timeout: float, errors: list[str], hints: list[str]) -> str:
    text = (f"RayJob {namespace}/{name} was not taken by the queue within {timeout / 60:.0f} min ({describe(job)}; no "
            "QueueUnit names it). It stays suspended with no start time, so the queue takes it once it runs")
    if errors:
        text += f". Last error: {errors[-1]}"
    if hints:
        text += ". Check: " + "; ".join(hints)
    return text


def main() -> int:
    env = os.environ
    ns, name = env["ADMIT_NAMESPACE"], env["ADMIT_RAYJOB"]
    timeout = float(env["ADMIT_TIMEOUT_SECONDS"])
    api = RayJobApi(ns, name, env["ADMIT_QUEUE_UNIT_API"])
    ok, job, errors = wait(api.rayjob, api.queue_units, api.patch_status, timeout,
                           float(env.get("ADMIT_POLL_SECONDS", "10")))
    if ok:
        print(f"queue admission: RayJob {ns}/{name} is the queue's", flush=True)
        return 0
    text = message(ns, name, job, timeout, errors, json.loads(env.get("ADMIT_HINTS", "[]")))
    return fail(text)


if __name__ == "__main__":
    sys.exit(main())
