"""The surrogate world model's training corpus: sampled solutions, executed for real.

A corpus row records one execution: which task, which solution (grammar choices, render seed
and mutation) and what the sandbox and grader made of it. Scripts are not stored: they are
re-rendered deterministically from ``(choices, seed, mutation)``, which keeps the CSV small.

About 15% of the planned solutions are *broken* on purpose by a deterministic mutation of the
rendered script (:data:`BROKEN_MUTATIONS`; the operators live in :mod:`wmrl_envs.mutations`).
Failing scripts must be in the corpus, or the world model never learns that a script that
crashes, writes nothing or writes the wrong columns scores 0.

``wmrl_envs`` never imports ``agents`` (docs/architecture.md §1), so the renderer of the grammar is passed
in by the caller (``scripts/build_world_model.py``) as a :data:`Renderer`. The executor is passed in
too, as an :data:`Execute` (the caller's ``CodeScorer(prove=False).execute``): world models sit below
the scoring core, which reads them, and this build-time code must not reach back up to it.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pandas as pd
from tqdm.auto import tqdm

from wmrl_envs import outcome
from wmrl_envs.errors import ConfigError
from wmrl_envs.mutations import LEGACY_MUTATIONS, OPERATORS, MutationNotApplicable, mutate
from wmrl_envs.task_spec import Task, TaskSpec

log = logging.getLogger(__name__)

#: ``render(spec, choices, seed) -> script``: the grammar's renderer.
Renderer = Callable[[TaskSpec, Mapping[str, str], int], str]


class Run(Protocol):
    """What a row records of one execution (a :class:`~wmrl_envs.scoring.ScoreResult` is one)."""

    infra_failure: bool
    error: str | None
    execution_status: str
    valid: bool | None
    real_score: float | None
    raw_score: float | None
    status: str
    exception: str | None
    stderr: str
    cost: Mapping[str, float]


#: ``execute(tasks, scripts) -> runs``: runs every script in the sandbox and grades it, one
#: :class:`Run` per script, in order. It must run every script, proving nothing: the corpus is the
#: ground truth the prover and the world model answer to (``CodeScorer(prove=False).execute``).
Execute = Callable[[Sequence[Task], Sequence[str]], Sequence[Run]]

#: The mutations a planned broken variant draws from: the legacy six, whose rows the shipped CSVs hold.
BROKEN_MUTATIONS: tuple[str, ...] = LEGACY_MUTATIONS
MUTATIONS: tuple[str, ...] = ("none", *BROKEN_MUTATIONS)
COLUMNS: tuple[str, ...] = (
    "task_id", "split", "choices", "seed", "mutation",
    "status", "valid", "real_score", "raw_score", "wall_s", "cpu_s",
)
#: How each run ended, in the vocabulary of :mod:`wmrl_envs.outcome`: the status, the exception's
#: short class and its line (the sandbox's last traceback line, or the grader's reason). Files
#: written before these columns existed read them as empty.
OUTCOME_COLUMNS: tuple[str, ...] = ("outcome", "exception", "message")
#: Longest message a row keeps (characters).
MAX_ROW_MESSAGE = 300
#: Operators whose mutant always runs into its wall-clock limit.
TIMEOUT_MUTATIONS = frozenset(name for name, op in OPERATORS.items() if op.status == outcome.TIMEOUT)


@dataclass(frozen=True)
class CorpusItem:
    """One planned solution: a point of the grammar or a hand-written style, a render seed and a mutation."""

    task_id: str
    split: str
    choices: str  # compact JSON of the grammar choices (or {"style": name}), keys sorted
    seed: int
    mutation: str = "none"

    @property
    def key(self) -> tuple[str, str, int, str]:
        """Identifies the script; a resumed build skips items whose key has a row."""
        return self.task_id, self.choices, self.seed, self.mutation

    def script(self, spec: TaskSpec, render: Renderer) -> str:
        """The script this item stands for, rendered and mutated deterministically."""
        return mutate(render(spec, json.loads(self.choices), self.seed), self.mutation, spec, self.seed)


def choices_json(choices: Mapping[str, str]) -> str:
    return json.dumps(dict(choices), sort_keys=True, separators=(",", ":"))


# ----------------------------------------------------------------------------- planning


def plan_corpus(
    tasks: Sequence[Task],
    slots: Mapping[str, Sequence[str]],
    references: Iterable[Mapping[str, str]],
    per_task: int,
    broken_fraction: float = 0.15,
    slot_weights: Mapping[str, Mapping[str, float]] | None = None,
    seed: int = 0,
) -> list[CorpusItem]:
    """Plan ``per_task`` solutions for every task: the references, random points, broken variants.

    Args:
        tasks: Tasks to plan for; each item carries its task's split.
        slots: The grammar's slots and their options.
        references: Named reference solutions, planned first on every task (render seed 0).
        per_task: Solutions per task, references and broken variants included.
        broken_fraction: Share of mutated solutions (at least one per task when positive).
        slot_weights: Relative sampling weight of options, per slot (default uniform); e.g.
            favour low capacity to keep corpus executions short.
        seed: Seeds every draw, together with the task id.
    """
    references = [choices_json(r) for r in references]
    n_broken = max(1, round(per_task * broken_fraction)) if broken_fraction > 0 else 0
    if per_task < len(references) + n_broken:
        raise ConfigError(f"per_task={per_task} leaves no room for {len(references)} references "
                          f"and {n_broken} broken variants")
    weights = {slot: [float((slot_weights or {}).get(slot, {}).get(o, 1.0)) for o in options]
               for slot, options in slots.items()}
    plan: list[CorpusItem] = []
    for task in tasks:
        rng = random.Random(f"{seed}:{task.id}")  # str seeds hash deterministically
        items = [CorpusItem(task.id, task.spec.split, c, 0) for c in references]
        while len(items) < per_task - n_broken:
            item = CorpusItem(task.id, task.spec.split, *_draw(rng, slots, weights))
            if item not in items:
                items.append(item)
        for _ in range(n_broken):
            choices, render_seed = _draw(rng, slots, weights)
            items.append(CorpusItem(task.id, task.spec.split, choices, render_seed,
                                    BROKEN_MUTATIONS[rng.randrange(len(BROKEN_MUTATIONS))]))
        plan.extend(items)
    return plan


def plan_mutants(
    tasks: Sequence[Task],
    slots: Mapping[str, Sequence[str]],
    render: Renderer,
    per_task: int,
    operators: Sequence[str] | None = None,
    slot_weights: Mapping[str, Mapping[str, float]] | None = None,
    seed: int = 0,
) -> list[CorpusItem]:
    """Plan ``per_task`` mutants for every task, spreading the operators evenly over the plan.

    Operators are dealt in a shuffled cycle shared by all tasks, so each gets about the same
    number of rows; an operator that does not apply to a task's drawn script
    (:class:`MutationNotApplicable`) passes its turn to the next one.

    Args:
        tasks: Tasks to plan for.
        slots: The grammar's slots and their options.
        render: The grammar's renderer (a mutant's applicability needs its script).
        per_task: Mutants per task.
        operators: Operator names (default: every one of :data:`~.mutations.OPERATORS`).
        slot_weights: Relative sampling weight of options, per slot (default uniform).
        seed: Seeds every draw.
    """
    names = list(operators or OPERATORS)
    unknown = sorted(set(names) - set(OPERATORS))
    if unknown:
        raise ConfigError(f"unknown mutation operator(s) {unknown}; known: {sorted(OPERATORS)}")
    weights = {slot: [float((slot_weights or {}).get(slot, {}).get(o, 1.0)) for o in options]
               for slot, options in slots.items()}
    deal = random.Random(f"{seed}:operators")
    cycle: list[str] = []
    plan: list[CorpusItem] = []
    for task in tasks:
        rng = random.Random(f"{seed}:mutants:{task.id}")
        items: list[CorpusItem] = []
        refused = 0
        while len(items) < per_task and refused < 4 * len(names):
            if not cycle:
                cycle = deal.sample(names, len(names))
            name = cycle.pop()
            choices, render_seed = _draw(rng, slots, weights)
            item = CorpusItem(task.id, task.spec.split, choices, render_seed, name)
            try:
                item.script(task.spec, render)
            except MutationNotApplicable:
                refused += 1
                continue
            if item not in items:
                items.append(item)
        plan.extend(items)
    return plan


def _draw(rng: random.Random, slots: Mapping[str, Sequence[str]],
          weights: Mapping[str, list[float]]) -> tuple[str, int]:
    """A random point of the grammar (as choices JSON) and a render seed."""
    picked = {slot: rng.choices(list(options), weights[slot])[0] for slot, options in slots.items()}
    return choices_json(picked), rng.randrange(1000)


# ----------------------------------------------------------------------------- building


def read_corpus(path: str | Path) -> pd.DataFrame:
    """The corpus CSV as a DataFrame (empty, with the right columns, if the file is missing)."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=list(COLUMNS))
    frame = pd.read_csv(path, dtype={"task_id": str, "choices": str, "mutation": str, "status": str,
                                     "outcome": str, "exception": str, "message": str}, keep_default_na=False,
                        na_values={"real_score": [""], "raw_score": [""]})
    missing = set(COLUMNS) - set(frame.columns)
    if missing:
        raise ConfigError(f"{path}: not a corpus file, it lacks column(s) {sorted(missing)}")
    for column in OUTCOME_COLUMNS:
        if column not in frame.columns:
            frame[column] = ""
    return frame


