"""The code-interpreter image on every sandbox node before the warm pool needs it.

A DaemonSet on the nodes the sandboxes run on (the dedicated sandbox pool, else the system pool) whose init
container uses the code-interpreter image and exits at once: the kubelet pulls the image as soon as a node joins,
and a sandbox pod created later (a refill after every claim, or the pool growing onto a new node) starts from the
layers on disk instead of pulling them. The pod then idles in a pause container.

Not named like the GPU pre-pull (components/workloads/prepull.py): the latency model reads a DaemonSet with
`prepull` in its name or role as the training image's pull onto the GPU nodes.
"""

from __future__ import annotations

from components.config import Settings
from components.wiring import ROLE_LABEL, non_root_pod_security, restricted_container_security, sandbox_scheduling
from components.workloads.prepull import PULL_UID
from components.workloads.sandbox.manifests import PART_OF

SANDBOX_IMAGE_PULL_NAME = "code-interpreter-image-pull"
SANDBOX_IMAGE_PULL_ROLE = "sandbox-image-pull"


def sandbox_image_pull_daemonset(s: Settings) -> dict:
    """The DaemonSet manifest. Every container meets the restricted Pod Security Standard, the strictest level the
    sandbox namespace may enforce (wiring.sandbox_namespace_pod_security): non-root, no privilege escalation, every
    capability dropped, RuntimeDefault seccomp, read-only root filesystem."""
    sched = sandbox_scheduling(s)
    labels = {"app.kubernetes.io/name": SANDBOX_IMAGE_PULL_NAME, ROLE_LABEL: SANDBOX_IMAGE_PULL_ROLE, **PART_OF}
    tiny = {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}
    spec: dict = {
        "nodeSelector": dict(sched.node_selector),
        # The sandbox pods' service account (`default`), which the ACR credential helper's derived config covers
        # when the image is mirrored into the stack's private registry.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": non_root_pod_security(PULL_UID),
        "initContainers": [{
            "name": "pull",
            "image": s.sandbox_image(),
            # The sandbox pods pull IfNotPresent too, so they find these layers.
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "true"],
            "resources": tiny,
            "securityContext": restricted_container_security(),
        }],
        "containers": [{
            "name": "idle",
            "image": s.image.pause_image,
            "imagePullPolicy": "IfNotPresent",
            "resources": tiny,
            "securityContext": restricted_container_security(),
        }],
    }
    if sched.tolerations:
        spec["tolerations"] = [dict(t) for t in sched.tolerations]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": SANDBOX_IMAGE_PULL_NAME, "namespace": s.sandbox.namespace, "labels": labels,
            # `pulumi up` does not wait for the pull on every node: the warm pool's pods join the same pull.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": SANDBOX_IMAGE_PULL_NAME}},
            # All nodes at once: each pull is node-local.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
