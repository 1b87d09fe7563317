"""The multi-fidelity world model: a proof, then the script's run on a sample of the task, then a model.

A world model that reads only a script's text ranks unseen tasks and unfamiliar code poorly
(``bench/results/world_model_oos.md``). Running the same script in the same sandbox on a sample
of the task is a cheaper experiment of the same kind as the full run: a crash that does not depend
on the data's size crashes on the sample too, and the sample's grade is a point on the script's
learning curve. :class:`SampleRunWorldModel` answers each ``(task, script)`` with the first stage
that can:

1. **proof** (inside the base world model): an exact static proof of failure, free;
2. **sample_run**: the script runs on :func:`sample_view` of the task (a share of the training
   rows, the test rows whole up to a cap, graded here against their private answers), under a wall
   clock scaled to the sample. A valid run's score is the score head's input beside the base
   model's estimate (:class:`SampleRunHead`); a failure is exact only for the classes the head's
   artefact measured never to differ from the full run's, and otherwise lowers ``P(valid)`` by
   the measured rate. The same code (up to whitespace and comments) never runs twice on a
   task's sample: its outcome is memoised and reused at no cost (a training policy repeats
   itself);
3. **world_model**: the base model's estimate (``surrogate`` by default), where the schedule
   (:attr:`SampleRunConfig.run`) does not run the sample (under ``run="cost"``: on a task whose
   anchors show that a sample run costs too much of a full run) or the sample run could not start.

A sample run's CPU is the world model's cost (:attr:`Prediction.cpu_s`). The no-execution
world model stays available by its own name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import statistics
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wmrl_envs import outcome
from wmrl_envs.analysis.script import KEYS_PYTHON, ScriptTable, code_key
from wmrl_envs.errors import ConfigError, TaskFormatError
from wmrl_envs.grading.runs import judge_run
from wmrl_envs.paths import assets_dir, wmrl_home
from wmrl_envs.sandbox import DEFAULT_EXECUTOR, ExecutorPool, make_executor
from wmrl_envs.sandbox.limits import Limits
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.artefacts import read_artefact, write_artefact
from wmrl_envs.world_models.base import Prediction, WorldModel, make_world_model

log = logging.getLogger(__name__)
_NORMAL = statistics.NormalDist()

#: When a script runs on the sample: ``always`` (unless proved or already run), ``uncertain``
#: (only where the base model is unsure, :attr:`SampleRunConfig.uncertain_band`), ``cost`` (only
#: on tasks where a sample run is measured to cost little against a full run,
#: :attr:`SampleRunConfig.max_cost_share`), ``never``.
RUN_RULES = ("always", "uncertain", "cost", "never")
#: CPU-seconds of the latest runs kept per task and kind (full, sample) for ``run="cost"``.
CPU_HISTORY = 64
HEAD_FORMAT = 1
#: Memoised outcomes kept per model (oldest dropped first).
MEMO_ENTRIES = 100_000
_CLASSIFICATION = ("binary", "multiclass", "text-binary", "text-multiclass", "image-multiclass",
                   "timeseries-multiclass")
#: Rows of each class a stratified sample keeps (all of a smaller class), so that a script's own
#: stratified split or cross-validation does not fail on the sample alone.
MIN_ROWS_PER_CLASS = 5


def default_head_path() -> Path:
    return assets_dir() / "world_models" / "sample_run.json"


@dataclass(frozen=True)
class SampleRunConfig:
    """How a script's run on a sample of its task is made and when it is made.

    Attributes:
        fraction: Share of each training table's rows the sample keeps.
        min_train_rows: Fewest training rows the sample keeps (all of a smaller table). Below a
            few hundred rows a model's learning curve has not settled and the sample ranks
            scripts by how they fit little data: at 200 rows the used first frozen set ranks at
            Spearman 0.79 with MAE 0.16, at 600 at 0.90 and 0.11, for 0.35 and 0.46 of a full
            run's CPU (``bench/results/sample_run_frontier.md``). On a task of more than 7,500
            rows ``fraction`` decides and this floor costs nothing.
        max_test_rows: Test rows beyond this are sampled too, with their answers; below it the
            test set is whole, so the sample's grade is on the same rows as the full run's.
        wall_share: The sample run's wall-clock and CPU caps as a share of the task's limits.
        min_wall_s: The sample run's wall-clock cap never goes below this (seconds): the
            interpreter's start and the imports do not shrink with the data.
        run: When a script runs on the sample (:data:`RUN_RULES`).
        uncertain_band: Under ``run="uncertain"``, a script runs when the base model's
            ``P(valid)`` lies in this closed interval; outside it the base model answers.
        max_cost_share: Under ``run="cost"``, a task's scripts run on its sample only once a
            sample run there costs at most this share of a full run: the median CPU-seconds of
            its sample runs (before the first, the head's measured median over the corpora, or
            0 for a head without one: the first sample run measures it) over
            the median of its executed runs (the anchors'). Before any run of the task was
            executed, and on tasks where the sample costs more, the base model answers. With an
            executed share ``e``, sample runs then cost at most about ``share x (1 - e) / e`` of
            the executions. A decision read from measured CPU: runs on a task near the threshold
            may decide differently from one run to the next.
        timeout_log_sd: How far a full run's time may stray from its projection (the spread of
            ``log(full / projected)``), which sets how likely a valid sample run's script is to
            outgrow the task's time limits in full (:meth:`SampleRunWorldModel.p_timeout`).
            0.47 at the default size, on the scripts of the corpora and the first frozen set whose
            tasks hold more than three times their sample's rows (``bench/results/sample_run_frontier.md``).
        seed: Seed of the row sample (the sample of a task is the same for every script).
        workers: Parallel sample runs (default: one per core).
    """

    fraction: float = 0.08
    min_train_rows: int = 600
    max_test_rows: int = 20_000
    wall_share: float = 0.25
    min_wall_s: float = 15.0
    run: str = "always"
    uncertain_band: tuple[float, float] = (0.05, 0.95)
    max_cost_share: float = 0.25
    timeout_log_sd: float = 0.5
    seed: int = 0
    workers: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ConfigError(f"SampleRunConfig.fraction must be in (0, 1], got {self.fraction!r}")
        for name in ("min_train_rows", "max_test_rows"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"SampleRunConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0.0 < self.wall_share <= 1.0:
            raise ConfigError(f"SampleRunConfig.wall_share must be in (0, 1], got {self.wall_share!r}")
        if not self.min_wall_s > 0:
            raise ConfigError(f"SampleRunConfig.min_wall_s must be positive, got {self.min_wall_s!r}")
        if self.run not in RUN_RULES:
            raise ConfigError(f"SampleRunConfig.run must be one of {RUN_RULES}, got {self.run!r}")
        lo, hi = tuple(self.uncertain_band)
        if not 0.0 <= lo <= hi <= 1.0:
            raise ConfigError(f"SampleRunConfig.uncertain_band must be 0 <= lo <= hi <= 1, got {self.uncertain_band!r}")
        object.__setattr__(self, "uncertain_band", (float(lo), float(hi)))
        if not 0.0 < self.max_cost_share <= 1.0:
            raise ConfigError(f"SampleRunConfig.max_cost_share must be in (0, 1], got {self.max_cost_share!r}")
        if not (math.isfinite(self.timeout_log_sd) and self.timeout_log_sd > 0):
            raise ConfigError(f"SampleRunConfig.timeout_log_sd must be positive, got {self.timeout_log_sd!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 1):
            raise ConfigError(f"SampleRunConfig.workers must be a positive integer or None, got {self.workers!r}")

    def limits(self, task_limits: Limits) -> Limits:
        """The sample run's limits: the task's, with wall clock and CPU scaled to the sample."""
        wall = min(task_limits.wall_s, max(self.min_wall_s, task_limits.wall_s * self.wall_share))
        cpu = min(task_limits.cpu_s, max(self.min_wall_s, task_limits.cpu_s * self.wall_share))
        return replace(task_limits, wall_s=wall, cpu_s=cpu)


# ----------------------------------------------------------------------------- the sample of a task


@dataclass(frozen=True)
class SampleView:
    """A task cut down to a sample: a :class:`Task` whose public folder holds the sample, the
    answers of the test rows it keeps, and how much it kept."""

    task: Task
    answers: pd.DataFrame
    train_rows: int
    full_train_rows: int
    test_rows: int
    full_test_rows: int

    @property
    def train_share(self) -> float:
        return self.train_rows / max(self.full_train_rows, 1)


def _stable_seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "little")


def _read_table(path: Path) -> pd.DataFrame:
    # Text, not parsed values: the sample's cells must read exactly as the full table's do.
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _sample_rows(frame: pd.DataFrame, keep: int, rng: np.random.Generator, label: str | None) -> np.ndarray:
    """Row positions to keep, in the table's order; stratified by ``label`` when given."""
    n = len(frame)
    if keep >= n:
        return np.arange(n)
    if label is None:
        return np.sort(rng.choice(n, size=keep, replace=False))
    share = keep / n
    chosen = []
    for _, positions in sorted(frame.groupby(label, sort=True).indices.items(), key=lambda kv: str(kv[0])):
        want = min(len(positions), max(MIN_ROWS_PER_CLASS, int(round(share * len(positions)))))
        chosen.append(rng.choice(positions, size=want, replace=False))
    return np.sort(np.concatenate(chosen))


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links refused: a copy reads the same
        shutil.copy2(src, dst)


