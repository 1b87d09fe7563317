"""The multi-fidelity world model: a task's sample, the script's run on it in the real sandbox, and
what the scoring core does with its answers (wmrl_envs/world_models/sample_run.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from wmrl_envs import outcome
from wmrl_envs.analysis.script import code_key
from wmrl_envs.errors import ConfigError, TaskFormatError
from wmrl_envs.scoring.code import CodeGroup, CodeScorer
from wmrl_envs.tasks import get_task
from wmrl_envs.world_models import make_world_model
from wmrl_envs.world_models.sample_run import (
    SampleRunConfig,
    SampleRunHead,
    SampleRunWorldModel,
    sample_view,
)

TASK_ID = "car-crash-fatality"  # 6000 training rows, a binary label to stratify by

VALID = """\
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = ["weight", "frontal", "ageOFocc", "yearacc"]
model = LogisticRegression(max_iter=500).fit(train[features], train["dead"] == "dead")
pd.DataFrame({"id": test["id"], "dead": model.predict_proba(test[features])[:, 1]}).to_csv("submission.csv", index=False)
"""
# The same code, other comments and blank lines: one code key.
VALID_RESTYLED = "# a comment\n\n" + VALID.replace("import pandas as pd", "import pandas as pd  # frames")
# A NameError the prover cannot see (under a branch on the data), raised whatever the data's size.
NAME_ERROR = """\
import pandas as pd
train = pd.read_csv("data/train.csv")
if len(train) > 0:
    predictions = undefined_helper(train)