def corpus_items(frame: pd.DataFrame) -> list[CorpusItem]:
    """The items of a corpus frame's rows, in order."""
    return [CorpusItem(r.task_id, r.split, r.choices, int(r.seed), r.mutation) for r in frame.itertuples()]


#: The executed corpora under ``assets/world_models/``: grammar (MLE, DSBench), hand-written, mutants.
EXECUTED_CORPORA = ("corpus.csv", "dsbench_corpus.csv", "handwritten_corpus.csv", "outcome_corpus.csv")
#: What names a corpus row in a memo of its reruns (the build scripts of the sample-run head and the
#: execution-cost model keep one each).
MEMO_KEY = ("corpus", "task_id", "choices", "seed", "mutation")


def executed_rows(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Every row of the executed corpora ``paths`` with an outcome, each named by its corpus's file,
    less the runs that timed out and the non-termination mutants: a script that never ends costs its
    wall cap whatever it is, and its timeout is never exact."""
    frame = pd.concat([read_corpus(p).assign(corpus=Path(p).name) for p in paths], ignore_index=True)
    frame = frame[(frame["outcome"] != "") & (frame["outcome"] != outcome.TIMEOUT)]
    return frame[~frame["mutation"].isin(TIMEOUT_MUTATIONS)].reset_index(drop=True)


def read_memo(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A memo of corpus reruns (CSV, compressed by its suffix), or an empty one with ``columns``."""
    if path.is_file():
        return pd.read_csv(path, keep_default_na=False, dtype={"seed": int})
    return pd.DataFrame(columns=list(columns))


def rows_to_run(frame: pd.DataFrame, memo: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` the memo lacks (by :data:`MEMO_KEY`)."""
    key = list(MEMO_KEY)
    done = set(map(tuple, memo[key].astype(str).to_numpy()))
    return frame[[tuple(map(str, k)) not in done for k in frame[key].to_numpy()]]


def rendered(frame: pd.DataFrame, render: Renderer, get_task: Callable[[str], Task]
             ) -> tuple[list[Task], list[str]]:
    """Each row's task and script, rendered as the corpus ran it (``get_task`` is asked once a task)."""
    items = corpus_items(frame)
    tasks = {tid: get_task(tid) for tid in dict.fromkeys(i.task_id for i in items)}
    row_tasks = [tasks[i.task_id] for i in items]
    return row_tasks, [i.script(t.spec, render) for i, t in zip(items, row_tasks)]


def drop_tasks(path: str | Path, task_ids: Iterable[str]) -> int:
    """Remove every row of ``task_ids`` from the corpus CSV (so a build re-executes them); returns
    how many rows went. Other rows keep their exact text."""
    path, drop = Path(path), set(task_ids)
    if not path.exists():
        return 0
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    kept = [rows[0]] + [r for r in rows[1:] if r[0] not in drop]
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(kept)
    return len(rows) - len(kept)


def corpus_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class BuildStats:
    """What one :func:`build_corpus` call did."""

    planned: int
    skipped: int
    written: int
    infra_failures: int
    wall_s: float


def build_corpus(
    plan: Sequence[CorpusItem],
    tasks: Mapping[str, Task],
    render: Renderer,
    path: str | Path,
    execute: Execute,
    workers: int = 2,
    wall_s: float | None = 60.0,
    loop_wall_s: float = 30.0,
    progress: bool = True,
) -> BuildStats:
    """Execute every planned item that has no row yet and append one row per execution.

    Rows are appended and flushed as executions finish, so an interrupted build loses at
    most the runs in flight; rerunning skips every item already in the file. Infrastructure
    failures are not scores: they are logged and left out (a rerun retries them).

    Args:
        plan: Items from :func:`plan_corpus`.
        tasks: Task of every ``task_id`` in the plan.
        render: The grammar's renderer.
        path: Corpus CSV (created with a header if missing).
        execute: Runs and grades scripts (see :data:`Execute`).
        workers: Items in flight at once (give ``execute`` as many sandbox workers).
        wall_s: Cap on each task's wall-clock limit for corpus runs (None keeps the task's).
        loop_wall_s: Wall-clock limit of the items whose operator always times out
            (:data:`TIMEOUT_MUTATIONS`): any limit gives them the same outcome.
        progress: Show a progress bar.
    """
    path = Path(path)
    done = {item.key for item in corpus_items(read_corpus(path))}
    todo = [item for item in plan if item.key not in done]
    start = time.perf_counter()
    written = infra = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    new_file = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as fh, ThreadPoolExecutor(workers) as threads:
        writer = csv.writer(fh)
        if new_file:
            writer.writerow(COLUMNS + OUTCOME_COLUMNS)
        futures = {threads.submit(_execute, item, tasks[item.task_id], render, execute, wall_s, loop_wall_s): item
                   for item in todo}
        finished = as_completed(futures)
        if progress:
            finished = tqdm(finished, total=len(todo), desc="corpus runs", mininterval=5)
        for future in finished:
            item, result = futures[future], future.result()
            if result.infra_failure:
                infra += 1
                log.warning("infrastructure failure on %s (not a score, not recorded): %s", item.key, result.error)
                continue
            writer.writerow(_row(item, result))
            fh.flush()
            written += 1
    return BuildStats(len(plan), len(plan) - len(todo), written, infra, time.perf_counter() - start)


def fill_outcomes(path: str | Path, tasks: Mapping[str, Task], render: Renderer, execute: Execute, workers: int = 2,
                  wall_s: float | None = 60.0, loop_wall_s: float = 30.0) -> int:
    """Give every row of a corpus written before :data:`OUTCOME_COLUMNS` existed its outcome.

    A valid run's outcome is ``valid``; any other row's script runs again, since the old
    columns do not say which exception or which grader complaint ended it. A rerun whose
    executor status differs from the row's (a run near its time limit) leaves the outcome
    empty and is logged. The file is rewritten whole, its other columns unchanged. Returns how
    many rows were executed (by ``execute``, ``workers`` at once; the rest as :func:`build_corpus`).
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return 0
    fields = list(rows[0]) + [c for c in OUTCOME_COLUMNS if c not in rows[0]]
    rerun = []
    for row in rows:
        if row.get("outcome"):
            continue
        if row["status"] == "ok" and row["valid"] == "1":
            row.update(outcome=outcome.VALID, exception="", message="")
        else:
            rerun.append(row)
    with ThreadPoolExecutor(workers) as threads:
        items = [CorpusItem(r["task_id"], r["split"], r["choices"], int(r["seed"]), r["mutation"]) for r in rerun]
        results = threads.map(lambda i: _execute(i, tasks[i.task_id], render, execute, wall_s, loop_wall_s), items)
        for row, result in zip(rerun, results):
            fresh = _row(CorpusItem(row["task_id"], row["split"], row["choices"], int(row["seed"]), row["mutation"]),
                         result)
            if result.infra_failure or fresh[5] != row["status"]:
                log.warning("rerun of %s/%s ended %s, its row says %s: outcome left empty", row["task_id"],
                            row["mutation"], fresh[5], row["status"])
                continue
            row.update(zip(OUTCOME_COLUMNS, fresh[len(COLUMNS):]))
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
    return len(rerun)


def _execute(item: CorpusItem, task: Task, render: Renderer, execute: Execute,
             wall_s: float | None, loop_wall_s: float) -> Run:
    cap = loop_wall_s if item.mutation in TIMEOUT_MUTATIONS else wall_s
    if cap is not None and cap < task.limits.wall_s:
        limits = dataclasses.replace(task.limits, wall_s=float(cap))
        task = dataclasses.replace(task, spec=dataclasses.replace(task.spec, limits=limits))
    return execute([task], [item.script(task.spec, render)])[0]


def _row(item: CorpusItem, result: Run) -> list[object]:
    raw = "" if result.raw_score is None else f"{result.raw_score:.6g}"
    _, line = outcome.exception_from_stderr(result.stderr)
    message = (line or (result.error or ""))[:MAX_ROW_MESSAGE]
    return [item.task_id, item.split, item.choices, item.seed, item.mutation,
            result.execution_status, int(result.valid), f"{result.real_score:.6g}", raw,
            f"{result.cost.get('execution_s', 0.0):.2f}", f"{result.cost.get('execution_cpu_s', 0.0):.2f}",
            result.status, result.exception or "", message]
