"""verl's own config validation (`verl.utils.config.validate_config`, what `main_ppo` runs before it starts Ray) on
the composed config of every stack and of the run shapes issue 41 adds: a branch from another run's checkpoint and
an evaluation-only run. It needs verl importable (numpy, torch and Ray installed): the shared test venv has torch but
not Ray or numpy, so this file runs where they are (a venv with requirements-verl.txt and Ray) and is skipped
elsewhere; the Hydra composition of the same jobs runs everywhere (test_verl_config.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")
pytest.importorskip("ray")
pytest.importorskip("torch")

from tests.components.workloads.training.test_rayjob import settings_for  # noqa: E402
from tests.components.workloads.training.test_verl_config import compose_job  # noqa: E402

JOBS = {
    "branch": {"training": {"experiment_name": "branch-lr2",
                            "resume_from": "checkpoints/gsm8k-tool-agent/base/global_step_40/"}},
    "val_only": {"training": {"val_only": True, "total_training_steps": 0}},
    "plain": {},
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_verls_own_validation_accepts_each_run_shape(stack_name, job, tmp_path):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = compose_job(tmp_path, settings_for(stack_name, JOBS[job]))
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
