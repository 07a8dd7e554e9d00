"""Shared test fixtures: run the real program under the recording engine for a stack (optionally with
settings overrides) and cache the recording for the session; every render of the suite goes through
tests/render_cache.py, so a repeat of one is served from the first."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests import render_cache  # noqa: E402

render_cache.install()  # before the imports below and every test module bind run_program and build_plan

from components.config import PROJECT, SETTINGS_KEY, STACKS_DIR, read_stack_config  # noqa: E402
from components.model import parse_settings  # noqa: E402
from offline.engine import Recording, StackOutputs, run_program  # noqa: E402
from offline.plan import stack_config  # noqa: E402
from offline.report.latency import PlatformRun  # noqa: E402

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))
# Stacks that build the whole program (kind: single); whole-program tests run on these. Platform and experiment
# stacks each build half of it and have their own tests (tests/test_platform_experiment.py).
SINGLE_STACKS = [s for s in STACKS if read_stack_config(s)[SETTINGS_KEY].get("kind", "single") == "single"]
SPLIT_STACKS = [s for s in STACKS if s not in SINGLE_STACKS]
_cache: dict[str, Recording] = {}
# Overrides that reset a stack's image section to the defaults: the official image, a single stack's default (the dev
# stack itself pulls a built image from ACR Enterprise).
OFFICIAL_IMAGE = {"image": {"source": "official", "registry": "personal", "enterprise_instance_id": None,
                            "registry_host": None}}


def deep_merge(base: dict, overrides: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in overrides.items():
        if v is None and k in out and isinstance(out[k], dict):
            out.pop(k)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def stack_settings(stack: str, overrides: dict | None = None) -> dict:
    """Raw settings of a stack file with `overrides` deep-merged in (a None value removes a section)."""
    raw = read_stack_config(stack)[SETTINGS_KEY]
    out = deep_merge(raw, overrides or {})
    gp, over = out.get("gpu_pool") or {}, (overrides or {}).get("gpu_pool") or {}
    if (isinstance(gp, dict) and isinstance(over, dict) and gp.get("kind") == "lingjun" and "nodes" in over
            and isinstance(gp.get("nodes"), int) and "lingjun" not in over and isinstance(gp.get("lingjun"), dict)):
        # A layout test that resizes a Lingjun pool describes machines the stack file does not list: give it one
        # placeholder EFLO node id per node (and, multi-node, the nodes' security group) so only the layout is tested.
        lj = gp["lingjun"]
        lj["node_ids"] = [f"e01-cn-test{i:04d}" for i in range(gp["nodes"])]
        if not lj.get("security_group_id"):
            lj["security_group_id"], lj["ray_admit_cidrs"] = "sg-test", ["10.4.0.0/16"]
        job = out.setdefault("job", {})
        if gp["nodes"] > 1 and isinstance(job, dict) and not job.get("host_network_cidrs") \
                and "host_network_cidrs" not in ((overrides or {}).get("job") or {}):
            job["host_network_cidrs"] = ["10.0.0.0/16"]  # the nodes' vSwitch, for the host-network policies
    return out


# dev's settings with an account's real-looking values in place of every shipped placeholder (the Lingjun ids, the
# machines' VPC and vSwitches, the ACR instance); the sandbox domain is left to the caller.
REAL_DEV_VALUES = {
    "gpu_pool": {"lingjun": {"eflo_cluster_id": "i118191731733789436", "eflo_node_group_id": "i127062918265143",
                             "node_ids": ["e01-cn-fw7a2b3c4d5"], "security_group_id": "sg-t4n6b2k9m3q7w1e5r8y"}},
    "cluster": {"network": {"vpc_id": "vpc-t4n8x2k3m9q1w5e7r6y4a", "node_vswitch_ids": ["vsw-t4n1a", "vsw-t4n1b"],
                            "pod_vswitch_ids": ["vsw-t4p1a", "vsw-t4p1b"]}},
    "image": {"enterprise_instance_id": "cri-k2m8q4w7e1r5t9y3"},
}


def record(stack: str = "dev", overrides: dict | None = None) -> Recording:
    """Run __main__.py for a stack (plus overrides) under the recording engine; cached per session."""
    key = json.dumps([stack, overrides or {}], sort_keys=True)
    if key not in _cache:
        config, secret_keys, _ = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
        raw = stack_settings(stack, overrides)
        settings = parse_settings(raw)  # fail here with the settings error, not deep inside the engine
        config[SETTINGS_KEY] = json.dumps(raw)
        # An experiment reads its platform's outputs: render the platform stack first, as plan.py does.
        platform = None
        if settings.kind == "experiment":
            assert settings.platform_stack is not None
            name = settings.platform_stack.rsplit("/", 1)[-1]
            platform_raw = stack_settings(name)
            platform = PlatformRun(name, parse_settings(platform_raw), record(name), platform_raw)
        references = {settings.platform_stack: StackOutputs.of(platform.recording)} if platform else {}
        _cache[key] = run_program(REPO / "__main__.py", config, secret_keys, project=PROJECT, stack=stack,
                                  stack_references=references)  # type: ignore[arg-type]
        _cache[key].platform = platform
    return _cache[key]


@pytest.fixture(scope="session", autouse=True)
def _render_cache_store(request, tmp_path_factory):
    """On xdist workers, one render store for the run: every worker's basetemp is in the run's own."""
    if hasattr(request.config, "workerinput"):
        render_cache.share(tmp_path_factory.getbasetemp().parent / "renders")


@pytest.fixture(autouse=True)
def _render_cache_guard(monkeypatch):
    """Tell the render cache which test runs: one that monkeypatches renders afresh (tests/render_cache.py)."""
    render_cache._monkeypatch = monkeypatch
    yield
    render_cache._monkeypatch = None


@pytest.fixture(params=SINGLE_STACKS)
def stack_name(request) -> str:
    return request.param


# ------------------------------------------------------------------------------------------ progress per test file
# `make test` runs the suite on several workers (pytest-xdist), whose terminal output is one dot per test: the
# controller prints a line per test file as its last test reports, so a long run shows where it is.
_progress: dict[str, list[int]] = {}  # file -> [tests reported, tests collected]
_failed: dict[str, int] = {}


def _workers(config) -> int:
    return int(getattr(config.option, "numprocesses", 0) or 0) if config.pluginmanager.hasplugin("xdist") else 0


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    if not _progress:  # every worker collects the same tests
        for nodeid in ids:
            _progress.setdefault(nodeid.split("::")[0], [0, 0])[1] += 1


def pytest_runtest_logreport(report):
    entry = _progress.get(report.nodeid.split("::")[0])
    if entry is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    path = report.nodeid.split("::")[0]
    entry[0] += 1
    if report.failed:
        _failed[path] = _failed.get(path, 0) + 1
    if entry[0] == entry[1] and _reporter is not None:
        done = sum(e[0] for e in _progress.values())
        total = sum(e[1] for e in _progress.values())
        failed = f", {_failed[path]} failed" if path in _failed else ""
        _reporter.write("\n")
        _reporter.write_line(f"{path}: {entry[1]} tests{failed} [{100 * done // max(total, 1):3d}%]")


_reporter = None


def pytest_sessionstart(session):
    global _reporter
    config = session.config
    if _workers(config) and not hasattr(config, "workerinput"):
        _reporter = config.pluginmanager.get_plugin("terminalreporter")