def _view_key(task: Task, config: SampleRunConfig) -> str:
    public = Path(task.public_dir)
    stats = sorted((str(p.relative_to(public)), p.stat().st_size, p.stat().st_mtime_ns)
                   for p in public.rglob("*") if p.is_file())
    answers = Path(task.answers_path).stat()
    blob = json.dumps([task.id, config.fraction, config.min_train_rows, config.max_test_rows, config.seed, stats,
                       answers.st_size, answers.st_mtime_ns])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_VIEW_LOCK = threading.Lock()


def sample_view(task: Task, config: SampleRunConfig, root: Path | None = None) -> SampleView:
    """The task's sample, built once under ``root`` (default ``$WMRL_HOME/samples``) and reused.

    Training tables are the public CSV files whose name starts with ``train``; each keeps
    ``max(min_train_rows, fraction x rows)`` rows, stratified by the label for classification
    tasks. ``test.csv`` and ``sample_submission.csv`` keep their rows up to ``max_test_rows``
    (beyond it the same sampled ids in both, and in the answers). Every other public file is
    linked or copied as it is.

    Raises:
        TaskFormatError: The public folder has no training table to sample.
    """
    root = Path(root) if root is not None else wmrl_home() / "samples"
    target = root / f"{task.id}-{_view_key(task, config)}"
    with _VIEW_LOCK:
        if not (target / "view.json").is_file():
            _build_view(task, config, target)
    meta = json.loads((target / "view.json").read_text())
    answers = pd.read_csv(target / "answers.csv")
    public = target / "public"
    view_task = replace(task, public_dir=public, sample_submission_path=public / Path(task.sample_submission_path).name)
    return SampleView(view_task, answers, meta["train_rows"], meta["full_train_rows"], meta["test_rows"],
                      meta["full_test_rows"])


