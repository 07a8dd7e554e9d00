"""Readiness and liveness probes of the Ray containers that need nothing the training image may lack.

KubeRay v1.7.0 injects probes into every Ray container that has none (ray-operator/controllers/ray/common/pod.go
`initLivenessAndReadinessProbe`, called when ENABLE_PROBES_INJECTION is on, its default). For `rayVersion` below
2.53.0 (`supportsUnifiedHealthCheck`) they are `bash -c "wget ... | grep success"` execs against the dashboard
agent's `api/local_raylet_healthz` and, on the head, the dashboard's `api/gcs_healthz` (utils/constant.go
`BaseWgetHealthCommand`); a head image without wget is never Ready and is killed after its liveness threshold.
From 2.53.0 KubeRay uses an httpGet probe on `/api/healthz`, which needs nothing in the image.

KubeRay keeps a probe the container already has (`if rayContainer.LivenessProbe == nil`), so below 2.53.0 the
program sets the same checks, with KubeRay's timings, as a `python3` exec: every Ray image has the Python Ray runs
on, not necessarily wget (docs/facts.md, "KubeRay probes").
"""

from __future__ import annotations

from typing import Optional

UNIFIED_HEALTH_CHECK_SINCE = (2, 53, 0)  # pod.go supportsUnifiedHealthCheck
DASHBOARD_AGENT_PORT = 52365  # utils/constant.go DefaultDashboardAgentListenPort
DASHBOARD_PORT = 8265  # DefaultDashboardPort
RAYLET_HEALTH_PATH = "api/local_raylet_healthz"  # RayAgentRayletHealthPath
GCS_HEALTH_PATH = "api/gcs_healthz"  # RayDashboardGCSHealthPath
# KubeRay's probe timings (utils/constant.go Default{Readiness,Liveness}Probe*); the head's 5 s timeout for both
# roles, as Python's start is slower than wget's.
READINESS = {"initialDelaySeconds": 10, "timeoutSeconds": 5, "periodSeconds": 5, "successThreshold": 1,
             "failureThreshold": 10}
LIVENESS = {"initialDelaySeconds": 30, "timeoutSeconds": 5, "periodSeconds": 5, "successThreshold": 1,
            "failureThreshold": 120}
# Exit 0 only when every URL answers with a body containing "success" (what KubeRay's `| grep success` checks);
# any error (refused, timeout, HTTP error) raises, which exits 1.
CHECK = ("import sys, urllib.request as r; "
         "sys.exit(0 if all(b'success' in r.urlopen(u, timeout=2).read() for u in sys.argv[1:]) else 1)")


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3])


def health_urls(head: bool) -> list[str]:
    urls = [f"http://localhost:{DASHBOARD_AGENT_PORT}/{RAYLET_HEALTH_PATH}"]
    if head:
        urls.append(f"http://localhost:{DASHBOARD_PORT}/{GCS_HEALTH_PATH}")
    return urls


def probe_command(head: bool) -> list[str]:
    return ["python3", "-c", CHECK, *health_urls(head)]


def ray_probes(ray_version: str, head: bool) -> Optional[dict[str, dict]]:
    """{"readinessProbe": ..., "livenessProbe": ...} for a Ray container, or None where KubeRay's own probes need
    nothing of the image (Ray >= 2.53.0)."""
    if _version(ray_version) >= UNIFIED_HEALTH_CHECK_SINCE:
        return None
    return {"readinessProbe": {"exec": {"command": probe_command(head)}, **READINESS},
            "livenessProbe": {"exec": {"command": probe_command(head)}, **LIVENESS}}
