"""Write verl's RL dataset for a code family: ``train.parquet`` and a held-out ``<split>.parquet``.

::

    python scripts/prepare_verl_data.py --env-id wmrl/MLEDojo-v0 --out data/verl-mle
    python -m verl.trainer.main_ppo data.train_files=data/verl-mle/train.parquet \\
        data.val_files=data/verl-mle/heldout.parquet ...   # see docs/examples/verl_example.md

One row per task, in verl's schema: ``prompt`` (the chat messages the LM policy is prompted
with, :func:`agents.code.lm_policy.build_messages`), ``data_source`` (the env id), ``ability``,
``reward_model`` (verl wants a ``ground_truth``; it holds the task id, never answers) and
``extra_info`` with ``task_id`` (what the ``wmrl`` reward manager scores against),
``prompt_uid`` (a stable hash of the task id and the messages), ``split`` and ``index``.
Runs in the project's venv or in verl's (``scripts/setup_verl.sh``): it needs pandas and pyarrow,
not verl.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from agents.code.lm_policy import CausalLMPolicyConfig, build_messages
from trainers.integrations.prompts import code_tasks, prompt_uid
from wmrl_envs.errors import ConfigError, WMRLError
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import SPLIT_CHOICES


def dataset_rows(tasks: Iterable[Task], data_source: str, config: CausalLMPolicyConfig | None = None) -> list[dict]:
    """verl's rows, one per task (see the module docstring)."""
    config = config or CausalLMPolicyConfig()
    rows = []
    for index, task in enumerate(tasks):
        messages = build_messages(task, config)
        rows.append({
            "data_source": data_source,
            "prompt": messages,
            "ability": "code",
            "reward_model": {"style": "wmrl", "ground_truth": task.id},
            "extra_info": {"task_id": task.id, "prompt_uid": prompt_uid(task.id, messages),
                           "split": task.spec.split, "index": index},
        })
    if not rows:
        raise ConfigError("no tasks to write")
    return rows


def write(rows: list[dict], path: Path) -> Path:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="wmrl/MLEDojo-v0", help="a code family (wmrl/MLEDojo-v0, wmrl/DSBench-v0)")
    parser.add_argument("--out", type=Path, required=True, help="folder for train.parquet and <val-split>.parquet")
    parser.add_argument("--val-split", default="heldout", choices=[s for s in SPLIT_CHOICES if s != "train"],
                        help="the validation tasks: every held-out task, or the held-out half of `lite`")
    parser.add_argument("--tasks", nargs="+", default=None, help="train on exactly these task ids")
    parser.add_argument("--val-tasks", nargs="+", default=None, help="validate on exactly these task ids")
    parser.add_argument("--max-description-chars", type=int, default=CausalLMPolicyConfig.max_description_chars,
                        help="task descriptions are cut to this many characters in the prompt")
    args = parser.parse_args(argv)
    config = CausalLMPolicyConfig(max_description_chars=args.max_description_chars)
    try:
        for split, names, file in (("train", args.tasks, "train"), (args.val_split, args.val_tasks, args.val_split)):
            tasks = code_tasks(args.env_id, split, names)
            path = write(dataset_rows(tasks, args.env_id, config), args.out / f"{file}.parquet")
            print(f"{path}: {len(tasks)} {split} tasks")
    except WMRLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