def _build_view(task: Task, config: SampleRunConfig, target: Path) -> None:
    public = Path(task.public_dir)
    train_tables = sorted(p for p in public.glob("*.csv") if p.name.lower().startswith("train"))
    if not train_tables:
        raise TaskFormatError(f"task {task.id}: no training table (a public train*.csv) to sample")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{task.id}-", dir=target.parent))
    try:
        shutil.copytree(public, work / "public", copy_function=_link_or_copy,
                        ignore=lambda folder, names: [n for n in names if Path(folder) == public and n.endswith(".csv")])
        rng = np.random.default_rng(_stable_seed(task.id, config.seed))
        answers = task.answers()
        answer_label = next((c for c in task.spec.answer_columns if c in answers.columns), None)
        stratify = task.spec.task_type in _CLASSIFICATION
        kept = full = 0
        for path in train_tables:
            frame = _read_table(path)
            keep = max(config.min_train_rows, math.ceil(config.fraction * len(frame)))
            label = answer_label if stratify and answer_label in frame.columns else None
            rows = _sample_rows(frame, keep, rng, label)
            frame.iloc[rows].to_csv(work / "public" / path.name, index=False)
            kept, full = kept + len(rows), full + len(frame)
        id_column = task.spec.id_column
        test_ids = None
        full_test = len(answers)
        if len(answers) > config.max_test_rows:
            test_ids = set(answers[id_column].iloc[_sample_rows(answers, config.max_test_rows, rng, None)].astype(str))
            answers = answers[answers[id_column].astype(str).isin(test_ids)]
        for path in public.glob("*.csv"):
            if path in train_tables:
                continue
            if test_ids is None or id_column not in pd.read_csv(path, nrows=0).columns:
                _link_or_copy(str(path), str(work / "public" / path.name))
                continue
            frame = _read_table(path)
            frame[frame[id_column].isin(test_ids)].to_csv(work / "public" / path.name, index=False)
        answers.to_csv(work / "answers.csv", index=False)
        meta = {"task": task.id, "train_rows": kept, "full_train_rows": full, "test_rows": len(answers),
                "full_test_rows": full_test, "config": {"fraction": config.fraction,
                                                        "min_train_rows": config.min_train_rows,
                                                        "max_test_rows": config.max_test_rows, "seed": config.seed}}
        (work / "view.json").write_text(json.dumps(meta, indent=1))
        # Every uid the sandbox runs as must read the sample, as it reads the task's own folder.
        for folder, _, files in os.walk(work):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        if target.exists():  # a stale, incomplete view: replaced whole
            shutil.rmtree(target)
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------- the head


