"""A sweep is one experiment stack: every combination of `training.sweep` runs as its own queued RayJob.

Each variant is the experiment's settings with the grid's values applied (`variant_settings`), validated like a
stack of its own (the training section's rules, then the GPU layout and memory rules of components/model/layout.py)
before anything is created. A variant is named by a short hash of its values (`v` + 6 hex digits), so adding a value
to one list neither renames nor replaces the variants that already exist (logical names are API). Per variant:

- RayJob `<job.name>-<key>` (its OSS volumes, ConfigMap and NetworkPolicy follow it), logical name `train-<key>`;
- MLflow run and trainer.experiment_name `<experiment_name>-<key>`;
- checkpoints under `<checkpoints_prefix><project>/<experiment_name>/<key>/`, inside the prefix the experiment's one
  training role may write, and what teardown keeps per variant (teardown.py).

The variants share the experiment's namespace, data Jobs and roles, and queue behind each other (sweeps require
`queue.enabled`): the queue starts as many as the team's quota holds, each one whole.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from components.config import RAYJOB_NAME_MAX, Settings
from components.model.layout import Layout, check_layout, resolve_layout
from components.wiring import checkpoint_key_prefix

ENVIRONMENT_NAME_MAX = 24  # components/config/types.py EnvironmentName


class SweepError(ValueError):
    """A variant the layout rules would refuse; the message names the variant and the rule."""


@dataclass(frozen=True)
class Variant:
    key: str  # v + 6 hex digits of the values' hash: stable whatever the order of the lists
    overrides: dict[str, Any]  # training field -> value
    settings: Settings
    layout: Layout

    @property
    def run_name(self) -> str:
        return self.settings.training.experiment_name

    @property
    def rayjob_name(self) -> str:
        return self.settings.job.name

    @property
    def checkpoint_prefix(self) -> str:
        return checkpoint_key_prefix(self.settings)


def variant_key(overrides: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()
    return f"v{digest[:6]}"


def _suffixed(name: str, key: str, limit: int) -> str:
    return f"{name[:limit - len(key) - 1].rstrip('-')}-{key}"


def variant_settings(s: Settings, overrides: dict[str, Any], key: str) -> Settings:
    """The experiment's settings as one variant: the grid's values, its own run, RayJob and volume names; validated
    as a whole (a variant that breaks a cross-field rule fails here, naming the variant)."""
    t = s.training
    data = s.model_dump()
    data["training"] = {**data["training"], **overrides, "sweep": None,
                        "experiment_name": f"{t.experiment_name}-{key}"}
    data["job"] = {**data["job"], "name": _suffixed(s.job.name, key, RAYJOB_NAME_MAX)}
    # PersistentVolumes are cluster-scoped and named after settings.name: each variant's need their own names.
    data["name"] = _suffixed(s.name, key, ENVIRONMENT_NAME_MAX)
    try:
        out = Settings.model_validate(data)
    except ValueError as err:
        raise SweepError(f"training.sweep variant {key} {overrides}: {err}") from None
    out.training._sweep_variant = key  # its checkpoint folder under the sweep's prefix (wiring.checkpoint_key_prefix)
    return out


def variants(s: Settings) -> list[Variant]:
    """Every variant of `training.sweep`, checked by the layout and memory rules; [] when the stack sweeps nothing."""
    if s.training.sweep is None:
        return []
    axes = s.training.sweep.axes()
    out = []
    for combo in itertools.product(*axes.values()):
        overrides = dict(zip(axes, combo, strict=True))
        key = variant_key(overrides)
        vs = variant_settings(s, overrides, key)
        errors = [f for f in check_layout(vs) if f.severity == "error"]
        if errors:
            raise SweepError(f"training.sweep variant {key} {overrides} would be rejected by verl/vLLM at start:\n"
                             + "\n".join(f"  - {f.field}: {f.message}" for f in errors))
        out.append(Variant(key, overrides, vs, resolve_layout(vs)))
    if len({v.key for v in out}) != len(out):  # a hash collision would merge two variants' names
        raise SweepError("two training.sweep variants hash to one name; change one value slightly")
    return out


def checkpoint_folders(s) -> list[str]:
    """The experiment folders under <checkpoints_prefix><project>/ whose latest step teardown.py keeps: the
    experiment's, or one per variant, `<experiment_name>/<key>`."""
    base = s.training.experiment_name
    if getattr(s.training, "sweep", None) is None:
        return [base]
    return [f"{base}/{v.key}" for v in variants(s)]
