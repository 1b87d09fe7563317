"""A user's own tasks in MLE-bench's prepared layout, end to end, next to a broken folder.

The user's tasks load with statistics derived from their files, train and evaluate when named
by id, and never join the built-in pools, even when their overlay says ``suite: mle``; the broken
folder is reported and blocks nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from trainers.cli import main
from trainers.evaluate import select_tasks
from wmrl_envs.tasks import get_task, scan_tasks

USER_TASKS = ("user-loans", "user-churn")


def competition(folder: Path, seed: int, overlay: dict | None) -> None:
    """An MLE-bench prepared binary competition (AUC) with a Kaggle-style leaderboard."""
    rng = np.random.default_rng(seed)
    n = 240
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    grade = rng.choice(["A", "B", None], size=n)
    label = (x1 - x2 + rng.normal(0, 0.5, n) > 0).astype(int)
    frame = pd.DataFrame({"id": np.arange(n), "x1": x1, "x2": x2, "grade": grade, "target": label})
    public, private = folder / "prepared" / "public", folder / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    frame.iloc[:160].to_csv(public / "train.csv", index=False)
    frame.iloc[160:].drop(columns="target").to_csv(public / "test.csv", index=False)
    frame.iloc[160:][["id"]].assign(target=0.5).to_csv(public / "sample_submission.csv", index=False)
    frame.iloc[160:][["id", "target"]].to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text("Predict the target from x1, x2 and grade.\n")
    pd.DataFrame({"teamId": range(20), "score": np.linspace(0.95, 0.5, 20)}).to_csv(folder / "leaderboard.csv",
                                                                                 index=False)
    if overlay is not None:
        (folder / "wmrl.yaml").write_text(yaml.safe_dump(overlay))


def test_user_tasks_train_and_evaluate_by_id_beside_a_broken_folder(tmp_path, monkeypatch):
    pool_before = [t.id for t in select_tasks("wmrl/MLEDojo-v0", "mle", "heldout", None)]
    root = tmp_path / "tasks"
    for seed, name in enumerate(USER_TASKS):
        # `suite: mle` would once have slipped these into the built-in held-out pool.
        competition(root / name, seed, {"metric": "roc_auc", "task_type": "binary", "suite": "mle"})
    competition(root / "no-overlay", 9, None)
    monkeypatch.setenv("WMRL_TASKS_DIR", str(root))

    [failure] = scan_tasks().failures
    assert failure.path == str(root / "no-overlay") and "wmrl.yaml" in failure.error
    meta = get_task(USER_TASKS[0]).spec.meta
    assert (meta["n_train"], meta["n_test"], meta["n_features"], meta["n_numeric"]) == (160, 80, 3, 2)
    assert get_task("titanic-survival").spec.suite == "mle"

    out = tmp_path / "run"
    code = main(["train", "--mode", "real", "--steps", "1", "--tasks-per-step", "1", "--group-size", "2",
                 "--tasks", "wine-cultivar", "--eval-k", "1", "--eval-tasks", *USER_TASKS, "--output-dir", str(out),
                 "--no-tensorboard", "--workers", "2"])
    assert code == 0
    reports = json.loads((out / "results.json").read_text())["reports"]
    for report in reports:
        assert [t["task_id"] for t in report["tasks"]] == list(USER_TASKS)
        assert all(t["valid"] == [True] for t in report["tasks"]), report["tasks"]
        assert 0.0 <= report["summary"]["score_mean"] <= 1.0
    assert [t.id for t in select_tasks("wmrl/MLEDojo-v0", "mle", "heldout", None)] == pool_before
