"""The training job: OSS volumes, verl config files, the MCP servers Secret and the KubeRay RayJob.

Wiring only; every manifest comes from a pure function (volumes.py, verl_config.py, rayjob.py) that the tests
call directly. KubeRay's controller rules run here, at preview, before anything is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import pulumi
import pulumi_kubernetes as k8s

from components.config import Settings
from components.model.layout import Layout
from components.wiring import (
    RERUN_FAILED_JOB,
    ClusterRefs,
    Scheduling,
    StorageRefs,
    WorkloadIdentity,
    resource_kwargs,
)
from components.workloads.data import code_configmap_name, pipeline_code
from components.workloads.network_policies import ray_egress_policy_manifest, ray_network_policy_manifest
from components.workloads.training import admission, gate
from components.workloads.training.rayjob import check_rayjob, render_rayjob, with_platform_values
from components.workloads.training.run_spec import pod_wiring, run_spec
from components.workloads.training.verl_config import MCP_FILE, config_files, mcp_servers_document
from components.workloads.training.volumes import persistent_volume, persistent_volume_claim


@dataclass(kw_only=True)
class TrainingJobArgs:
    settings: Settings
    layout: Layout  # resolved once, in __main__.py
    cluster: ClusterRefs
    gpu: Scheduling  # the GPU pool's node selector and tolerations (wiring.gpu_scheduling)
    storage: StorageRefs
    identity: WorkloadIdentity
    # The sandbox manager's API key (secret Output); required when sandbox.enabled.
    sandbox_api_key: Optional[pulumi.Input[str]] = None
    # Components the RayJob must wait for besides the cluster's add-ons: the dataset and model staging Jobs
    # (awaited until complete), the MLflow server and the sandbox MCP Service.
    wait_for: list[pulumi.Resource] = field(default_factory=list)
    # The node gate (gate.py): the pipeline code ConfigMap it runs from (DataJobs.code_config_map) and what must
    # exist before it starts waiting (this stack's GPU node pool; nothing when the platform owns it). No code map,
    # no gate.
    gate_code: Optional[pulumi.Resource] = None
    gate_after: list[pulumi.Resource] = field(default_factory=list)
    # An experiment stack's platform values (Outputs of its StackReference); None = derived from the settings,
    # as a single stack does (components/experiment.py).
    image: Optional[pulumi.Input[str]] = None
    tracking_uri: Optional[pulumi.Input[str]] = None
    mcp_url: Optional[pulumi.Input[str]] = None
    # What a shared platform adds to the RayJob before KubeRay's rules are checked: the queue's suspend, gang labels
    # and priority, the log collection's marker (components/experiment.py); None = the RayJob as built.
    shape: Optional[Callable[[dict], dict]] = None


class TrainingJob(pulumi.ComponentResource):
    def __init__(self, name: str, args: TrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("verl-ack:training:TrainingJob", name, None, opts)
        s = args.settings
        layout = args.layout
        # The Ray pods and all they mount or run as share one namespace: the job's, or with RDMA their own privileged
        # one (wiring.ray_namespace). The node gate stays in the job namespace, beside the code ConfigMap it mounts.
        ns = args.identity.ray_namespace
        job_ns = args.identity.namespace
        # What only lives in a namespace waits for the Namespace alone; the RayJob (and the queue check) also for the
        # RRSA roles and accounts its pods run as (identity.resources), so objects beside it do not lengthen its path.
        in_namespace = list(args.identity.namespaces)
        provider = args.cluster.k8s_provider

        def child(*deps: pulumi.Resource, **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(deps), **extra)

        # The object names the pod templates refer to (run_spec.py); the resources below are created under them.
        wiring = pod_wiring(s, namespace=ns, service_account=args.identity.training_service_account)

        # ---- OSS volumes
        claims: list[pulumi.Resource] = []
        for kind, vol in wiring.volumes.items():
            pv = persistent_volume(
                s, vol, namespace=ns, bucket=args.storage.bucket_name, endpoint=args.storage.endpoint,
                auth=args.storage.auth, role_name=args.storage.csi_role_name,
                access_key_secret=args.storage.access_key_secret_name, access_key_namespace=job_ns)
            pv_res = k8s.core.v1.PersistentVolume(
                f"{name}-{kind}-pv", metadata=pv["metadata"], spec=pv["spec"],
                # The OSS CSI driver serves these volumes; on destroy they go before it. OSS enforces no size: the
                # capacity is nominal, and a change to it must not replace a bound volume (a replaced claim
                # cannot bind the Released volume and `up` would hang).
                opts=child(*args.cluster.addons.csi, ignore_changes=["spec.capacity"]))
            pvc = persistent_volume_claim(s, vol, namespace=ns)
            claims.append(k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{kind}-pvc", metadata=pvc["metadata"], spec=pvc["spec"],
                # The claim names its volume by a plain string: wait for the PV so the claim binds at once (the
                # provider awaits Bound), and for the namespace it lives in.
                opts=child(pv_res, *in_namespace, ignore_changes=["spec.resources"])))

        # ---- verl config files (not secret) and the MCP servers file (secret)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": wiring.config_map, "namespace": ns,
                      "labels": {"app.kubernetes.io/part-of": "verl-ack"}},
            data=config_files(s),
            # The namespace must exist first.
            opts=child(*in_namespace))
        job_deps: list[pulumi.Resource] = [*claims, config_map]
        if wiring.mcp_secret:
            if args.sandbox_api_key is None:
                raise ValueError("sandbox.enabled needs the sandboxApiKey secret for the MCP servers file")
            document = pulumi.Output.secret(pulumi.Output.json_dumps(mcp_servers_document(s, args.sandbox_api_key, args.mcp_url)))
            job_deps.append(k8s.core.v1.Secret(
                f"{name}-mcp",
                metadata={"name": wiring.mcp_secret, "namespace": ns,
                          "labels": {"app.kubernetes.io/part-of": "verl-ack"}},
                type="Opaque",
                string_data={MCP_FILE: document},
                # The namespace must exist first.
                opts=child(*in_namespace)))

        # ---- who may reach the Ray cluster (its job API runs code on the GPU nodes for whoever holds the token); created before
        # the RayJob so no Ray pod ever runs unguarded
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-ray-ingress", **resource_kwargs(ray_network_policy_manifest(s)),
            opts=child(*in_namespace))
        job_deps.append(self.network_policy)

        # ---- the RayJob
        # The run's values, computed once; the manifest renders them and nothing else.
        self.spec = run_spec(s, layout, args.gpu, wiring)
        manifest = render_rayjob(self.spec)
        if args.shape is not None:  # the shared platform's queue, gang and log marker (components/experiment.py)
            manifest = args.shape(manifest)
        # ---- what the Ray pods may reach: nothing beyond the job's own needs where it downloads nothing at start
        egress = ray_egress_policy_manifest(s, manifest["spec"])
        self.egress_policy: Optional[k8s.networking.v1.NetworkPolicy] = None
        if egress is not None:
            self.egress_policy = k8s.networking.v1.NetworkPolicy(
                f"{name}-ray-egress", **resource_kwargs(egress), opts=child(*in_namespace))
            job_deps.append(self.egress_policy)

        # ---- the node gate: the RayJob is created only once the GPU nodes are there (else `up` fails, naming why)
        self.gate_job: Optional[pulumi.Resource] = None
        if args.gate_code is not None and gate.gate_needed(s):
            gate_sa = k8s.core.v1.ServiceAccount(
                f"{name}-gate-sa", **resource_kwargs(gate.service_account_manifest(s, job_ns)),
                opts=child(*in_namespace))
            role = k8s.rbac.v1.ClusterRole(f"{name}-gate-role", **resource_kwargs(gate.cluster_role_manifest(s)),
                                           opts=child())
            binding = k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-gate-binding", **resource_kwargs(gate.cluster_role_binding_manifest(s, job_ns)),
                # A binding names its subject; the ServiceAccount need not exist first (both before the Job).
                opts=child(role))
            # The ConfigMap's name is a digest of pipeline/*.py, the same one DataJobs gives it.
            job = gate.gate_job_manifest(s, self.spec, code_configmap_name(pipeline_code()))
            # Pulumi's Job await (default 10 min) must outlast the gate's own deadline.
            minutes = f"{job['spec']['activeDeadlineSeconds'] // 60 + 5}m"
            self.gate_job = k8s.batch.v1.Job(
                f"{name}-gate", **resource_kwargs(job),
                # Only what it runs with: its own account and binding, the code, the namespace, the nodes. Not the
                # identity's RRSA roles and accounts, which the RayJob waits for beside it (docs/latency.md).
                opts=child(gate_sa, binding, args.gate_code, *in_namespace, *args.cluster.ready,
                           *args.gate_after, custom_timeouts=pulumi.CustomTimeouts(create=minutes, update=minutes),
                           # A failed gate runs again on the next `up` instead of being re-awaited.
                           **RERUN_FAILED_JOB))
            job_deps.append(self.gate_job)
        check_rayjob(manifest, s.versions.kuberay, checkpoint_claim=wiring.volumes["checkpoints"].name)
        self.entrypoint: str = manifest["spec"]["entrypoint"]
        if args.image is not None or args.tracking_uri is not None:
            manifest = with_platform_values(manifest, image=args.image, tracking_uri=args.tracking_uri)
        self.rayjob = k8s.apiextensions.CustomResource(
            f"{name}-rayjob",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child(
                # Pods mount the claims, ConfigMap and Secret by name; they start only once those exist. KubeRay's
                # CRD and operator, the service account (identity), the system pool (cluster.ready) and wait_for
                # (the GPU node pool, the staged data and model, MLflow, the MCP Service) must be there too.
                *job_deps, *args.cluster.addons.kuberay, *args.identity.resources, *args.cluster.ready,
                *args.wait_for,
                # A RayJob runs once: KubeRay does not resubmit a job whose spec changes. Replace it instead, and
                # delete first because the name is fixed.
                replace_on_changes=["spec"], delete_before_replace=True))
        # ---- the queue admission check: `up` fails, naming the job, when no queue takes it within the bound
        self.admission_job: Optional[pulumi.Resource] = None
        if args.gate_code is not None and admission.admission_needed(s):
            sa = k8s.core.v1.ServiceAccount(
                f"{name}-admission-sa", **resource_kwargs(admission.service_account_manifest(s, self.spec)),
                opts=child(*args.identity.resources))
            role = k8s.rbac.v1.Role(f"{name}-admission-role", **resource_kwargs(admission.role_manifest(s, self.spec)),
                                    opts=child(*args.identity.resources))
            binding = k8s.rbac.v1.RoleBinding(
                f"{name}-admission-binding", **resource_kwargs(admission.role_binding_manifest(s, self.spec)),
                opts=child(role, sa))
            job = admission.admission_job_manifest(s, self.spec, code_configmap_name(pipeline_code()))
            minutes = f"{job['spec']['activeDeadlineSeconds'] // 60 + 5}m"
            self.admission_job = k8s.batch.v1.Job(
                f"{name}-admission", **resource_kwargs(job),
                # After the RayJob it checks; replaced with it (its name carries the run's digest).
                # A check that failed (no queue took the job in time) runs again on the next `up`, like the gate.
                opts=child(self.rayjob, sa, binding, args.gate_code, *args.cluster.ready,
                           custom_timeouts=pulumi.CustomTimeouts(create=minutes, update=minutes), **RERUN_FAILED_JOB))
        self.rayjob_name: str = self.spec.name
        self.register_outputs({"entrypoint": self.entrypoint, "rayjob_name": self.rayjob_name})


# --------------------------------------------------------------------------------------------- plan
