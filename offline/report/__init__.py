"""The offline plan's report: sections of `plan.md` / `plan.json`, and the estimates behind them.

Each builder takes the validated settings and the recorded program run and returns a `Section`. plan.py renders
whatever is listed in `BUILDERS`. Only the offline tools import this package: the Pulumi program (components/)
never does, so `pulumi up` loads no estimate and no report, and the cost and time figures come from one
source, the recorded resource graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.config import Settings
from offline.report.checklist import checklist_section
from offline.report.cloud import cloud_section
from offline.report.cost import cost_section
from offline.report.latency import latency_section
from offline.report.layout import layout_section
from offline.report.runs import runs_section
from offline.report.section import Section
from offline.report.security import security_section
from offline.report.sharing import sharing_section
from offline.report.task import task_section
from offline.report.teardown_bill import teardown_section
from offline.report.training import training_section
from offline.report.workloads import data_section, sandbox_section

BUILDERS: list[Callable[[Settings, Any], Section]] = [layout_section, cloud_section, latency_section, cost_section,
                                                      sandbox_section, data_section, task_section, training_section,
                                                      runs_section,
                                                      security_section, sharing_section, checklist_section,
                                                      teardown_section]


def plan_sections(s: Settings, recording) -> list[Section]:
    return [build(s, recording) for build in BUILDERS]
