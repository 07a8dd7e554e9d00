"""Rules of a stack's kind (single, platform, experiment): what each may set, and what the split needs
(components/platform.py, components/experiment.py). Called by Settings' `_stack_kind` rule (root.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config.project import PROJECT

# A fully qualified stack name, as `pulumi.StackReference` takes it: <organization>/<project>/<stack>.
PLATFORM_STACK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def stack_kind_problems(s) -> Iterator[tuple[str, str]]:
    """(setting, message) for each rule of the platform/experiment split (`s`: the Settings)."""
    if s.kind == "experiment":
        if not s.platform_stack:
            yield "platform_stack", (
                "kind=experiment needs platform_stack: the platform stack's fully qualified name "
                "<organization>/<project>/<stack>, e.g. organization/verl-ack/dev-platform")
        elif not PLATFORM_STACK.fullmatch(s.platform_stack):
            yield "platform_stack", (
                f"platform_stack {s.platform_stack!r} is not a fully qualified stack name: write "
                "<organization>/<project>/<stack>, e.g. organization/verl-ack/dev-platform")
        elif s.platform_stack.split("/")[1] != PROJECT:
            yield "platform_stack", (
                f"platform_stack {s.platform_stack!r} names the project "
                f"{s.platform_stack.split('/')[1]!r}; the platform is a stack of this project: "
                f"write <organization>/{PROJECT}/<stack>")
    elif s.platform_stack is not None:
        yield "platform_stack", (
            f"platform_stack is read only by kind=experiment (this stack is kind={s.kind}); remove "
            "it or set kind: experiment")
    if s.kind == "experiment" and s.sandbox.domain:
        yield "sandbox.domain", (
            "sandbox.domain belongs to the platform stack (its ALB and certificate); an experiment "
            "reads the platform's MCP URL instead: remove sandbox.domain and sandbox.dns_zone here")
    if s.kind != "single" and s.storage.auth != "rrsa":
        yield "storage.auth", (
            f"kind={s.kind} needs storage.auth: rrsa: an experiment's pods reach the platform's "
            "bucket through their own RRSA roles, and no AccessKey Secret crosses stacks")
    if s.kind == "single" and s.gpu_pool.owner == "platform":
        yield "gpu_pool.owner", (
            "gpu_pool.owner: platform applies to split stacks (kind platform and experiment); a single "
            "stack owns its GPU pool anyway: remove gpu_pool.owner, or split the stack (docs/stacks.md)")
    if s.kind == "platform" and s.image.source == "built" and not s.image.digest:
        yield "image.digest", (
            "kind=platform with image.source=built needs image.digest (sha256:...): experiments run "
            "the image the platform exports, pinned by digest so a re-pushed tag cannot change it; "
            "copy it from the image workflow's output")
