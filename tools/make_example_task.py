"""Writes the worked example of one's own task (docs/task.md): stacks/tasks/own/{train,val}.parquet.

    .venv/bin/python tools/make_example_task.py

Two-number sums as verl's RLHFDataset rows (pipeline/rows.py names the layout): a system and a user message, the
data_source the reward file keys on, the sum as `reward_model.ground_truth`, single-turn rows. Deterministic (a fixed
seed), so the committed files are what this writes; tests/test_task.py holds them equal.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "stacks" / "tasks" / "own"
DATA_SOURCE = "verl-ack/sums"
SYSTEM = "You add numbers. Think briefly, then give the result as <answer>N</answer>."
SPLITS = {"train": (64, 1), "val": (16, 2)}  # rows, seed


def rows(split: str, count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        out.append({
            "data_source": DATA_SOURCE,
            "agent_name": "single_turn_agent",
            "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b}?"}],
            "ability": "arithmetic",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {"split": split, "index": index},
        })
    return out


def main() -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    OUT.mkdir(parents=True, exist_ok=True)
    for split, (count, seed) in SPLITS.items():
        pq.write_table(pa.Table.from_pylist(rows(split, count, seed)), OUT / f"{split}.parquet")
        print(f"wrote {OUT / f'{split}.parquet'} ({count} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
