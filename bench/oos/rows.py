"""A frozen out-of-sample set's scripts as rows: its hand-written scripts with their frozen
outcomes, and grammar draws on its new tasks, executed once and memoised.

Shared by the benches that read a frozen set (``bench.world_model_oos``, ``bench.sample_run_frontier``);
nothing here fits or selects anything.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pandas as pd

from bench.common import RESULTS
from bench.oos import FrozenSet
from wmrl_envs.errors import ConfigError
from wmrl_envs.task_spec import Task

NAME = "world_model_oos"
GRAMMAR_SEED = 44
GRAMMAR_PER_TASK = 8
#: A task's grammar draws stop at this many times ``--grammar-per-task``, valid or not.
GRAMMAR_DRAW_FACTOR = 3
_MEMO_COLUMNS = ("task_id", "choices", "seed", "sha256", "status", "exception", "valid", "raw_score", "reward",
                 "cpu_s")


def script_sha256(script: str) -> str:
    """A script's identity in the memo: a renderer that changes it makes the draw run again."""
    return hashlib.sha256(script.encode("utf-8")).hexdigest()


def result_name(frozen_set: FrozenSet) -> str:
    """The default results name of a set's report (``world_model_oos`` for the first set)."""
    return NAME if frozen_set.name == "v1" else f"{NAME}_{frozen_set.name}"


def grammar_memo(frozen_set: FrozenSet) -> Path:
    """Where a set's grammar executions are memoised."""
    return RESULTS / f"{result_name(frozen_set)}_grammar.csv"


def handwritten_rows(frozen_set: FrozenSet) -> pd.DataFrame:
    """The set's frozen hand-written scripts with their executed outcomes, one row each."""
    frozen = pd.read_csv(frozen_set.outcomes_file, keep_default_na=False, na_values={"raw_score": [""]})
    text = {(p.parent.name, p.stem): p.read_text(encoding="utf-8") for p in frozen_set.script_paths()}
    if set(text) != set(zip(frozen.task_id, frozen.script)):
        raise ConfigError(f"{frozen_set.scripts_dir} and {frozen_set.outcomes_file} disagree: the frozen data changed")
    rows = frozen.assign(source="handwritten", text=[text[k] for k in zip(frozen.task_id, frozen.script)])
    return rows[["task_id", "script", "suite", "source", "text", "status", "exception", "valid", "reward", "cpu_s"]]


def read_memo(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The memoised grammar executions by (task, choices, render seed)."""
    if not path.is_file():
        return {}
    frame = pd.read_csv(path, keep_default_na=False, na_values={"raw_score": [""]}, dtype={"choices": str})
    return {(r["task_id"], r["choices"], int(r["seed"])): r for r in frame.to_dict("records")}


def write_memo(path: Path, memo: dict[tuple[str, str, int], dict[str, Any]]) -> None:
    frame = pd.DataFrame([memo[k] for k in sorted(memo)], columns=list(_MEMO_COLUMNS))
    frame.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def grammar_rows(tasks: dict[str, Task], suite: str, per_task: int, seed: int, executor: str, workers: int,
                 memo_path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Grammar scripts on the new tasks: each task's draws in plan order up to its ``per_task``-th
    valid one, executing (and memoising) those the memo lacks; returns the rows and what it cost."""
    from agents.code.grammar import SLOTS, SolutionChoices, render_script
    from wmrl_envs.scoring import CodeScorer
    from wmrl_envs.world_models.build.corpus import plan_corpus

    def render(spec, choices, render_seed):
        return render_script(spec, SolutionChoices(**choices), render_seed)

    ordered = [tasks[t] for t in sorted(tasks)]
    plan = plan_corpus(ordered, SLOTS, [], per_task=per_task * GRAMMAR_DRAW_FACTOR, broken_fraction=0.0, seed=seed)
    scripts = {item: item.script(tasks[item.task_id].spec, render) for item in plan}
    memo = read_memo(memo_path)

    def known(item) -> dict[str, Any] | None:
        row = memo.get((item.task_id, item.choices, item.seed))
        return row if row is not None and row["sha256"] == script_sha256(scripts[item]) else None

    def chosen_and_missing() -> tuple[list, list]:
        """Each task's draws up to its ``per_task``-th valid one, and those of them not yet executed
        (each counted as if it ran valid, so that no more is drawn than the least it may take)."""
        chosen, missing = [], []
        for task in ordered:
            enough = 0
            for item in (i for i in plan if i.task_id == task.id):
                if enough >= per_task:
                    break
                row = known(item)
                if row is None:
                    missing.append(item)
                    enough += 1
                else:
                    chosen.append(item)
                    enough += bool(row["valid"])
        return chosen, missing

    executed, sandbox_cpu = 0, 0.0
    chosen, missing = chosen_and_missing()
    while missing:
        scorer = CodeScorer(executor=executor, workers=workers, prove=False)
        try:
            results = scorer.execute([tasks[i.task_id] for i in missing], [scripts[i] for i in missing])
        finally:
            scorer.close()
        failed = [i.task_id for i, r in zip(missing, results) if r.infra_failure]
        if failed:
            raise ConfigError(f"infrastructure failures (no outcome) on {failed}: rerun when the sandbox works")
        for item, r in zip(missing, results):
            cpu = float(r.cost.get("execution_cpu_s", math.nan))
            memo[(item.task_id, item.choices, item.seed)] = {
                "task_id": item.task_id, "choices": item.choices, "seed": item.seed,
                "sha256": script_sha256(scripts[item]), "status": r.status, "exception": r.exception or "",
                "valid": bool(r.valid), "raw_score": r.raw_score, "reward": float(r.real_score or 0.0),
                "cpu_s": round(cpu, 3)}
            sandbox_cpu += cpu
        executed += len(missing)
        write_memo(memo_path, memo)
        chosen, missing = chosen_and_missing()
    rows = pd.DataFrame([{**known(i), "script": f"{i.choices}@{i.seed}", "text": scripts[i]} for i in chosen])
    rows = rows.assign(suite=suite, source="grammar")
    short = {t: int(n) for t, n in rows[rows["valid"]].groupby("task_id").size().items() if n < per_task}
    short.update({t.id: 0 for t in ordered if t.id not in set(rows.loc[rows["valid"], "task_id"])})
    cost = {"executed_now": executed, "executed_now_sandbox_cpu_s": round(sandbox_cpu, 1), "draws": len(rows),
            "valid": int(rows["valid"].sum()), "tasks_short_of_valid": short,
            "sandbox_cpu_s_per_script": float(rows["cpu_s"].mean())}
    return rows[["task_id", "script", "suite", "source", "text", "status", "exception", "valid", "reward",
                 "cpu_s"]], cost
