"""Informed anchors through the scoring core, on a real task in the real sandbox: every group is
predicted, the schedule draws anchors by information, the drawn groups are executed, and their
pairs reach the calibrator weighted by the inverse of their inclusion probability."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator
from wmrl_envs.scoring import CodeGroup, CodeScorer, HashSchedule, InformedSchedule, ScoringCore
from wmrl_envs.tasks import get_task

BASE = """\
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = FEATURES
model = LogisticRegression(max_iter=300).fit(train[features], train["dead"] == "dead")
pd.DataFrame({"id": test["id"], "dead": model.predict_proba(test[features])[:, 1]}).to_csv("submission.csv", index=False)
"""
FEATURE_SETS = [["weight"], ["weight", "frontal"], ["ageOFocc", "yearacc"], ["weight", "ageOFocc"],
                ["frontal"], ["yearacc"]]
PROVED = "import pandas as pd\nthis is not python\n"


@pytest.fixture(scope="module")
def task():
    return get_task("car-crash-fatality")


def groups(task):
    scripts = [BASE.replace("FEATURES", repr(f)) for f in FEATURE_SETS]
    return [CodeGroup(task, scripts[0:2], 0), CodeGroup(task, scripts[2:4], 1), CodeGroup(task, scripts[4:6], 2),
            CodeGroup(task, [PROVED, PROVED], 3)]


def test_informed_anchors_are_drawn_executed_and_weighted(task):
    core = ScoringCore(InformedSchedule(HashSchedule(anchor_fraction=0.5, seed=1)), Calibrator(),
                       scorer=CodeScorer("surrogate", workers=2))
    try:
        scored = core.score(groups(task))
    finally:
        core.close()
    streams = [g.stream for g in scored]
    assert streams.count("anchor") == 2 and set(streams) <= {"anchor", "world_model"}  # the budget, exactly
    p = [g.samples[0].inclusion_probability for g in scored]
    assert sum(p) == pytest.approx(2.0) and all(s.inclusion_probability == g.samples[0].inclusion_probability
                                                 for g in scored for s in g.samples)
    assert p[3] == min(p)  # proved outcomes teach nothing: the floor
    assert all(s.predicted_cpu_s is None for g in scored for s in g.samples)  # plain informed prices nothing
    for g in scored:
        for s in g.samples:
            if g.stream == "anchor":
                assert s.wm_score_raw is not None and s.real_score is not None
                assert s.executed or s.decided_by == "proof"
            else:
                assert not s.executed and s.real_score is None
    state = core.calibrator.state_dict()
    anchors = [g for g in scored if g.stream == "anchor"]
    assert state["weights"] == pytest.approx([1 / s.inclusion_probability for g in anchors for s in g.samples])
    again = ScoringCore(InformedSchedule(HashSchedule(anchor_fraction=0.5, seed=1)), Calibrator(),
                        scorer=CodeScorer("surrogate", workers=2))
    try:
        assert [g.stream for g in again.score(groups(task))] == streams  # deterministic given seed and batch
    finally:
        again.close()


def test_a_core_under_an_informed_schedule_names_no_stream_before_scoring(task):
    from wmrl_envs.errors import ConfigError

    core = ScoringCore(InformedSchedule(HashSchedule()), Calibrator(), scorer=CodeScorer("surrogate"))
    with pytest.raises(ConfigError, match="scored members"):
        core.streams([0])
    assert np.isfinite(core.metrics()["bound/residuals"])


def test_informed_anchors_per_cost_price_every_script_that_would_run(task):
    core = ScoringCore(InformedSchedule(HashSchedule(anchor_fraction=0.5, seed=1), per_cost=True), Calibrator(),
                       scorer=CodeScorer("surrogate", workers=2))
    try:
        scored = core.score(groups(task))
    finally:
        core.close()
    assert [g.stream for g in scored].count("anchor") == 2
    for g in scored:
        for s in g.samples:
            if s.decided_by == "proof":
                assert s.predicted_cpu_s is None  # an exact outcome is never run: no price
            else:
                assert s.predicted_cpu_s > 0
    p = np.array([g.samples[0].inclusion_probability for g in scored])
    assert p.sum() == pytest.approx(2.0)
    state = core.calibrator.state_dict()
    anchors = [g for g in scored if g.stream == "anchor"]
    assert state["weights"] == pytest.approx([1 / s.inclusion_probability for g in anchors for s in g.samples])
