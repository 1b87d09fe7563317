"""Held-out evaluation by real execution only (docs/architecture.md §9).

Every reported held-out number comes from here: each policy answers each task ``k`` times,
every answer runs in the sandbox and is graded against the private answers, and the task
score is the mean over the ``k`` samples (avg@k). A world model never scores an evaluation.

A *responder* is anything that maps ``(task, k, seed)`` to ``k`` agent responses, so fixed
reference solutions, an untrained policy and a trained checkpoint are evaluated the same way.

The score is each env's reward quantity: the leaderboard position score for MLE-Dojo tasks and
the relative performance gap for DSBench tasks. DSBench reports are summarised as DSBench does:
mean RPG over tasks (a failed task counts 0) and the completion rate, the share of tasks with a
valid submission (avg@k: each task counts the share of its k samples that were valid).

An infrastructure failure (the sandbox could not run a sample) is not a score: a task's mean leaves
it out and the reports count it per task. Where more than ``max_infra_share`` of a task's samples
failed so, no mean is reported: the evaluation stops with :class:`InfraFailureError` naming the
first cause.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from wmrl_envs.errors import ConfigError, InfraFailureError
from wmrl_envs.grading import mean_rpg
from wmrl_envs.paths import builtin_tasks_dir
from wmrl_envs.sandbox import DEFAULT_EXECUTOR
from wmrl_envs.scoring import CodeScorer, InFlightAnchors, ScoreResult, extract_code
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import LITE, SPLIT_CHOICES, get_task, scan_tasks

Responder = Callable[[Task, int, int], list[str]]

#: The largest share of a task's samples (in evaluation) or of a window's executions (in training)
#: that may fail for infrastructure reasons before the numbers are refused.
DEFAULT_MAX_INFRA_SHARE = 0.5


def check_max_infra_share(value: float) -> None:
    """``max_infra_share`` must lie in [0, 1): below 1, a task or window that is reported keeps a score."""
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"max_infra_share must be in [0, 1), got {value}")


def infra_excess(failures: int, total: int, what: str, max_share: float, cause: str | None) -> str | None:
    """Why ``failures`` infrastructure failures among ``total`` ``what`` (e.g. "samples") are too many
    to report a number (more than ``max_share`` of them), in one line naming the first ``cause``;
    None when they are few enough."""
    if not total or failures / total <= max_share:
        return None
    first = " ".join((cause or "not recorded").split())  # one line, whatever the sandbox printed
    return (f"{failures} of {total} {what} ({failures / total:.0%}) failed for infrastructure reasons (more than "
            f"max_infra_share {max_share:g} allows); first cause: {first}")


def select_tasks(env_id: str, suite: str, split: str, task_ids: Sequence[str] | None) -> list[Task]:
    """The built-in ``suite``'s ``split``, or exactly the tasks named (built-in or user folders).

    ``split="lite"`` is the held-out half of the suite's ``lite`` selection (a few fast, diverse
    tasks). Named tasks must belong to ``env_id`` and ``split`` (and to the selection); a user's
    tasks never join the built-in pool unless named.
    """
    split, selection = ("heldout", LITE) if split == LITE else (split, None)
    what = f"{split} tasks of the {selection} selection" if selection else f"{split} tasks"
    scan = scan_tasks(suite)
    # The pool is the built-in suite's own folders: a user's task that says `suite: mle` is
    # still only used when named.
    builtin = builtin_tasks_dir(suite).resolve()
    pool = [t for t in scan.select(suite=suite, split=split, selection=selection)
            if t.root.resolve().is_relative_to(builtin)]
    if task_ids is None:
        if not pool:
            failed = f" ({len(scan.failures)} folder(s) or suite(s) did not load: see `wmrl tasks list`)"
            raise ConfigError(f"no {what} in the {suite} suite" + (failed if scan.failures else ""))
        return pool
    # Named tasks come from the scan already made; get_task (a new scan) only for its error message.
    tasks = [scan.tasks[t] if t in scan.tasks else get_task(t) for t in dict.fromkeys(task_ids)]
    allowed = {t.id for t in pool} if selection else None
    wrong = [t.id for t in tasks if t.spec.env_id != env_id or t.spec.split != split
             or (allowed is not None and t.id not in allowed)]
    if wrong:
        raise ConfigError(f"not {what} of {env_id}: {wrong} (see `wmrl tasks list`)")
    return tasks


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate on.

    Attributes:
        env_id: Environment family whose tasks are evaluated.
        suite: The family's built-in task suite (the pool when ``task_ids`` is None).
        split: Task split (``heldout`` for every reported number), or ``lite``: the held-out tasks
            of the suite's lite selection.
        k: Samples per task (avg@k); the paper uses 8, our default is 4.
        executor: Sandbox backend.
        workers: Parallel executions (default: one per core).
        task_ids: Restrict to these tasks (default: the whole split).
        seed: Base seed handed to responders.
        max_infra_share: The largest share of a task's samples that may fail for infrastructure
            reasons (left out of its mean); more stops the evaluation with
            :class:`~wmrl_envs.errors.InfraFailureError`. In [0, 1).
    """

    env_id: str = "wmrl/MLEDojo-v0"
    suite: str = "mle"
    split: str = "heldout"
    k: int = 4
    executor: str = DEFAULT_EXECUTOR
    workers: int | None = None
    task_ids: tuple[str, ...] | None = None
    seed: int = 0
    max_infra_share: float = DEFAULT_MAX_INFRA_SHARE

    def __post_init__(self) -> None:
        check_max_infra_share(self.max_infra_share)
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.split not in SPLIT_CHOICES:
            raise ConfigError(f"split must be one of {SPLIT_CHOICES}, got {self.split!r}")


