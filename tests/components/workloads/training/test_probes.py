"""The Ray containers' probes: below Ray 2.53 the program sets KubeRay's checks itself as a python3 exec, so a head
image without wget still becomes Ready (KubeRay keeps a probe the container has)."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from components.workloads.training.probes import CHECK, health_urls, ray_probes
from tests.components.workloads.training.test_rayjob import build


class _Ray(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = {"/ok": b"success", "/sick": b"raylet is down"}.get(self.path)
        self.send_response(200 if body else 503)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def ray_dashboard():
    server = HTTPServer(("127.0.0.1", 0), _Ray)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.mark.parametrize(("paths", "healthy"), [(["/ok"], True), (["/ok", "/ok"], True), (["/ok", "/sick"], False),
                                                (["/missing"], False)])
def test_the_probe_passes_only_when_every_health_endpoint_answers_success(ray_dashboard, paths, healthy):
    run = subprocess.run([sys.executable, "-c", CHECK, *(ray_dashboard + p for p in paths)], capture_output=True,
                         timeout=30)
    assert (run.returncode == 0) == healthy, run.stderr


def test_the_probe_fails_when_nothing_listens():
    run = subprocess.run([sys.executable, "-c", CHECK, "http://127.0.0.1:9/api/gcs_healthz"], capture_output=True,
                         timeout=30)
    assert run.returncode != 0


def test_the_head_checks_raylet_and_gcs_and_a_worker_its_raylet_like_kuberay():
    assert [u.rsplit("/", 1)[-1] for u in health_urls(head=True)] == ["local_raylet_healthz", "gcs_healthz"]
    assert [u.rsplit("/", 1)[-1] for u in health_urls(head=False)] == ["local_raylet_healthz"]


def test_every_ray_container_below_ray_2_53_has_probes_that_need_only_python(stack_name):
    s, manifest = build(stack_name)
    cluster = manifest["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]:
        container = group["template"]["spec"]["containers"][0]  # the Ray container (KubeRay: index 0)
        for probe in ("readinessProbe", "livenessProbe"):
            command = container[probe]["exec"]["command"]
            assert command[0] == "python3" and not any("wget" in w for w in command), (stack_name, probe)


def test_from_ray_2_53_kuberays_own_http_probes_are_left_alone():
    assert ray_probes("2.53.0", head=True) is None
    assert ray_probes("2.52.1", head=False) is not None
