"""The queue admission check (pipeline/queue_admission.py) against a state machine of the two controllers' documented
rules: every interleaving of KubeRay's reconciles, the queue's watch events, reconciles and start, and the check's
polls is explored, and in each end state the queued RayJob is the queue's.

The rules, as the sources state them (docs/facts.md "Shared platform"):
- KubeRay v1.7.0 ray-operator/controllers/ray/rayjob_controller.go `Reconcile`: New -> Initializing setting
  status.startTime (`initRayJobStatusIfNeed`); Initializing with spec.suspend -> Suspending
  (`updateStatusToSuspendingIfNeeded`) -> Suspended, startTime kept; Suspended with spec.suspend: no write at all;
  Suspended without it -> New (then Initializing, startTime anew) -> Running.
- koord-queue pkg/jobext/framework/default_job_reconciler.go: a watch event of the RayJob queues a reconcile only if
  `ManagedByQueue` holds for the object in the event; the reconcile reads the object as it is then and drops it
  unless `ManagedByQueue` still holds; a job with neither enqueue nor dequeue annotation is Created: annotate it and
  create its QueueUnit; a Queuing job whose QueueUnit is admitted is resumed (spec.suspend false). A controller that
  is not running sees no event; when it starts, its informer lists every object (one event each).
- koord-queue pkg/jobext/handles/rayjob.go `ManagedByQueue`: the enqueue annotation, or startTime nil and suspended.
"""

from __future__ import annotations

import copy
import json
import urllib.error

import pytest

from pipeline import queue_admission as qa

NAME = "verl-grpo"
ENQUEUE = "koord-queue/job-enqueue-timestamp"


def managed_by_queue(job: dict) -> bool:
    if job["metadata"]["annotations"].get(ENQUEUE):
        return True
    return job["status"].get("startTime") is None and job["spec"]["suspend"] is True


class World:
    """One cluster: the RayJob as the API server holds it, the QueueUnits, the queue's pending reconciles."""

    def __init__(self, queue_running: bool, check: bool):
        self.job = {"metadata": {"name": NAME, "resourceVersion": 1, "annotations": {}},
                    "spec": {"suspend": True}, "status": {}}
        self.units: list[dict] = []
        self.queue_running = queue_running
        self.pending = False  # a reconcile request in the queue's work queue
        self.check = check
        self.clock = 0  # KubeRay's startTime values: a step count, never wall time
        self._event()  # the create event

    def key(self) -> str:
        return json.dumps([self.job, self.units, self.queue_running, self.pending, self.clock], sort_keys=True)

    def _write(self) -> None:
        self.job["metadata"]["resourceVersion"] += 1
        self._event()

    def _event(self) -> None:
        if self.queue_running and managed_by_queue(self.job):
            self.pending = True

    def actions(self) -> list[str]:
        out = []
        d, spec = self.job["status"].get("jobDeploymentStatus", "New"), self.job["spec"]
        if d in ("New", "Initializing", "Suspending") or (d == "Suspended" and not spec["suspend"]):
            out.append("kuberay")
        if not self.queue_running:
            out.append("queue-start")
        if self.queue_running and self.pending:
            out.append("queue-reconcile")
        if self.queue_running and self.units and spec["suspend"] and self.job["metadata"]["annotations"].get(ENQUEUE):
            out.append("queue-admit")
        if self.check and qa.decide(copy.deepcopy(self.job), copy.deepcopy(self.units)) == "clear-start-time":
            out.append("check")
        return out

    def step(self, action: str) -> None:
        job, status = self.job, self.job["status"]
        d = status.get("jobDeploymentStatus", "New")
        if action == "kuberay":
            self.clock += 1
            if d == "New":
                status.update(jobDeploymentStatus="Initializing", startTime=f"t{self.clock}")
            elif d == "Initializing":
                status["jobDeploymentStatus"] = "Suspending" if job["spec"]["suspend"] else "Running"
            elif d == "Suspending":
                status["jobDeploymentStatus"] = "Suspended"  # startTime kept (only the cluster's fields are reset)
            elif d == "Suspended":
                status["jobDeploymentStatus"] = "New"
            self._write()
        elif action == "queue-start":
            self.queue_running = True
            self._event()  # the informer's initial list
        elif action == "queue-reconcile":
            self.pending = False
            if managed_by_queue(job) and not job["metadata"]["annotations"].get(ENQUEUE):
                job["metadata"]["annotations"][ENQUEUE] = "enqueued"
                self.units = [{"spec": {"consumerRef": {"kind": "RayJob", "name": NAME}}}]
                self._write()
        elif action == "queue-admit":
            job["spec"]["suspend"] = False
            self._write()
        elif action == "check":
            patch = qa.clear_start_time_patch(job)
            assert patch["metadata"]["resourceVersion"] == job["metadata"]["resourceVersion"]
            status.pop("startTime")
            self._write()