@dataclass
class TaskResult:
    """avg@k outcome of one policy on one task. ``infra_failures`` samples had no score (left out
    of every list but ``infra_errors``, their distinct messages in order of appearance)."""

    task_id: str
    metric: str
    scores: list[float]
    raw_scores: list[float | None]
    valid: list[bool]
    medals: list[str | None]
    above_median: list[bool]
    infra_failures: int = 0
    errors: list[str] = field(default_factory=list)
    quantity: str = "position"
    infra_errors: list[str] = field(default_factory=list)

    @property
    def mean_score(self) -> float:
        return float(np.mean(self.scores)) if self.scores else 0.0

    @property
    def completion(self) -> float:
        """Share of the samples with a valid submission (DSBench's task completion, avg@k)."""
        return float(np.mean(self.valid)) if self.valid else 0.0

    def check_infra(self, policy: str, max_share: float) -> None:
        """Raise :class:`InfraFailureError` when more than ``max_share`` of the samples failed for
        infrastructure reasons: the task's mean would not be a score."""
        why = infra_excess(self.infra_failures, self.infra_failures + len(self.scores), "samples", max_share,
                           self.infra_errors[0] if self.infra_errors else None)
        if why is not None:
            raise InfraFailureError(f"no score for {policy} on task {self.task_id}: {why}")