@dataclass(frozen=True)
class SampleRunHead:
    """What a sample run's outcome says about the full run, as measured on the executed corpora
    (``scripts/build_sample_run_head.py`` writes it; the figures are in its ``measured`` block).

    Attributes:
        weights: The valid score's estimate: ``intercept + sample x sample score + model x the
            base model's valid-score estimate``, clipped to [0, 1].
        residual_sd: The estimate's residual standard deviation on the fit (its uncertainty).
        p_valid_if_valid: P(the full run is valid | the sample run was valid).
        p_valid_if_failed: P(the full run is valid | the sample run failed), by ``status`` or
            ``status/exception``; a class not listed takes ``"*"``.
        exact: The ``status/exception`` classes of sample failures that the full run reproduced
            every time on the corpora (and that cannot depend on the data's size): exact outcomes.
        measured: Where and how the figures were measured (free-form, for the record).
    """

    weights: dict[str, float] = field(default_factory=lambda: {"intercept": 0.0, "sample": 1.0, "model": 0.0})
    residual_sd: float = math.nan
    p_valid_if_valid: float = 1.0
    p_valid_if_failed: dict[str, float] = field(default_factory=lambda: {"*": 0.0})
    exact: tuple[str, ...] = ()
    measured: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = {"intercept", "sample", "model"} - set(self.weights)
        if missing:
            raise ConfigError(f"SampleRunHead.weights lacks {sorted(missing)}")
        if "*" not in self.p_valid_if_failed:
            raise ConfigError("SampleRunHead.p_valid_if_failed needs a '*' entry for unlisted classes")
        object.__setattr__(self, "exact", tuple(self.exact))

    @classmethod
    def load(cls, path: str | Path | None = None) -> SampleRunHead:
        path = Path(path) if path is not None else default_head_path()
        return cls(**read_artefact(path, "sample-run head", HEAD_FORMAT, "scripts/build_sample_run_head.py"))

    def save(self, path: str | Path) -> Path:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return write_artefact(Path(path), HEAD_FORMAT, {**fields, "exact": list(self.exact)})

    def valid_score(self, sample_score: float, model_score: float) -> float:
        w = self.weights
        model = model_score if np.isfinite(model_score) else sample_score
        return float(np.clip(w["intercept"] + w["sample"] * sample_score + w["model"] * model, 0.0, 1.0))

    def failure_p_valid(self, status: str, exception: str | None) -> float:
        table = self.p_valid_if_failed
        return float(table.get(failure_class(status, exception), table.get(status, table["*"])))

    def is_exact(self, status: str, exception: str | None) -> bool:
        return failure_class(status, exception) in self.exact


