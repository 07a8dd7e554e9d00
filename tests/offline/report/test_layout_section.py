"""plan.md's GPU layout section shows the memory estimate with its calibration error against measured GPU runs."""

from components.model import load_stack
from components.model.memory_calibration import UPPER_RATIO, calibration_error
from offline.report.layout import layout_section
from tests.conftest import record


def test_the_memory_section_states_the_calibration_error_of_the_estimate():
    s = load_stack("dev")
    sec = layout_section(s, record("dev"))
    points = [p for p in calibration_error(s) if p.status == "ok"]
    low, high = min(p.ratio for p in points), max(p.ratio for p in points)
    line = f"training estimate / measured peak reserved: {low:.2f}-{high:.2f} over {len(points)} points"
    assert line in sec.markdown and line in sec.data["calibration"]
    assert 1.0 <= low <= high <= UPPER_RATIO
    assert "tools/measure_memory.py" in sec.markdown
