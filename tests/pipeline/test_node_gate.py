"""The node gate's code (pipeline/node_gate.py): which nodes count, when it gives up, and what its message says."""

from __future__ import annotations

from pipeline import node_gate as g

NEED = {"nvidia.com/gpu": "8", "rdma/hca": "1"}


def node(name: str, ready: bool = True, gpus: str = "8", rdma: str | None = "1k") -> dict:
    allocatable = {"cpu": "104", "nvidia.com/gpu": gpus}
    if rdma is not None:
        allocatable["rdma/hca"] = rdma
    return {"metadata": {"name": name}, "status": {
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}], "allocatable": allocatable}}


def test_quantities_read_as_kubernetes_writes_them():
    assert g.quantity("1k") == 1000 and g.quantity("8") == 8 and g.quantity("500m") == 0.5
    assert g.quantity("1Gi") == 2**30


def test_nodes_count_only_when_ready_with_every_needed_resource():
    v = g.judge({"items": [node("a"), node("b", ready=False), node("c", gpus="0"), node("d", rdma=None)]}, 2, NEED)
    assert (v.joined, v.ready, v.usable, v.ok) == (4, 3, 1, False)
    assert g.judge({"items": [node("a"), node("b")]}, 2, NEED).ok


def test_the_message_names_the_pool_the_count_and_what_to_check():
    v = g.judge({"items": [node("gpu-a"), node("gpu-b", gpus="0")]}, 2, NEED)
    text = g.message("verl-multi-gpu", "verl-ack/pool=gpu", 2, NEED, v, 900, ["the Lingjun console"])
    assert text.startswith("GPU pool verl-multi-gpu: 1 of 2 node(s) usable after 15.0 min (2 joined with labels "
                           "verl-ack/pool=gpu, 2 Ready, 1 with allocatable nvidia.com/gpu >= 8, rdma/hca >= 1)")
    assert "gpu-b: Ready, allocatable nvidia.com/gpu=0" in text and "gpu-a" not in text.split(")", 1)[1]
    assert text.endswith("Check: the Lingjun console")
    empty = g.message("p", "s", 1, NEED, g.judge({"items": []}, 1, NEED), 60, [])
    assert "0 of 1 node(s) usable after 1.0 min (0 joined" in empty


def test_the_wait_returns_as_soon_as_the_nodes_are_there_and_retries_api_errors():
    answers = iter([RuntimeError("apiserver restarting"), {"items": [node("a")]}, {"items": [node("a"), node("b")]}])
    now = [0.0]

    def listing():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    logs: list[str] = []
    v, waited = g.wait(listing, 2, NEED, timeout=600, poll=15, clock=lambda: now[0],
                       sleep=lambda d: now.__setitem__(0, now[0] + d), log=logs.append)
    assert v.ok and waited == 30
    assert "listing nodes failed" in logs[0]


def test_the_wait_gives_up_at_its_timeout_with_the_last_verdict():
    now = [0.0]
    v, waited = g.wait(lambda: {"items": [node("a")]}, 2, NEED, timeout=100, poll=15, clock=lambda: now[0],
                       sleep=lambda d: now.__setitem__(0, now[0] + d), log=lambda m: None)
    assert not v.ok and v.usable == 1 and waited == 100
