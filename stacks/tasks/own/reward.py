"""The worked example's reward (docs/task.md): 1.0 when the last <answer>...</answer> the model wrote holds the sum,
else 0.0. verl's signature; the job hands it only what the model generated."""

import re

_ANSWER = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    found = _ANSWER.findall(solution_str or "")
    return 1.0 if found and found[-1] == str(ground_truth).strip() else 0.0