"""
# A failure that only a small sample has: the full run is valid.
SMALL_DATA_ERROR = VALID.replace('test = pd.read_csv("data/test.csv")',
                                 'test = pd.read_csv("data/test.csv")\n'
                                 'if len(train) < 1000:\n    raise ValueError("too few rows")')


@pytest.fixture(scope="module")
def task():
    return get_task(TASK_ID)


@pytest.fixture()
def head():
    return SampleRunHead(weights={"intercept": 0.1, "sample": 0.8, "model": 0.1}, residual_sd=0.1,
                         p_valid_if_valid=0.99, p_valid_if_failed={"*": 0.2, "runtime_error/ValueError": 0.4},
                         exact=("runtime_error/NameError",))


def test_the_sample_keeps_a_stratified_share_of_training_rows_and_the_test_set_whole(task, tmp_path):
    config = SampleRunConfig(fraction=0.05, min_train_rows=100)
    view = sample_view(task, config, tmp_path)
    train = pd.read_csv(view.task.public_dir / "train.csv")
    full = pd.read_csv(task.public_dir / "train.csv")
    assert view.full_train_rows == len(full) == 6000 and view.train_rows == len(train) == pytest.approx(300, abs=6)
    assert set(train["dead"]) == set(full["dead"])  # every class kept
    assert (full.set_index("id").loc[train["id"]].reset_index().astype(str) == train.astype(str)).all().all()
    assert (view.task.public_dir / "test.csv").read_bytes() == (task.public_dir / "test.csv").read_bytes()
    assert len(view.answers) == view.test_rows == view.full_test_rows
    again = sample_view(task, config, tmp_path)
    assert again.task.public_dir == view.task.public_dir and len(list(tmp_path.iterdir())) == 1


def test_a_capped_test_set_keeps_the_same_ids_in_test_submission_and_answers(task, tmp_path):
    view = sample_view(task, SampleRunConfig(max_test_rows=150), tmp_path)
    test = pd.read_csv(view.task.public_dir / "test.csv")
    submission = pd.read_csv(view.task.sample_submission_path)
    assert len(test) == len(submission) == len(view.answers) == 150 < view.full_test_rows
    assert set(test["id"]) == set(submission["id"]) == set(view.answers["id"])


def test_a_task_without_a_training_table_cannot_be_sampled(task, tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    (public / "test.csv").write_text("id,x\n1,2\n")
    bare = type(task)(task.spec, tmp_path, task.description_path, public, task.answers_path)
    with pytest.raises(TaskFormatError, match="no training table"):
        sample_view(bare, SampleRunConfig(), tmp_path / "samples")


@pytest.mark.parametrize("bad", [{"fraction": 0}, {"min_train_rows": 0}, {"run": "sometimes"},
                                 {"uncertain_band": (0.9, 0.1)}, {"wall_share": 2}, {"max_cost_share": 0},
                                 {"max_cost_share": 1.5}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        SampleRunConfig(**bad)


def test_the_sample_run_answers_and_the_same_code_is_not_run_again(task, head, tmp_path):
    model = SampleRunWorldModel(head=head, samples_root=tmp_path)
    try:
        first = model.predict([task, task], [VALID, VALID_RESTYLED])
        assert [p.stage for p in first] == ["sample_run", "sample_run"]
        # P(valid) is the head's, less a negligible chance of outgrowing the time limits in full.
        assert first[0].status == outcome.VALID and first[0].p_valid == pytest.approx(0.99, abs=1e-6)
        assert first[0].cpu_s > 0
        assert first[1].cpu_s == 0 and first[1].score == first[0].score
        assert code_key(VALID) == code_key(VALID_RESTYLED) != code_key(NAME_ERROR)
        again = model.predict([task], [VALID])
        assert again[0].stage == "sample_run" and again[0].cpu_s == 0 and again[0].score == first[0].score
    finally:
        model.close()


def test_failures_are_exact_only_for_the_classes_the_head_calls_exact(task, head, tmp_path):
    model = SampleRunWorldModel(head=head, samples_root=tmp_path)
    try:
        name_error, small_data = model.predict([task, task], [NAME_ERROR, SMALL_DATA_ERROR])
    finally:
        model.close()
    assert (name_error.status, name_error.exception, name_error.proved) == (outcome.RUNTIME_ERROR, "NameError", True)
    assert name_error.score == 0 and "undefined_helper" in name_error.message
    assert (small_data.status, small_data.exception, small_data.proved) == (outcome.RUNTIME_ERROR, "ValueError", False)
    assert small_data.p_valid == 0.4 and 0 < small_data.score < 1


def test_a_script_that_finishes_on_the_sample_but_outgrows_the_limits_in_full_is_predicted_to_time_out(
        task, head, tmp_path):
    """Its time grows with the rows: a couple of CPU-s on the sample (600 of 6,000 rows), so over 10
    in full, against a task limit of 6 s. The sample's own cap (the task's 6 s here) lets it
    finish; its projection says timeout, and the real full run does time out."""
    quick = replace(task, spec=replace(task.spec, limits=replace(task.limits, wall_s=6.0, cpu_s=6.0)))
    slow = VALID.replace('test = pd.read_csv("data/test.csv")',
                         'test = pd.read_csv("data/test.csv")\n'
                         'total = 0\nfor i in range(len(train) * 40_000):\n    total += i')
    model = SampleRunWorldModel(head=head, samples_root=tmp_path)
    scorer = CodeScorer(prove=False)
    try:
        late, fine = model.predict([quick, task], [slow, slow])
        [full] = scorer.execute([quick], [slow])
    finally:
        model.close()
        scorer.close()
    view = model.view(quick)
    assert view.train_share == pytest.approx(0.1)
    assert (late.status, late.stage, late.proved) == (outcome.TIMEOUT, "sample_run", False)
    assert late.p_valid < 0.5 and late.score == pytest.approx(late.p_valid * fine.score)
    assert "CPU-s in full" in late.message
    assert fine.status == outcome.VALID and fine.p_valid > 0.98  # the task's own limits: 120 s
    assert full.status == outcome.TIMEOUT


def test_the_never_rule_is_the_base_world_model(task, head, tmp_path):
    model = SampleRunWorldModel(head=head, samples_root=tmp_path, config={"run": "never"})
    base = make_world_model("surrogate")
    assert [p.score for p in model.predict([task], [VALID])] == [p.score for p in base.predict([task], [VALID])]
    assert model.predict([task], [VALID])[0].stage == "world_model"


@pytest.mark.parametrize("max_cost_share, runs", [(1.0, True), (0.001, False)])
def test_the_cost_rule_runs_samples_once_anchors_show_a_full_run_costs_enough_more(task, tmp_path, max_cost_share,
                                                                                    runs):
    """Before any anchor of the task ran, the base model answers; after one, a sample runs where
    the sample's measured cost (here the head's 0.05 CPU-s before its first run) is at most the
    share of the anchor's. A python process fitting a model costs more than 0.05 CPU-s and far
    less than 50: share 1 runs samples, share 0.001 never does. The task's first sample run
    measures its cost before another runs; a sample that fails early costs a fraction of the
    anchor's search, so share 1 then runs the rest. A resumed model decides the same."""
    head = SampleRunHead(measured={"sample_cpu_s_median": 0.05})
    model = SampleRunWorldModel(head=head, samples_root=tmp_path, config={"run": "cost", "max_cost_share": max_cost_share})
    scorer = CodeScorer(model, neighbours=False)  # neighbours would move (and rename) the stage after an anchor
    # The anchor searches C over 20 fits: in the warm sandbox (libraries preloaded) a bare fit
    # costs about as much as a sample that fails early, too thin a margin for share 1.
    searched = VALID.replace("model = LogisticRegression", "for c in [0.01, 0.1, 1.0, 10.0] * 5:\n"
                             "    LogisticRegression(C=c, max_iter=300).fit(train[features], train[\"dead\"] == \"dead\")\n"
                             "model = LogisticRegression")
    try:
        before = scorer.score([CodeGroup(task, [VALID], "w0")], ["world_model"])[0].samples[0]
        anchor = scorer.score([CodeGroup(task, [searched], "a")], ["anchor"])[0].samples[0]
        assert model.sample_cost_share(task.id) == pytest.approx(0.05 / anchor.cost["execution_cpu_s"])
        after, waiting = scorer.score([CodeGroup(task, [SMALL_DATA_ERROR, VALID], "w1")], ["world_model"])[0].samples
        later = scorer.score([CodeGroup(task, [VALID], "w2")], ["world_model"])[0].samples[0]
    finally:
        scorer.close()
    assert before.decided_by == waiting.decided_by == "world_model" and anchor.executed
    assert after.decided_by == later.decided_by == ("sample_run" if runs else "world_model")
    cpu = model.state_dict()["cpu"][task.id]
    assert cpu["full"] == [anchor.cost["execution_cpu_s"]] and len(cpu.get("sample", [])) == 2 * int(runs)
    if runs:  # from its first sample run on, the task's own sample cost stands for the head's
        assert 0 < cpu["sample"][0] <= after.cost["world_model_cpu_s"]
        assert model.sample_cost_share(task.id) == np.median(cpu["sample"]) / cpu["full"][0]
    resumed = SampleRunWorldModel(head=head, samples_root=tmp_path, config=model.config)
    resumed.load_state_dict(model.state_dict())
    assert resumed.sample_cost_share(task.id) == model.sample_cost_share(task.id)


