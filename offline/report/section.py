"""A section of the offline plan: a title, markdown for reviewers and plain data for plan.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    key: str
    title: str
    markdown: str
    data: Any = field(default=None)


def rows_data(rows: list[tuple[str, Any]]) -> dict[str, str]:
    """A table's rows as plan.json holds them: each statement of plan.md is also in plan.json, word for word."""
    return {str(k): str(v) for k, v in rows}


def table(rows: list[tuple[str, Any]], head: tuple[str, str] = ("", "")) -> str:
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


ALB_TYPE = "alicloud:alb/loadBalancer:LoadBalancer"


def alb_reach(recording) -> str | None:
    """Who reaches the sandbox domain's ALB, from the recorded resource's `addressType` (the plan states what the
    program creates, never what a setting is expected to make it create); None when no ALB is recorded."""
    albs = recording.by_type(ALB_TYPE)
    if not albs:
        return None
    kind = str(albs[0].inputs.get("addressType", ""))
    return {"Internet": "**internet**", "Intranet": "VPC only (intranet ALB)"}.get(kind, f"addressType `{kind}`")
