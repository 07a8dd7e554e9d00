"""The typed contract between stack files and code: a leaf package that imports nothing else of the repo.

A stack file (`stacks/Pulumi.<stack>.yaml`) carries one structured key, `verl-ack:settings`, validated by
`Settings` (root.py, one module per section group beside it); secrets are separate secret config keys
(`SECRET_KEYS`, project.py). Every default lives here, every field is described (the descriptions become
`stacks/stack.schema.json` and docs/settings.md), and every cross-field rule names the field, the rule and
the fix. GPU-layout rules that need the model preset live in `components/model/` and run right after this
model validates (`components.model.parse_settings`).
"""

from components.config.addons import ADDON_ROLES, DEFAULT_ADDONS, OPTIONAL_ADDONS, addon_installed
from components.config.cloud import (
    AddonSetting,
    ClusterSettings,
    EcsGpuSettings,
    GpuPoolSettings,
    LingjunSettings,
    NetworkSettings,
    SandboxManagerAddonKeys,
    StorageSettings,
    SystemPoolSettings,
)
from components.config.estimates import (
    DEFAULT_CREATE_MINUTES,
    DEFAULT_PRICES_USD,
    PRICE_KEYS,
    CostSettings,
    LatencySettings,
)
from components.config.image import ImageSettings, VersionSettings
from components.config.loading import (
    Problem,
    SettingsError,
    raw_settings,
    read_stack_config,
    stack_file,
    validate_settings,
)
from components.config.models import CUSTOM, FAMILIES, PRESET_NAMES, PRESETS, CustomModelSettings
from components.config.project import PROJECT, REPO_ROOT, SECRET_KEYS, SETTINGS_KEY, STACKS_DIR
from components.config.root import Settings
from components.config.sandbox import SandboxSettings, TlsSettings
from components.config.task import TASK_PRESETS, TaskPreset, TaskSettings
from components.config.training import (
    PIPELINE_IMPORTS,
    DatasetSettings,
    JobSettings,
    ModelSettings,
    TrackingSettings,
    TrainingSettings,
)
from components.config.types import DNS1035, DNS1123_LABEL, DNS1123_SUBDOMAIN, RAYJOB_NAME_MAX, Strict

__all__ = [
    "ADDON_ROLES", "CUSTOM", "FAMILIES", "PRESETS", "CustomModelSettings", "DEFAULT_ADDONS", "DEFAULT_CREATE_MINUTES",
    "DEFAULT_PRICES_USD", "DNS1035", "DNS1123_LABEL", "DNS1123_SUBDOMAIN",
    "OPTIONAL_ADDONS", "PIPELINE_IMPORTS", "PRESET_NAMES", "PRICE_KEYS", "PROJECT", "RAYJOB_NAME_MAX", "REPO_ROOT",
    "SECRET_KEYS", "SETTINGS_KEY", "STACKS_DIR", "TASK_PRESETS", "TaskPreset", "TaskSettings", "AddonSetting", "ClusterSettings",
    "CostSettings", "DatasetSettings", "EcsGpuSettings", "GpuPoolSettings", "ImageSettings", "JobSettings",
    "LatencySettings", "LingjunSettings", "ModelSettings", "NetworkSettings", "Problem", "SandboxManagerAddonKeys",
    "SandboxSettings", "Settings", "SettingsError", "StorageSettings", "Strict", "SystemPoolSettings",
    "TlsSettings", "TrackingSettings", "TrainingSettings", "VersionSettings", "addon_installed", "raw_settings",
    "read_stack_config",
    "stack_file",
    "validate_settings",
]
