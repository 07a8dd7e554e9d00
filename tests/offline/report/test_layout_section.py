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
    line = f"training estimate of PyTorch's reserved peak / measured: {low:.2f}-{high:.2f} over {len(points)} points"
    assert line in sec.markdown and line in sec.data["calibration"]
    assert 1.0 <= low <= high <= UPPER_RATIO
    assert "tools/measure_memory.py" in sec.markdown


def test_the_layout_section_names_the_models_family_parser_thinking_mode_and_calibration():
    from components.model import parse_settings
    from tests.conftest import stack_settings

    s = parse_settings(stack_settings("dev", {"model": {"preset": "qwen3-4b", "ppo_micro_batch_size_per_gpu": 8}}))
    md = layout_section(s, record("dev")).markdown
    assert "Qwen/Qwen3-4B (4.022 B parameters, qwen3; layout defaults from verl examples/sglang_multiturn/" in md
    assert "| chat template / tool-call parser | the model's own / hermes, thinking off |" in md
    assert "uncalibrated" not in md and "points (qwen2, qwen3) on NVIDIA H200" in md
    dev = layout_section(load_stack("dev"), record("dev")).markdown
    assert "uncalibrated" not in dev and "thinking" not in dev
