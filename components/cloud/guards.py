"""What guards a stack against an accidental rebuild: Pulumi's `protect` on the resources whose replacement
rebuilds the whole platform (the cluster, the VPC, the vSwitches; a ForceNew input of any of them would replace
the cluster, both pools, every add-on and every Kubernetes object: about 38 minutes of platform).

A protected resource cannot be deleted or replaced: `pulumi up` fails naming it instead. An intended destroy goes
through teardown.py, which unprotects exactly these types in the state (`pulumi state unprotect`) and runs
`pulumi destroy --run-program` with `VERL_ACK_DESTROY=1`, under which the program leaves `protect` off, so the
program run inside the destroy does not put the bit back. A deliberate rebuild is documented in
docs/review-and-teardown.md ("Rebuilding on purpose").
"""

from __future__ import annotations

import os

# Set by teardown.py for the `pulumi destroy` it runs; nothing else should set it.
DESTROY_ENV = "VERL_ACK_DESTROY"
# Type tokens of the resources this program protects against an accidental rebuild (new ones only: an existing
# cluster or VPC is read or named, never managed). teardown.py unprotects exactly these.
GUARDED_TYPES = (
    "alicloud:cs/managedKubernetes:ManagedKubernetes",
    "alicloud:vpc/network:Network",
    "alicloud:vpc/switch:Switch",
)


def destroying() -> bool:
    """Whether this run is the program run inside teardown.py's `pulumi destroy --run-program`.

    The engine generates the deletes only after the program has finished, and a program error stops the destroy
    before any delete (pulumi/pulumi@1b5949891b pkg/resource/deploy/deployment_executor.go :289-303, the
    `event.Error` -> BailError ahead of performDeletes). So under a destroy the program reads nothing that describes
    the world as it is now (what the catalogue sells, which DNS zones, registries and Lingjun nodes exist, the live
    add-on versions, the bucket's markers, what the platform or the last `up` exported): a stock-out or a released
    node must not keep a stack billing (docs/teardown.md "What the program reads under a destroy")."""
    return os.environ.get(DESTROY_ENV) == "1"


def rebuild_guard() -> bool:
    """The `protect` option of a guarded resource: on, unless teardown.py is destroying the stack."""
    return not destroying()


# Every read the program still makes under a destroy (invoke token or read type -> why it is no description of the
# world as it is now). Every other invoke and read of the program is skipped under `destroying()`;
# tests/test_teardown_reads.py derives the program's reads from every shipped stack and holds a destroy-time run of
# each to this list.
DESTROY_READS = {
    "alicloud:cs/getClusterCredential:getClusterCredential":
        "the Kubernetes provider's own login (fresh on every run) for deleting this stack's Kubernetes objects",
    "alicloud:index/getAccount:getAccount":
        "the caller's own account id (an existing cluster's OIDC provider ARN): it answers whenever the destroy's "
        "own credentials do",
    "alicloud:cs/managedKubernetes:ManagedKubernetes":
        "the existing cluster (cluster.mode: existing) the stack's Kubernetes objects are deleted from; read, never "
        "managed",
    "pulumi:pulumi:StackReference":
        "an experiment's platform outputs (region, cluster id): the cloud and cluster its objects are deleted from",
}
