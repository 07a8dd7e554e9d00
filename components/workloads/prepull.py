"""Image pre-pull: put the 20+ GB training image on every GPU node as soon as the node joins.

The RayJob's pods otherwise start pulling only when the job is submitted, after the data and model are
staged, so the GPUs sit idle for the whole pull. A DaemonSet on the GPU pool whose init container uses
the training image (and exits at once) makes the kubelet pull it in parallel with staging; the pod then
idles in a pause container at near-zero cost. The cluster autoscaler ignores DaemonSet pods when it
scales an ECS pool down, so this does not keep GPU nodes alive.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.config import Settings
from components.wiring import (
    PREPULL_SERVICE_ACCOUNT,
    ROLE_LABEL,
    ClusterRefs,
    Scheduling,
    non_root_pod_security,
    restricted_container_security,
)

PREPULL_NAME = "verl-image-prepull"
# The pause image's own user (registry.k8s.io/pause runs as 65535); any non-root uid runs `true`.
PULL_UID = 65535


def prepull_daemonset(s: Settings, image: str, scheduling: Scheduling, namespace: str) -> dict:
    labels = {"app.kubernetes.io/name": PREPULL_NAME, ROLE_LABEL: "prepull"}
    tiny = {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": PREPULL_NAME, "namespace": namespace, "labels": labels,
            # Do not make `pulumi up` wait for every node to finish a 20+ GB pull; the pull is the point of
            # running in the background (https://www.pulumi.com/registry/packages/kubernetes/how-to-guides/await-logic/).
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": PREPULL_NAME}},
            # All nodes at once: each pull is node-local, there is nothing to roll carefully.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": dict(scheduling.node_selector),
                    "tolerations": list(scheduling.tolerations),
                    # Named so the ACR credential helper's derived config covers it (a built image is private).
                    "serviceAccountName": PREPULL_SERVICE_ACCOUNT,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 1,
                    # The `restricted` Pod Security level for both containers, whatever the namespace enforces (a
                    # multi-node Lingjun job namespace is `privileged` for the Ray pods): the init container only
                    # has to exist for the kubelet to pull its image, and `true` runs as any user.
                    "securityContext": non_root_pod_security(PULL_UID),
                    "initContainers": [{
                        "name": "pull",
                        "image": image,
                        # IfNotPresent matches the RayJob's pods, so they find the layers already on disk.
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
                },
            },
        },
    }


class ImagePrepull(pulumi.ComponentResource):
    """The pre-pull DaemonSet on the GPU pool (when `image.prepull`)."""

    def __init__(self, name: str, settings: Settings, image: str, scheduling: Scheduling, namespace: str,
                 cluster: ClusterRefs, depends_on: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("verl-ack:image:Prepull", name, None, opts)
        manifest = prepull_daemonset(settings, image, scheduling, namespace)
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, provider=cluster.k8s_provider,
                # Only the namespace it lives in: waiting for data jobs or add-ons would serialise the pull
                # behind them, which is exactly what pre-pulling avoids.
                depends_on=depends_on or [],
            ),
        )
        self.register_outputs({"name": PREPULL_NAME})