def failure_class(status: str, exception: str | None) -> str:
    """The key a failure is measured by: ``status/exception`` (``status`` alone without one)."""
    return f"{status}/{exception}" if exception else status


# ----------------------------------------------------------------------------- the world model


@dataclass(frozen=True)
class SampleOutcome:
    """A sample run's outcome, as memoised."""

    status: str
    exception: str | None
    message: str | None
    score: float
    cpu_s: float


class SampleRunWorldModel:
    """Proof, reuse, sample run, base model (module docstring).

    Args:
        base: The world model that answers where no sample runs (a registry name or an
            instance); it also proves, so its proofs come first.
        base_kwargs: Options of ``base`` when it is a name.
        config: A :class:`SampleRunConfig` (or its fields as a mapping).
        head: A :class:`SampleRunHead` or the path of one (default: the shipped artefact).
        executor: Sandbox backend of the sample runs (the scoring core's default).
        samples_root: Where task samples are built (default ``$WMRL_HOME/samples``).
    """

    name = "sample_run"

    def __init__(self, base: str | WorldModel = "surrogate", base_kwargs: dict[str, Any] | None = None,
                 config: SampleRunConfig | dict[str, Any] | None = None, head: SampleRunHead | str | Path | None = None,
                 executor: str = DEFAULT_EXECUTOR, samples_root: str | Path | None = None) -> None:
        self.base = make_world_model(base, **(base_kwargs or {})) if isinstance(base, str) else base
        self.config = config if isinstance(config, SampleRunConfig) else SampleRunConfig(**(config or {}))
        self.head = head if isinstance(head, SampleRunHead) else SampleRunHead.load(head)
        self.executor_name = executor
        self.samples_root = Path(samples_root) if samples_root is not None else None
        self._memo = ScriptTable(SampleOutcome, MEMO_ENTRIES)
        self._views: dict[str, SampleView | None] = {}
        # CPU-seconds of the latest full and sample runs by task: what ``run="cost"`` decides by.
        self._cpu: dict[str, dict[str, deque[float]]] = {}
        self._pool: ExecutorPool | None = None
        self._lock = threading.Lock()

    # Threads and a pool do not pickle; they are rebuilt on first use.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_pool=None, _lock=None, _views={})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def pool(self) -> ExecutorPool:
        with self._lock:
            if self._pool is None:
                self._pool = ExecutorPool(make_executor(self.executor_name), workers=self.config.workers)
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def state_dict(self) -> dict[str, Any]:
        """The memoised sample runs, so that a resumed run does not run them again, and the runs'
        CPU by task, so that it decides as the run would have."""
        return {"format": HEAD_FORMAT, "keys_python": KEYS_PYTHON, "memo": self._memo.rows(),
                "cpu": {task: {kind: list(values) for kind, values in kinds.items()} for task, kinds in self._cpu.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._memo.load_rows(state["memo"], state.get("keys_python"))
        self._cpu = {}
        for task_id, kinds in state.get("cpu", {}).items():  # a state from before the cost rule has none
            for kind, values in kinds.items():
                for cpu_s in values:
                    self._record_cpu(task_id, kind, cpu_s)

    def observe_execution(self, task_id: str, cpu_s: float) -> None:
        """A full run of a script on the task was executed (an anchor) and cost ``cpu_s``."""
        self._record_cpu(task_id, "full", cpu_s)

    def _record_cpu(self, task_id: str, kind: str, cpu_s: float) -> None:
        if math.isfinite(cpu_s) and cpu_s > 0:
            self._cpu.setdefault(task_id, {}).setdefault(kind, deque(maxlen=CPU_HISTORY)).append(float(cpu_s))

    def sample_cost_share(self, task_id: str) -> float | None:
        """A sample run's CPU over a full run's on the task, as measured (medians); None before
        any full run of it was executed. Before its first sample run, the head's measured median
        (over the corpora) stands for the sample's."""
        kinds = self._cpu.get(task_id, {})
        if not kinds.get("full"):
            return None
        sample = statistics.median(kinds["sample"]) if kinds.get("sample") else self.head.measured.get(
            "sample_cpu_s_median", 0.0)
        return float(sample) / statistics.median(kinds["full"])

    def view(self, task: Task) -> SampleView | None:
        """The task's sample; None (and one warning) for a task that has no training table."""
        if task.data_key not in self._views:
            try:
                self._views[task.data_key] = sample_view(task, self.config, self.samples_root)
            except TaskFormatError as exc:
                log.warning("task %s: no sample run, the base world model answers: %s", task.id, exc)
                self._views[task.data_key] = None
        return self._views[task.data_key]

    def _probing(self, task_id: str, key: tuple[str, str], pending: dict[tuple[str, str], list[int]]) -> bool:
        """Under ``run="cost"``, whether another code of the task is already pending as the run
        that will measure what a sample costs there (no sample of it has run yet)."""
        if self.config.run != "cost" or self._cpu.get(task_id, {}).get("sample"):
            return False
        return any(other[0] == key[0] and other != key for other in pending)  # key[0]: the task's data key

    def wants_run(self, prediction: Prediction, task_id: str) -> bool:
        """Whether the schedule runs a script the base model answered with ``prediction`` on the task."""
        if prediction.proved or not prediction.parsed or self.config.run == "never":
            return False
        if self.config.run == "always":
            return True
        if self.config.run == "cost":
            share = self.sample_cost_share(task_id)
            return share is not None and share <= self.config.max_cost_share
        lo, hi = self.config.uncertain_band
        return lo <= prediction.p_valid <= hi

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        if len(tasks) != len(scripts):
            raise ValueError(f"{len(tasks)} tasks for {len(scripts)} scripts")
        base = self.base.predict(tasks, scripts)
        out = list(base)
        pending: dict[tuple[str, str], list[int]] = {}
        for i, (task, script, prediction) in enumerate(zip(tasks, scripts, base)):
            if not self.wants_run(prediction, task.id):
                continue
            key = (task.data_key, code_key(script))
            if (known := self._memo.get(key, touch=True)) is not None:
                out[i] = self._combine(task, prediction, known, charged=False)
            elif self._probing(task.id, key, pending):
                continue  # the task's first sample run measures its cost before any other runs
            elif self.view(task) is not None:
                pending.setdefault(key, []).append(i)
        if pending:
            firsts = [positions[0] for positions in pending.values()]
            results = self.run_samples([tasks[i] for i in firsts], [scripts[i] for i in firsts])
            for (key, positions), result in zip(pending.items(), results):
                if result is None:  # the sandbox could not run it: the base model's estimate stands
                    continue
                self._memo.put(key, result)
                self._record_cpu(tasks[positions[0]].id, "sample", result.cpu_s)
                for n, i in enumerate(positions):
                    out[i] = self._combine(tasks[i], base[i], result, charged=n == 0)
        return out

    def run_samples(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[SampleOutcome | None]:
        """Run every script on its task's sample (in parallel) and judge the runs; None where the
        sandbox could not run one or the task has no sample. Nothing is memoised here."""
        views = [self.view(t) for t in tasks]
        if any(v is None for v in views):
            runnable = [i for i, v in enumerate(views) if v is not None]
            done = self.run_samples([tasks[i] for i in runnable], [scripts[i] for i in runnable])
            out: list[SampleOutcome | None] = [None] * len(tasks)
            for i, result in zip(runnable, done):
                out[i] = result
            return out
        futures = [self.pool.submit(script, view.task, self.config.limits(view.task.limits))
                   for script, view in zip(scripts, views)]
        results: list[SampleOutcome | None] = []
        for future, view in zip(futures, views):
            run = future.result()
            try:
                verdict = judge_run(view.task, run, view.answers, view.task.sample_submission_path)
            finally:
                run.cleanup()
            if verdict.infra_failure:
                log.warning("task %s: the sample run could not run (%s); the base world model answers",
                            view.task.id, verdict.error)
                results.append(None)
                continue
            results.append(SampleOutcome(verdict.status, verdict.exception, verdict.error,
                                          verdict.score, float(run.cpu_s)))
        return results

    def p_timeout(self, task: Task, sample: SampleOutcome) -> tuple[float, float]:
        """The probability that the full run of a script valid on the task's sample outgrows the
        task's time limits, and the full run's projected CPU-seconds.

        A sample's wall cap is a larger share of the task's than its data is of the task's data
        (:attr:`SampleRunConfig.wall_share`), so a run that finishes on the sample may still time
        out in full. Its CPU-seconds are projected linearly in the training rows (the
        interpreter's start is projected too, so small tasks are over-projected, far below their
        limits) and met with the tighter of the task's wall and CPU limits (the sandbox pins math
        libraries to one thread, so a run's CPU is about its wall time, and CPU does not stretch
        with the machine's load), with a log-normal spread of :attr:`SampleRunConfig.timeout_log_sd`.
        """
        view = self.view(task)
        projected = sample.cpu_s / view.train_share if view is not None else sample.cpu_s
        if view is None or view.train_share >= 1.0 or not projected > 0:
            return 0.0, projected  # the sample was the whole task: it ran within the limits
        limit = min(task.limits.wall_s, task.limits.cpu_s)
        return _NORMAL.cdf(math.log(projected / limit) / self.config.timeout_log_sd), projected

    def _combine(self, task: Task, base: Prediction, sample: SampleOutcome, charged: bool) -> Prediction:
        """The prediction a sample run makes; ``charged``: this prediction paid for the run (a
        memoised run's outcome is free)."""
        stage, cpu = "sample_run", sample.cpu_s if charged else 0.0
        if sample.status == outcome.VALID:
            score = self.head.valid_score(sample.score, valid_estimate(base))
            p_late, projected_cpu = self.p_timeout(task, sample)
            p_valid = self.head.p_valid_if_valid * (1.0 - p_late)
            if p_late <= 0.5:
                return Prediction(score=score, uncertainty=self.head.residual_sd, cost_s=base.cost_s,
                                  status=outcome.VALID, p_valid=p_valid, stage=stage, cpu_s=cpu)
            # Likelier to time out in full than not: the reward is its expectation, as for a failure.
            message = f"timeout (predicted: the sample's {sample.cpu_s:.1f} CPU-s project to {projected_cpu:.0f} CPU-s in full)"
            return Prediction(score=p_valid * score, uncertainty=self.head.residual_sd, cost_s=base.cost_s,
                              status=outcome.TIMEOUT, message=message, p_valid=p_valid, stage=stage, cpu_s=cpu)
        if self.head.is_exact(sample.status, sample.exception):
            return Prediction(score=0.0, uncertainty=0.0, cost_s=base.cost_s, status=sample.status,
                              exception=sample.exception, message=sample.message, proved=True, p_valid=0.0,
                              stage=stage, cpu_s=cpu)
        p_valid = self.head.failure_p_valid(sample.status, sample.exception)
        # The likeliest outcome is the sample's failure; the reward is its expectation.
        score = p_valid * valid_estimate(base) if np.isfinite(valid_estimate(base)) else 0.0
        return Prediction(score=float(score), uncertainty=self.head.residual_sd, cost_s=base.cost_s,
                          status=sample.status if p_valid < 0.5 else outcome.VALID, exception=sample.exception,
                          message=sample.message, p_valid=p_valid, stage=stage, cpu_s=cpu)


def valid_estimate(prediction: Prediction) -> float:
    """The base model's estimate of the score were the script valid: its score over ``P(valid)``
    where it gave the expected reward, its score where it kept the valid estimate."""
    if not prediction.parsed:
        return math.nan
    if prediction.status == outcome.VALID or prediction.p_valid <= 0:
        return float(prediction.score)
    return float(min(1.0, prediction.score / prediction.p_valid))