def end_states(queue_running: bool, check: bool) -> list[World]:
    """Every state in which no action is left, over all interleavings."""
    seen, stack, ends = set(), [World(queue_running, check)], []
    while stack:
        w = stack.pop()
        if w.key() in seen:
            continue
        seen.add(w.key())
        acts = w.actions()
        if not acts:
            ends.append(w)
        for a in acts:
            nxt = copy.deepcopy(w)
            nxt.step(a)
            stack.append(nxt)
    return ends


@pytest.mark.parametrize("queue_running", [True, False])
def test_without_the_check_the_race_can_leave_a_queued_rayjob_suspended_forever(queue_running):
    lost = [w for w in end_states(queue_running, check=False) if not qa.taken(w.job, w.units)]
    assert lost, "the model must reproduce the race the check exists for"
    for w in lost:
        assert w.job["status"]["jobDeploymentStatus"] == "Suspended" and w.job["status"]["startTime"]


@pytest.mark.parametrize("queue_running", [True, False])
def test_with_the_check_every_interleaving_ends_with_the_job_taken_resumed_and_its_clock_started_anew(queue_running):
    ends = end_states(queue_running, check=True)
    assert ends
    for w in ends:
        assert qa.taken(w.job, w.units), w.job
        # the queue admitted it and KubeRay ran it; its deadlines count from the resume, not from the creation
        assert w.job["spec"]["suspend"] is False and w.job["status"]["jobDeploymentStatus"] == "Running"
        assert w.job["status"]["startTime"] is not None


def test_a_job_the_queue_holds_for_quota_passes_at_once_and_a_started_one_is_left_alone():
    job = {"metadata": {"name": NAME, "resourceVersion": "7", "annotations": {}}, "spec": {"suspend": True},
           "status": {"jobDeploymentStatus": "Suspended", "startTime": "2026-12-01T00:00:00Z"}}
    unit = {"spec": {"consumerRef": {"kind": "RayJob", "name": NAME}}}
    other = {"spec": {"consumerRef": {"kind": "RayJob", "name": "verl-grpo-v123456"}}}
    assert qa.decide(job, [unit]) == "taken"
    assert qa.decide(job, [other]) == "clear-start-time", "another job's QueueUnit is not this one's"
    assert qa.decide({**job, "metadata": {**job["metadata"], "annotations": {
        "kube-queue/job-enqueue-timestamp": "x"}}}, []) == "taken"
    assert qa.decide({**job, "status": {"jobDeploymentStatus": "Initializing", "startTime": "t"}}, []) == "wait"
    assert qa.decide({**job, "spec": {"suspend": False}}, []) == "taken"
    assert qa.clear_start_time_patch(job) == {"metadata": {"resourceVersion": "7"}, "status": {"startTime": None}}


def test_the_wait_fails_at_its_bound_naming_the_job_and_what_to_check():
    job = {"metadata": {"name": NAME, "resourceVersion": "3", "annotations": {}}, "spec": {"suspend": True},
           "status": {"jobDeploymentStatus": "Suspended"}}
    now = [0.0]
    patches: list[dict] = []

    def no_api():
        raise urllib.error.HTTPError("u", 404, "not found", {}, None)  # type: ignore[arg-type]

    ok, last, errors = qa.wait(lambda: job, no_api, patches.append, timeout=60, poll=10, clock=lambda: now[0],
                               sleep=lambda t: now.__setitem__(0, now[0] + t), log=lambda _: None)
    assert not ok and last is job and not patches
    text = qa.message("team-a", NAME, last, 60, errors, ["the queue runs"])
    assert "RayJob team-a/verl-grpo was not taken by the queue" in text
    assert "QueueUnit API is not served" in text and "Check: the queue runs" in text


def test_the_wait_clears_a_lost_start_time_then_passes_when_the_queue_takes_the_job():
    job = {"metadata": {"name": NAME, "resourceVersion": "3", "annotations": {}}, "spec": {"suspend": True},
           "status": {"jobDeploymentStatus": "Suspended", "startTime": "t"}}
    units: list[dict] = []

    def patch(p):
        job["status"].pop("startTime")
        units.append({"spec": {"consumerRef": {"kind": "RayJob", "name": NAME}}})  # the queue's next look takes it

    ok, _, _ = qa.wait(lambda: job, lambda: units, patch, timeout=60, poll=10, clock=lambda: 0.0,
                       sleep=lambda _: None, log=lambda _: None)
    assert ok and units
