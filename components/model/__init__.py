"""The domain model, pure Python with no Pulumi: model presets, the GPU layout (resolved once), the start-up
rules of verl and vLLM, and the per-GPU memory estimate.

`parse_settings` is what every entry point calls: the settings validated field by field (components.config),
then against the layout rules, every error reported at once before anything is created.
"""

from __future__ import annotations

from pathlib import Path

from components.config import Problem, Settings, SettingsError, raw_settings, validate_settings
from components.model.layout import Finding, Layout, check_layout, resolve_layout
from components.model.presets import PRESETS, ModelPreset, preset_of


def parse_settings(raw: dict) -> Settings:
    """Validate raw settings and the GPU layout rules; raise SettingsError listing every problem."""
    try:
        settings = validate_settings(raw)
    except SettingsError as err:
        if err.settings is None:
            raise
        # Only cross-field rules failed: the layout rules are independent of them, so their problems join the list.
        raise SettingsError(err.problems + _layout_problems(err.settings), err.settings) from None
    errors = _layout_problems(settings)
    if errors:
        raise SettingsError(errors, settings)
    return settings


def _layout_problems(settings: Settings) -> list[Problem]:
    return [Problem(field=p.field, message=p.message) for p in check_layout(settings) if p.severity == "error"]


def load_stack(name_or_path: str | Path) -> Settings:
    """Settings of a stack file, validated (used by plan.py, teardown.py and the tests)."""
    return parse_settings(raw_settings(name_or_path))


__all__ = ["Finding", "Layout", "ModelPreset", "PRESETS", "check_layout", "load_stack", "parse_settings", "preset_of",
           "resolve_layout"]
