"""What the benchmarks that train code policies share (``bench/stress.py``, ``bench/buggy_agent.py``):
the fast task sets, the execution memo and its scorer, the audit of world-model rewards on fresh
executions, and the settings check of resumed runs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainers.policies import policy_responder
from wmrl_envs.sandbox.arithmetic import arithmetic
from wmrl_envs.scoring import CodeScorer, extract_code

# Tasks that execute fast (mean wall-seconds per script on 2 cores, from the surrogate's
# corpus): 12 train tasks of 4 types and 12 metrics (3.8 s on average), the 3 fastest held-out
# ones (3.4 s) and 6 held-out ones of 5 types and 6 metrics (5.5 s; all 14 average 6.0 s).
FAST_TRAIN = ("breast-cancer-diagnosis", "biopsy-malignancy", "credit-card-application", "biomass-heating-value",
              "cps-wages", "windsor-house-prices", "developer-remote-work", "olive-oil-origin",
              "fishing-mode-choice", "texas-housing", "hepatic-injury", "tate-artwork-year")
FAST_HELDOUT = ("diabetes-progression", "concrete-strength", "titanic-survival", "hpc-job-class", "handwritten-digits",
                "food-review-sentiment")
MEMO_NOTE = ("Executions are memoized by (task, script sha256) across all runs; every reuse is charged the measured "
             "cost of its first run, in every mode alike.")


class ExecutionMemo:
    """Graded outcomes of executed scripts by (task id, script sha256), appended to a JSON-lines file.

    Each entry records the arithmetic it ran with (:mod:`wmrl_envs.sandbox.arithmetic`): a memo
    made with another is refused, since its scores can sit a leaderboard rank away from what
    this host measures, and replaying them would mix two arithmetics in one grid."""

    FIELDS = ("raw_score", "real_score", "valid", "error", "status", "leaderboard")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.arithmetic = arithmetic()
        self.entries: dict[str, dict[str, Any]] = {}
        if path.exists():
            for number, line in enumerate(path.read_text().splitlines(), 1):
                entry = json.loads(line)
                recorded = entry.pop("arithmetic", "unrecorded (before it was pinned)")
                if recorded != self.arithmetic:
                    raise SystemExit(f"{path}, line {number}: an execution run with {recorded} arithmetic, but this "
                                     f"host runs {self.arithmetic}; its scores may differ from what this host "
                                     "measures. Start a new memo (another --memo-dir, or --runs for buggy_agent)")
                self.entries[entry.pop("key")] = entry

    @staticmethod
    def key(task_id: str, script: str) -> str:
        return f"{task_id}:{hashlib.sha256(script.encode()).hexdigest()}"

    def store(self, key: str, sample) -> None:
        entry = {name: getattr(sample, name) for name in self.FIELDS}
        entry["cost"] = {name: sample.cost[name] for name in ("execution_s", "execution_cpu_s")}
        self.entries[key] = entry
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, **entry, "arithmetic": self.arithmetic}, default=str) + "\n")

    def restore(self, key: str, sample) -> None:
        entry = self.entries[key]
        for name in self.FIELDS:
            setattr(sample, name, entry[name])
        sample.score = sample.real_score
        sample.executed = True  # a replayed run: the ledger charges executed samples only
        sample.cost.update(entry["cost"])


class MemoScorer(CodeScorer):
    """A code scorer that runs each (task, script) once per benchmark and replays it after."""

    def __init__(self, memo: ExecutionMemo, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.memo = memo
        self.ran = self.reused = 0

    def _execute(self, groups, out, items, uncorrected) -> None:
        keys = {item: ExecutionMemo.key(groups[item[0]].task.id, groups[item[0]].scripts[item[1]]) for item in items}
        first: dict[str, tuple[int, int]] = {}
        for item in items:
            if keys[item] not in self.memo.entries:
                first.setdefault(keys[item], item)  # a script repeated in one batch runs once
        super()._execute(groups, out, list(first.values()), uncorrected)
        for key, (gi, i) in first.items():
            if not out[gi].samples[i].infra_failure:  # an infrastructure failure is not an outcome
                self.memo.store(key, out[gi].samples[i])
        ran = set(first.values())
        replayed = []
        for gi, i in (item for item in items if item not in ran):
            sample, key = out[gi].samples[i], keys[(gi, i)]
            if key in self.memo.entries:
                self.memo.restore(key, sample)
                replayed.append((groups[gi].task, groups[gi].scripts[i], sample, uncorrected.get((gi, i))))
                self.reused += 1
            else:  # its twin in this batch failed for the infrastructure: no outcome for either
                twin = first[key]
                sample.infra_failure, sample.error = True, out[twin[0]].samples[twin[1]].error
        # A replayed run teaches what running it would have: the scorer learns from it too.
        self._learn(replayed)
        self.ran += len(first)


def step_scripts(outcomes) -> tuple[int, int]:
    """A training step's executed scripts (real and anchor groups) and all its scripts."""
    executed = sum(len(o.rollouts) for o in outcomes if o.stream in ("real", "anchor"))
    return executed, sum(len(o.rollouts) for o in outcomes)