@dataclass
class EvalReport:
    """One policy's results over a task split, with MLE-bench's aggregates."""

    policy: str
    config: EvalConfig
    tasks: list[TaskResult]
    wall_s: float = 0.0

    @property
    def is_rpg(self) -> bool:
        """Whether the score is DSBench's relative performance gap (the tasks say so)."""
        return any(t.quantity == "rpg" for t in self.tasks)

    def summary(self) -> dict[str, float]:
        """MLE-bench's aggregates; raises :class:`InfraFailureError` for a task past ``max_infra_share``."""
        for t in self.tasks:
            t.check_infra(self.policy, self.config.max_infra_share)
        per_task = np.array([t.mean_score for t in self.tasks])
        n = len(per_task)
        medals = [m for t in self.tasks for m in t.medals]
        valid = [v for t in self.tasks for v in t.valid]
        above = [a for t in self.tasks for a in t.above_median]
        rate = lambda xs: float(np.mean(xs)) if xs else 0.0  # noqa: E731
        summary = {
            "n_tasks": n,
            "k": self.config.k,
            "score_mean": float(per_task.mean()) if n else 0.0,
            "score_se": float(per_task.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0,
            "valid_rate": rate(valid),
            "medal_rate": rate([m is not None for m in medals]),
            "gold_rate": rate([m == "gold" for m in medals]),
            "above_median_rate": rate(above),
            "infra_failures": int(sum(t.infra_failures for t in self.tasks)),
        }
        if self.is_rpg:
            summary["rpg_mean"] = mean_rpg(per_task) if n else 0.0
            summary["completion_rate"] = rate([t.completion for t in self.tasks])
        return summary

    def to_dict(self) -> dict[str, Any]:
        config = asdict(self.config)
        return {"policy": self.policy, "config": config, "summary": self.summary(),
                "tasks": [asdict(t) for t in self.tasks], "wall_s": self.wall_s}


def evaluate(responder: Responder, policy_name: str, config: EvalConfig, *, progress: bool = True) -> EvalReport:
    """Run ``responder`` on every task of the split and grade by real execution."""
    return evaluate_policies([(policy_name, responder)], config, progress=progress)[0]


def evaluate_policies(responders: Sequence[tuple[str, Responder]], config: EvalConfig, *,
                      progress: bool = True) -> list[EvalReport]:
    """Evaluate each ``(policy name, responder)`` on every task of the split, in one sandbox pool.

    Each task's runs are submitted as soon as its responses exist, so the pool's workers never
    idle while a task's slowest run finishes (or while the next responses are generated). Tasks
    are graded in order as their runs return, and a task past ``max_infra_share`` stops the
    evaluation at once (queued runs are cancelled). A report's ``wall_s`` runs from the
    evaluation's start to its policy's last graded task.
    """
    tasks = select_tasks(config.env_id, config.suite, config.split, config.task_ids)
    scorer = CodeScorer(executor=config.executor, workers=config.workers)
    reports = [EvalReport(name, config, []) for name, _ in responders]
    start = time.perf_counter()
    submitted: list[tuple[EvalReport, Task, list[ScoreResult], InFlightAnchors | None]] = []
    graded = 0
    bar = tqdm(total=len(reports) * len(tasks), desc=f"eval {', '.join(r.policy for r in reports)}",
               disable=not progress, unit="task")

    def grade(wait: bool) -> None:
        """Grade the submitted tasks in order, up to the first whose runs are under way (``wait``: all)."""
        nonlocal graded
        while graded < len(submitted):
            report, task, samples, flight = submitted[graded]
            if flight is not None and not scorer.land(flight, wait=wait):
                return
            result = _task_result(task, samples)
            result.check_infra(report.policy, config.max_infra_share)  # stop at once: the sandbox is broken
            report.tasks.append(result)
            report.wall_s = time.perf_counter() - start
            graded += 1
            bar.update()

    try:
        with bar:
            for report, (_, responder) in zip(reports, responders):
                for task in tasks:
                    responses = responder(task, config.k, config.seed)
                    submitted.append((report, task, *scorer.execute_submitting([task] * len(responses),
                                                                               [extract_code(r) for r in responses])))
                    grade(wait=False)
            grade(wait=True)
    finally:
        for *_, flight in submitted[graded:]:
            for future in flight.futures if flight is not None and flight.futures else ():
                future.cancel()  # queued runs of an evaluation that stopped; a running one finishes
        scorer.close()
    return reports


def _task_result(task: Task, scored: Sequence[Any]) -> TaskResult:
    kept = [s for s in scored if not s.infra_failure]  # infra failures are not scores
    infra_errors = [s.error or "" for s in scored if s.infra_failure]
    return TaskResult(
        task_id=task.id,
        metric=task.spec.metric,
        scores=[s.score for s in kept],
        raw_scores=[s.raw_score for s in kept],
        valid=[s.valid for s in kept],
        medals=[s.leaderboard.get("medal") for s in kept],
        above_median=[bool(s.leaderboard.get("above_median", False)) for s in kept],
        infra_failures=len(scored) - len(kept),
        errors=sorted({s.error for s in kept if s.error}),
        quantity="rpg" if task.spec.meta.get("reward") == "rpg" else "position",
        infra_errors=list(dict.fromkeys(infra_errors)),
    )


def markdown_table(reports: Sequence[EvalReport]) -> str:
    """Side-by-side Markdown: a summary table, then per-task avg@k scores.

    DSBench reports show mean RPG and the completion rate; MLE-Dojo reports the position score,
    the valid-submission rate and MLE-bench's medal aggregates. Both count the infrastructure
    failures left out of the means, in all and per task (``(n infra)`` after a task's score).
    """
    rpg = bool(reports) and reports[0].is_rpg
    if rpg:
        lines = ["| policy | tasks | k | mean RPG (± SE) | completion rate | infra failures |",
                 "|---|---|---|---|---|---|"]
    else:
        lines = ["| policy | tasks | k | position score (mean ± SE) | valid | any medal | gold | above median "
                 "| infra failures |", "|---|---|---|---|---|---|---|---|---|"]
    for rep in reports:
        s = rep.summary()
        head = f"| {rep.policy} | {s['n_tasks']} | {s['k']} | {s['score_mean']:.3f} ± {s['score_se']:.3f} |"
        if rpg:
            lines.append(f"{head} {s['completion_rate']:.0%} | {s['infra_failures']} |")
        else:
            lines.append(f"{head} {s['valid_rate']:.0%} | {s['medal_rate']:.0%} | {s['gold_rate']:.0%} | "
                         f"{s['above_median_rate']:.0%} | {s['infra_failures']} |")
    if reports:
        lines += ["", "| task | metric | " + " | ".join(r.policy for r in reports) + " |",
                  "|---|---|" + "---|" * len(reports)]
        for i, task in enumerate(reports[0].tasks):
            cells = [f"{r.tasks[i].mean_score:.3f}" + (f" ({r.tasks[i].infra_failures} infra)"
                                                       if r.tasks[i].infra_failures else "") for r in reports]
            lines.append(f"| {task.task_id} | {task.metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_reports(reports: Sequence[EvalReport], out_dir: Path, title: str, meta: dict[str, Any]) -> Path:
    """Write ``results.json`` and ``results.md`` into ``out_dir``; return the Markdown path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "reports": [r.to_dict() for r in reports]},
                                                     indent=2, default=str))
    md = out_dir / "results.md"
    if reports and reports[0].is_rpg:
        note = ("Scores are avg@k relative performance gaps, max(0, (p - b) / (g - b)), by real sandboxed "
                "execution against each task's perfect score g and trivial baseline b; the completion rate is the "
                "share of tasks with a valid submission; SE is over tasks.")
    else:
        note = "Scores are avg@k by real sandboxed execution against each task's leaderboard; SE is over tasks."
    if reports:
        note += (" Infrastructure failures (the sandbox could not run a sample) are not scores: each task's mean "
                 "leaves them out and `(n infra)` counts them; more than "
                 f"{reports[0].config.max_infra_share:.0%} of a task's samples failing so stops the evaluation "
                 "with an error instead of a score.")
    md.write_text(f"# {title}\n\n" + markdown_table(reports) + "\n" + note + "\n")
    return md
