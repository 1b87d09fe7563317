"""Experience from scripts that differ only in numbers: the shape key, the empirical-Bayes
shrinkage and the residual store (wmrl_envs/scoring/experience.py)."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_envs.analysis.script import KEYS_PYTHON, code_key, shape_key
from wmrl_envs.scoring.experience import (
    DEFAULT_PRIOR_PAIRS,
    PRIOR_PAIRS_RANGE,
    NeighbourResiduals,
    ResidualSummary,
    prior_pairs,
)

SCRIPT = "import numpy as np\nSEED = 3\nmodel = Forest(n_estimators=200, max_depth=-1, criterion='gini')\n"


def test_scripts_that_differ_only_in_numbers_share_a_shape_and_nothing_else_does():
    other_numbers = SCRIPT.replace("3", "11").replace("200", "50")
    assert code_key(other_numbers) != code_key(SCRIPT)
    assert shape_key(other_numbers) == shape_key(SCRIPT)
    assert shape_key("# a note\n" + SCRIPT) == shape_key(SCRIPT)
    assert shape_key(SCRIPT.replace("'gini'", "'entropy'")) != shape_key(SCRIPT)  # an option is not a number
    assert shape_key(SCRIPT.replace("Forest", "Boosting")) != shape_key(SCRIPT)
    assert shape_key("x = True") != shape_key("x = 1")  # a bool is not a number
    assert shape_key("def broken(:\n") is None


def summaries(offsets, noise, per_shape, rng):
    out = []
    for offset in offsets:
        s = ResidualSummary()
        for value in offset + noise * rng.standard_normal(per_shape):
            s.add(float(value))
        out.append(s)
    return out


def test_welford_summary_matches_numpy():
    values = [0.3, -0.1, 0.25, 0.7]
    s = ResidualSummary()
    for v in values:
        s.add(v)
    assert s.n == 4 and s.mean == pytest.approx(np.mean(values))
    assert s.m2 / (s.n - 1) == pytest.approx(np.var(values, ddof=1))


def test_shrinkage_follows_the_ratio_of_noise_to_signal():
    rng = np.random.default_rng(0)
    assert prior_pairs(summaries([0.3, -0.2], 0.05, 3, rng)) == DEFAULT_PRIOR_PAIRS  # too few repeated shapes
    # Shapes whose residuals differ a lot, each repeated with little noise: trust the neighbours.
    signal = prior_pairs(summaries(rng.normal(0, 0.3, 40), 0.03, 3, rng))
    assert signal < 0.1 * DEFAULT_PRIOR_PAIRS + 0.05
    # Residuals that are pure noise around 0: shrink hard toward the world model.
    noise = prior_pairs(summaries(np.zeros(40), 0.3, 3, rng))
    assert noise > 10 * DEFAULT_PRIOR_PAIRS
    assert PRIOR_PAIRS_RANGE[0] <= signal < noise <= PRIOR_PAIRS_RANGE[1]


def test_a_shared_offset_counts_as_signal():
    """The prior is centred on the world model unmoved: a bias every shape shares is corrected."""
    rng = np.random.default_rng(1)
    assert prior_pairs(summaries(np.full(30, 0.4), 0.02, 3, rng)) == PRIOR_PAIRS_RANGE[0]


def test_corrections_reduce_the_error_of_shape_biased_predictions():
    """A synthetic world model whose error is a per-shape bias plus noise: after one anchor of each
    shape, corrected predictions of its other variants are closer to the truth than raw ones."""
    rng = np.random.default_rng(2)
    residuals = NeighbourResiduals()
    bias = rng.normal(0, 0.2, 30)
    scripts = [[f"import x\nmodel = M{s}(k={v})\n" for v in range(4)] for s in range(30)]
    for s in range(30):
        for variant in range(2):  # two executed anchors of each shape
            real = 0.5 + 0.05 * rng.standard_normal()
            residuals.record("t", scripts[s][variant], real - bias[s], real)
    raw_error, corrected_error = prediction_errors(residuals, [("t", scripts[s][3], bias[s]) for s in range(30)], rng, 2)
    assert corrected_error < 0.5 * raw_error


def prediction_errors(residuals: NeighbourResiduals, cases, rng, neighbours: int) -> tuple[float, float]:
    """Mean absolute error of raw and corrected predictions of ``(task, script, bias)`` cases by a
    world model whose error is ``bias`` plus noise; each must have ``neighbours`` executed ones."""
    raw_error, corrected_error = [], []
    for task_id, script, bias in cases:
        real = 0.5 + 0.05 * rng.standard_normal()
        raw = real - bias + 0.02 * rng.standard_normal()
        shift, n = residuals.correction(task_id, script)
        assert n == neighbours
        raw_error.append(abs(raw - real))
        corrected_error.append(abs(raw + shift - real))
    return float(np.mean(raw_error)), float(np.mean(corrected_error))


def test_another_task_or_shape_gets_no_correction_and_state_round_trips():
    residuals = NeighbourResiduals()
    residuals.record("t", SCRIPT, 0.2, 0.6)
    residuals.record("t", SCRIPT.replace("200", "300"), 0.3, 0.6)
    residuals.record("t", "def broken(:\n", 0.2, 0.6)  # no shape: nothing learned
    residuals.record("t", SCRIPT.replace("gini", "entropy"), 0.5, float("nan"))  # no real score
    assert len(residuals) == 1
    assert residuals.correction("u", SCRIPT) == (0.0, 0)
    assert residuals.correction("t", SCRIPT.replace("gini", "log_loss")) == (0.0, 0)
    shift, n = residuals.correction("t", SCRIPT.replace("200", "7"))
    assert n == 2 and shift == pytest.approx(2 / (2 + DEFAULT_PRIOR_PAIRS) * 0.35)
    resumed = NeighbourResiduals()
    resumed.load_state_dict(residuals.state_dict())
    assert resumed.correction("t", SCRIPT) == residuals.correction("t", SCRIPT)


FOREST = ("from sklearn.ensemble import RandomForestRegressor\nmodel = RandomForestRegressor(n_estimators={n})\n"
          "{extra}")


def test_only_the_same_shape_corrects_and_a_state_with_family_residuals_loads():
    """A program of the same estimator but another shape gets no correction (the family level was
    judged and removed); a checkpoint written while it existed still loads."""
    residuals = NeighbourResiduals()
    residuals.record("t", FOREST.format(n=100, extra=""), 0.3, 0.7)
    assert residuals.correction("t", FOREST.format(n=5, extra="import pandas as pd\n")) == (0.0, 0)
    assert residuals.correction("t", FOREST.format(n=5, extra=""))[1] == 1  # its shape answers
    older = residuals.state_dict() | {"families": [[["t", "forest"], {"n": 1, "mean": 0.4, "m2": 0.0}]]}
    resumed = NeighbourResiduals()
    resumed.load_state_dict(older)
    assert resumed.correction("t", FOREST.format(n=5, extra="")) == residuals.correction("t", FOREST.format(n=5, extra=""))


def test_tables_keyed_under_another_python_are_dropped_with_a_warning(caplog):
    """Keys hash a syntax tree's dump, which differs between Python versions: a checkpoint's tables
    from another Python could never match, so they are dropped and said to be; an older checkpoint,
    which does not say, loads as before."""
    residuals = NeighbourResiduals()
    residuals.record("t", SCRIPT, 0.2, 0.6)
    state = residuals.state_dict()
    assert state["keys_python"] == KEYS_PYTHON
    older = {k: v for k, v in state.items() if k != "keys_python"}
    for saved, kept in ((state, 1), (older, 1), (state | {"keys_python": "3.0"}, 0)):
        resumed = NeighbourResiduals()
        with caplog.at_level("WARNING", logger="wmrl_envs.analysis.script"):
            caplog.clear()
            resumed.load_state_dict(saved)
        assert len(resumed) == kept and resumed.correction("t", SCRIPT)[1] == kept
        assert ("keyed under Python 3.0" in caplog.text) == (kept == 0)