@dataclass(frozen=True)
class Heldout:
    """avg@k by real execution at one evaluation point: mean and SE over tasks, each task's avg@k,
    and the runs that failed for the infrastructure (no score, left out of their task's mean)."""

    mean: float
    se: float
    per_task: dict[str, float]
    infra_failures: int


def heldout_score(policy, tasks, k: int, seed: int, scorer: CodeScorer) -> Heldout:
    """avg@k by real execution, as ``trainers.evaluate`` scores it, through ``scorer`` (a
    :class:`MemoScorer` replays what the benchmark already ran). Every task's runs go out in one
    fan-out."""
    respond = policy_responder(policy, seed)
    scripts = {task.id: [extract_code(r) for r in respond(task, k, seed)] for task in tasks}
    results = scorer.execute([task for task in tasks for _ in scripts[task.id]],
                             [script for task in tasks for script in scripts[task.id]])
    per_task, start = {}, 0
    for task in tasks:
        runs = results[start:start + len(scripts[task.id])]
        start += len(runs)
        kept = [r.real_score for r in runs if not r.infra_failure]  # an infrastructure failure is not a score
        per_task[task.id] = float(np.mean(kept)) if kept else 0.0
    scores = np.array(list(per_task.values()))
    se = float(scores.std(ddof=1) / math.sqrt(scores.size)) if scores.size > 1 else 0.0
    return Heldout(float(scores.mean()), se, per_task, sum(r.infra_failure for r in results))


class FreshPairAudit:
    """The error of a run's world-model rewards on executions it never learns from (issue 46).

    After each step, ``groups_per_step`` of its world-model groups, drawn at random from (seed,
    step) whatever chose the anchors, are executed by a scorer of their own: the run's scorer,
    calibrator and ledger never see these outcomes, so they are fresh pairs for every anchor
    schedule alike. Each pair is ``(step, reward the run trained on, real reward, the reward's
    error bound)``; an infrastructure failure is not a pair. What it executes is not charged to
    the run: the audit measures the run, it is not part of it.
    """

    _STREAM = 0xA0D1  # mixed into the draw's seed: never the trainer's task or anchor draws

    def __init__(self, memo: ExecutionMemo, tasks: dict[str, Any], groups_per_step: int, seed: int,
                 **scorer_kwargs: Any) -> None:
        self.scorer = MemoScorer(memo, **scorer_kwargs)
        self.tasks, self.groups_per_step, self.seed = tasks, groups_per_step, seed
        self.pairs: list[tuple[int, float, float, float | None]] = []

    def add(self, step: int, outcomes: list) -> None:
        """Execute the drawn world-model groups of ``step`` (its :attr:`WMRLTrainer.last_outcomes`)."""
        predicted = [o for o in outcomes if o.stream == "world_model"]
        if not predicted:
            return
        rng = np.random.default_rng([self.seed, step, self._STREAM])
        picked = rng.choice(len(predicted), size=min(self.groups_per_step, len(predicted)), replace=False)
        for outcome in (predicted[i] for i in sorted(picked)):
            task = self.tasks[outcome.task_id]
            scripts = [extract_code(str(r.response)) for r in outcome.rollouts]
            executed = self.scorer.execute([task] * len(scripts), scripts)
            for reward, sample, run in zip(outcome.scored.rewards, outcome.scored.samples, executed):
                if not run.infra_failure and np.isfinite(reward):
                    self.pairs.append((step, float(reward), float(run.real_score), sample.reward_error_bound))

    def close(self) -> None:
        self.scorer.close()


def audit_summary(pairs: list) -> dict[str, float]:
    """Mean absolute error of the audited rewards, and how often the error bound held where one was given."""
    if not pairs:
        return {"pairs": 0, "mae": float("nan"), "bounded": 0, "coverage": float("nan")}
    errors = np.array([abs(reward - real) for _, reward, real, _ in pairs])
    bounded = [(abs(reward - real), bound) for _, reward, real, bound in pairs
               if bound is not None and np.isfinite(bound)]
    covered = [error <= bound for error, bound in bounded]
    return {"pairs": len(pairs), "mae": float(errors.mean()), "bounded": len(bounded),
            "coverage": float(np.mean(covered)) if covered else float("nan")}


def checked_run(result: dict[str, Any], settings: dict[str, Any], where: str) -> dict[str, Any]:
    """A finished run's record (``where`` names it), refused unless it ran with ``settings``."""
    if result.get("settings") != settings:
        raise SystemExit(f"{where} was run with other settings ({result.get('settings')}); "
                         f"use another --runs folder for {settings}")
    return result
