"""A task's data key (``Task.data_key``): what a scorer's memory of executed scripts is keyed by, so a
task whose data changed under the same id is never answered with the old data's outcome."""

from __future__ import annotations

import logging
import shutil

import pytest

from wmrl_envs.scoring import CodeGroup, CodeScorer, ScoreResult
from wmrl_envs.scoring.experience import Experience
from wmrl_envs.tasks import load_task
from wmrl_envs.world_models.base import Prediction

SCRIPT = "import pandas as pd\nprint(pd.__version__)\n"


class FixedWorldModel:
    name = "fixed"

    def predict(self, tasks, scripts):
        return [Prediction(score=0.5, uncertainty=0.1) for _ in scripts]


@pytest.fixture
def task_folder(tmp_path, mle_task_path):
    folder = tmp_path / "copy"
    shutil.copytree(mle_task_path, folder)
    return folder


@pytest.fixture
def mle_task_path():
    from wmrl_envs.tasks import list_tasks

    return min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9)).root


def executed(task, score: float) -> tuple[str, str, ScoreResult, float]:
    sample = ScoreResult(task_id=task.id, stream="anchor", executed=True, valid=True, status="valid",
                         wm_status="valid", real_score=score)
    return task.data_key, SCRIPT, sample, 0.5


def test_the_key_is_the_id_and_the_data_not_the_folder(mle_task_path, task_folder):
    original, copy = load_task(mle_task_path), load_task(task_folder)
    assert original.data_key == copy.data_key and original.data_key.startswith(f"{original.id}@")
    answers = copy.answers_path
    answers.write_bytes(answers.read_bytes())  # rewritten with the same bytes: the same key
    assert load_task(task_folder).data_key == original.data_key
    saved = answers.read_bytes()
    answers.write_bytes(saved[: saved.rstrip(b"\n").rfind(b"\n") + 1])  # one answer fewer
    assert load_task(task_folder).data_key != original.data_key
    answers.write_bytes(saved)
    public = sorted(p for p in copy.public_dir.rglob("*.csv") if p.is_file())[0]
    public.write_bytes(public.read_bytes() + b"\n")  # a public file changed
    assert load_task(task_folder).data_key != original.data_key


def test_an_outcome_of_the_old_data_does_not_answer_the_new(mle_task_path, task_folder):
    old = load_task(task_folder)
    scorer = CodeScorer(FixedWorldModel(), executor="bwrap", workers=1)
    scorer.experience.record([executed(old, 0.9)])
    [reused] = scorer.score([CodeGroup(old, [SCRIPT], 0)], ["world_model"])[0].samples
    assert (reused.decided_by, reused.wm_score_raw) == ("reuse", 0.9)
    saved = old.answers_path.read_bytes()
    old.answers_path.write_bytes(saved[: saved.rstrip(b"\n").rfind(b"\n") + 1])  # one answer fewer
    new = load_task(task_folder)
    assert new.id == old.id and new.data_key != old.data_key
    [predicted] = scorer.score([CodeGroup(new, [SCRIPT], 1)], ["world_model"])[0].samples
    assert predicted.decided_by != "reuse" and predicted.wm_score_raw == 0.5
    scorer.close()


def test_a_checkpoint_keyed_by_task_ids_alone_is_not_loaded(mle_task_path, caplog):
    task = load_task(mle_task_path)
    saved = Experience()
    saved.record([executed(task, 0.9)])
    state = saved.state_dict()
    assert saved.lookup([(task.data_key, SCRIPT)])[0].real_score == 0.9
    old = {"experience": {**state["experience"], "format": 1}, "residuals": {**state["residuals"], "format": 1}}
    resumed = Experience()
    with caplog.at_level(logging.WARNING, logger="wmrl_envs.scoring.experience"):
        resumed.load_state_dict(old)
    assert len(resumed) == 0 and "keyed by task ids alone" in caplog.text
    again = Experience()
    again.load_state_dict(state)  # the current format loads whole
    assert again.state_dict() == state and again.lookup([(task.data_key, SCRIPT)])[0].real_score == 0.9
