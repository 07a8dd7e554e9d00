"""verl-ack policy pack: `pulumi preview --policy-pack policy` (see docs/policy.md).

The Pulumi CLI runs this directory with runpy, which puts it on sys.path; the policies live in the
`verl_ack_policy` package next to this file so tests can import them without starting the pack's server.
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from verl_ack_policy.pack import PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    description="verl-ack guardrails: private encrypted OSS, no literal secrets, pay-as-you-go GPUs within budget, "
                "self-cleaning RayJobs, sandboxes kept off the metadata service, cost tags.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