def test_an_anchor_whose_sample_run_failed_exactly_is_not_run_again(task, head, tmp_path):
    scorer = CodeScorer(SampleRunWorldModel(head=head, samples_root=tmp_path))
    try:
        group = scorer.score([CodeGroup(task, [NAME_ERROR, SMALL_DATA_ERROR], "g")], ["anchor"])[0]
    finally:
        scorer.close()
    exact, small_data = group.samples
    assert not exact.executed and exact.real_score == 0 and exact.decided_by == "sample_run"
    assert exact.cost["world_model_cpu_s"] > 0  # the sample run's sandbox CPU is the world model's cost
    assert small_data.executed and small_data.valid and small_data.decided_by == "execution"
    assert small_data.wm_score_raw is not None and small_data.real_score > 0


def test_a_world_model_sample_whose_code_ran_in_full_gets_that_outcome_exactly_after_a_resume(task, head, tmp_path):
    from wmrl_envs.calibration import Calibrator
    from wmrl_envs.scoring.core import ScoringCore
    from wmrl_envs.scoring.schedule import ConstantSchedule

    scorer = CodeScorer("surrogate")
    try:
        anchor = scorer.score([CodeGroup(task, [VALID], "a")], ["anchor"])[0].samples[0]
        state = scorer.state_dict()
    finally:
        scorer.close()
    assert anchor.executed and anchor.real_score > 0
    # Without the scorer's proofs, the reused sample's only world-model time is the reuse lookup.
    resumed = CodeScorer(SampleRunWorldModel(head=head, samples_root=tmp_path), prove=False)
    resumed.load_state_dict(state)
    core = ScoringCore(ConstantSchedule("world_model"), Calibrator(), scorer=resumed)
    try:
        reused, predicted = core.score([CodeGroup(task, [VALID_RESTYLED, SMALL_DATA_ERROR], "w")])[0].samples
    finally:
        core.close()
    assert (reused.decided_by, reused.proved, reused.executed) == ("reuse", True, False)
    assert reused.score == reused.wm_score_raw == reused.wm_score_calibrated == anchor.real_score
    assert 0 < reused.cost["world_model_cpu_s"] < 0.05 and reused.status == outcome.VALID  # keying is charged
    assert predicted.decided_by == "sample_run" and not predicted.proved


def test_a_prediction_moves_by_the_residual_of_an_executed_neighbour_of_its_shape(task):
    """An anchor executed, then world-model samples of the same task: the same program with other
    numbers is corrected by the anchor's residual (out of sample: the anchor's own pair used the
    prediction made before it ran), after a resume too; a program with another feature list (the
    same estimator, another shape) is not."""
    from wmrl_envs.scoring.experience import DEFAULT_PRIOR_PAIRS

    other_numbers = VALID.replace("max_iter=500", "max_iter=300")
    other_features = VALID.replace('"yearacc"]', '"yearacc", "airbag"]')
    scorer = CodeScorer("surrogate")
    try:
        anchor = scorer.score([CodeGroup(task, [VALID], "a")], ["anchor"])[0].samples[0]
        assert anchor.executed and anchor.decided_by == "execution" and anchor.wm_stage == "world_model"
        assert anchor.wm_status == anchor.status == outcome.VALID
        state = scorer.state_dict()
        plain = CodeScorer("surrogate", neighbours=False)
        try:
            [before] = plain.score([CodeGroup(task, [other_numbers], "p")], ["world_model"])[0].samples
        finally:
            plain.close()
    finally:
        scorer.close()
    resumed = CodeScorer("surrogate")
    resumed.load_state_dict(state)
    try:
        moved, unmoved = resumed.score([CodeGroup(task, [other_numbers, other_features], "w")],
                                       ["world_model"])[0].samples
    finally:
        resumed.close()
    residual = anchor.real_score - anchor.wm_score_raw
    assert abs(residual) > 0.01  # the surrogate is not exact here, so a correction has work to do
    assert (moved.decided_by, moved.wm_stage, moved.proved, moved.executed) == ("neighbours", "neighbours", False, False)
    assert moved.wm_score_raw == pytest.approx(before.wm_score_raw + 1 / (1 + DEFAULT_PRIOR_PAIRS) * residual, abs=1e-9)
    assert unmoved.decided_by == "world_model"
