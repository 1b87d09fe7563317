"""CorruptedWorldModel on a planted base model: each corruption is deterministic and does what it says."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from agents.code.grammar import SLOTS, SolutionChoices, render_script
from wmrl_envs.analysis.code_features import solution_family
from wmrl_envs.errors import ConfigError
from wmrl_envs.task_spec import TaskSpec
from wmrl_envs.world_models import Prediction, make_world_model
from wmrl_envs.world_models.corrupted import (
    DEFAULT_STRENGTHS,
    FAMILIES,
    KINDS,
    CorruptedWorldModel,
    Corruption,
    saturation,
    script_family,
)


@dataclass(frozen=True)
class FakeTask:
    """The wrapper reads a task's id only."""

    id: str


class Planted:
    """A base world model that returns the score planted for each script (``unknown`` fails to parse)."""

    name = "planted"

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def predict(self, tasks, scripts):
        return [Prediction(self.scores[s], 0.05) if s in self.scores else Prediction.failed("unreadable")
                for s in scripts]


SPECS = (TaskSpec(id="reg", name="reg", suite="mle", env_id="wmrl/MLEDojo-v0", split="train", metric="rmse",
                  task_type="regression"),
         TaskSpec(id="clf", name="clf", suite="mle", env_id="wmrl/MLEDojo-v0", split="train", metric="accuracy",
                  task_type="multiclass", classes=("a", "b", "c")))
FAMILY_SCRIPTS = {f: render_script(SPECS[0], SolutionChoices(model=f)) for f in FAMILIES}


def scores(model: CorruptedWorldModel, tasks, scripts) -> np.ndarray:
    return np.array([p.score for p in model.predict(tasks, scripts)])


def uniform_scripts(n: int, lo: float = 0.0, hi: float = 1.0) -> tuple[list[str], np.ndarray]:
    """``n`` distinct scripts of no family whose base scores are evenly spread over [lo, hi]."""
    return [f"print({i})" for i in range(n)], np.linspace(lo, hi, n)


def test_script_family_reads_the_estimator_called_in_every_grammar_script() -> None:
    assert FAMILIES == SLOTS["model"]
    for spec in SPECS:
        for family in FAMILIES:
            for capacity in SLOTS["capacity"]:
                script = render_script(spec, SolutionChoices(model=family, capacity=capacity))
                assert script_family(script) == family, (spec.id, family, capacity)
    # An import names a class without calling it; an SVM is no grammar family.
    assert script_family("from sklearn.neighbors import KNeighborsRegressor\nm = Ridge(alpha=1)") == "linear"
    assert script_family("m = GradientBoostingRegressor()") == "hist_gb"
    assert script_family("m = SVC()") is None  # a family of the surrogate's, not of the grammar
    assert solution_family("m = SVC()") == "svm" and solution_family("print(1)") is None
    assert script_family("m = SVC()\nprint(m)") is None and script_family("") is None


@pytest.mark.parametrize("kind", KINDS)
def test_every_corruption_is_a_function_of_seed_task_and_script(kind: str) -> None:
    scripts, base = uniform_scripts(50, 0.1, 0.9)
    scripts += list(FAMILY_SCRIPTS.values())
    base = np.concatenate([base, np.linspace(0.2, 0.8, len(FAMILIES))])
    planted = Planted(dict(zip(scripts, base)))
    tasks = [FakeTask(f"t{i % 5}") for i in range(len(scripts))]
    one, same = CorruptedWorldModel(planted, kind, seed=3), CorruptedWorldModel(planted, kind, seed=3)
    one.step = same.step = 7
    np.random.seed(0)
    first = scores(one, tasks, scripts)
    np.random.seed(1)  # the global RNG plays no part
    np.testing.assert_array_equal(first, scores(same, tasks, scripts))
    order = np.random.default_rng(0).permutation(len(scripts))  # nor do batch order and composition
    np.testing.assert_array_equal(scores(one, [tasks[i] for i in order[:9]], [scripts[i] for i in order[:9]]),
                                  first[order[:9]])
    assert np.all((first >= 0) & (first <= 1))
    assert one.name == f"planted+{kind}"
    if kind in ("task_offset", "noise", "saturate"):  # the kinds with draws: another seed, other draws
        assert not np.array_equal(scores(CorruptedWorldModel(planted, kind, seed=4), tasks, scripts), first)


def test_saturate_is_monotone_in_expectation_and_compresses_the_top() -> None:
    k = DEFAULT_STRENGTHS["saturate"]
    levels = np.linspace(0, 1, 11)
    exact = np.array([saturation(s, k) for s in levels])
    assert exact[0] == 0 and exact[-1] == 1 and np.all(np.diff(exact) > 0)
    assert exact[10] - exact[8] < 0.1 * (exact[2] - exact[0])  # top differences shrink tenfold
    # With its noise, the mean over many scripts of each base level still rises.
    scripts = [f"print({i}, {j})" for i in range(11) for j in range(300)]
    planted = Planted({s: levels[i // 300] for i, s in enumerate(scripts)})
    noisy = scores(CorruptedWorldModel(planted, "saturate", seed=0), [FakeTask("t")] * len(scripts), scripts)
    means = noisy.reshape(11, 300).mean(axis=1)
    assert np.all(np.diff(means) > 0)
    np.testing.assert_allclose(means[1:-1], exact[1:-1], atol=0.01)  # clipping moves only the ends


def test_noise_has_the_strength_as_standard_deviation_and_no_bias() -> None:
    scripts = [f"print({i})" for i in range(4000)]
    planted = Planted(dict.fromkeys(scripts, 0.5))
    error = scores(CorruptedWorldModel(planted, Corruption("noise", 0.1), seed=0),
                   [FakeTask(f"t{i % 7}") for i in range(4000)], scripts) - 0.5
    assert abs(error.mean()) < 3 * 0.1 / np.sqrt(4000)
    assert error.std() == pytest.approx(0.1, rel=0.05)


def test_task_offset_shifts_every_script_of_a_task_alike() -> None:
    scripts, base = uniform_scripts(20, 0.3, 0.7)
    planted = Planted(dict(zip(scripts, base)))
    model = CorruptedWorldModel(planted, Corruption("task_offset", 0.15), seed=0)
    offsets = {}
    for name in ("a", "b", "c", "d"):
        shift = scores(model, [FakeTask(name)] * 20, scripts) - base
        np.testing.assert_allclose(shift, shift[0], atol=1e-12)  # one offset per task ...
        assert abs(shift[0]) <= 0.15
        offsets[name] = shift[0]
    assert len({round(v, 9) for v in offsets.values()}) == 4  # ... drawn anew for each task


@pytest.mark.parametrize("kind", ["family_bias", "swap"])
def test_family_corruptions_move_only_their_families(kind: str) -> None:
    # Real quality: knn 0.4 below hist_gb 0.6, the others spread around them.
    base = dict(zip(FAMILIES, [0.2, 0.45, 0.4, 0.35, 0.55, 0.5, 0.6, 0.3]))
    planted = Planted({FAMILY_SCRIPTS[f]: v for f, v in base.items()})
    model = CorruptedWorldModel(planted, Corruption(kind, 0.2), seed=0)
    got = dict(zip(FAMILIES, scores(model, [FakeTask("t")] * len(FAMILIES), [FAMILY_SCRIPTS[f] for f in FAMILIES])))
    moved = {"family_bias": {"constant": 0.2}, "swap": {"knn": 0.2, "hist_gb": -0.2}}[kind]
    for family in FAMILIES:
        assert got[family] == pytest.approx(base[family] + moved.get(family, 0.0)), family
    if kind == "swap":  # two families trade order; every other pair keeps its own
        assert got["knn"] > got["hist_gb"] and base["knn"] < base["hist_gb"]
        others = [f for f in FAMILIES if f not in ("knn", "hist_gb")]
        assert sorted(others, key=got.get) == sorted(others, key=base.get)
    other = CorruptedWorldModel(planted, Corruption("family_bias", 0.2, family="knn"), seed=0)
    assert scores(other, [FakeTask("t")], [FAMILY_SCRIPTS["knn"]])[0] == pytest.approx(0.6)


def test_drift_grows_with_the_step_the_caller_sets() -> None:
    scripts, base = uniform_scripts(21)
    model = CorruptedWorldModel(Planted(dict(zip(scripts, base))), Corruption("drift", 4.0, drift_steps=10))
    tasks = [FakeTask("t")] * 21
    assert model.step == 0
    np.testing.assert_allclose(scores(model, tasks, scripts), base)  # the identity at step 0
    gaps = []
    for step in (3, 6, 10, 30):
        model.step = step
        out = scores(model, tasks, scripts)
        assert np.all(np.diff(out) > 0)  # monotone at every step
        gaps.append(out[-1] - out[-5])  # how much of the top's spacing is left
    assert gaps[0] > gaps[1] > gaps[2] == gaps[3]  # compression grows, then holds at full strength
    np.testing.assert_allclose(out, [saturation(s, 4.0) for s in base])


def test_scores_are_clipped_and_failed_predictions_pass_unchanged() -> None:
    planted = Planted({"low": -0.4, "high": 1.7})
    model = CorruptedWorldModel(planted, Corruption("noise", 0.5), seed=0)
    out = model.predict([FakeTask("t")] * 3, ["low", "high", "unknown"])
    assert 0 <= out[0].score <= 1 and 0 <= out[1].score <= 1
    # repr, not ==: a failed prediction's fields are nan, which Python 3.13's dataclass equality compares unequal
    assert repr(out[2]) == repr(Prediction.failed("unreadable")) and out[0].uncertainty == 0.05


def test_registry_builds_it_and_bad_settings_are_config_errors() -> None:
    planted = Planted({})
    model = make_world_model("corrupted", base=planted, corruption="swap", strength=0.25, seed=2,
                             swap=("linear", "tree"))
    assert isinstance(model, CorruptedWorldModel) and model.corruption.swap == ("linear", "tree")
    assert model.corruption.strength == 0.25 and model.seed == 2 and model.name == "planted+swap"
    assert Corruption("saturate").noise_sd == 0.03 and Corruption("noise", 0.2).noise_sd == 0.2
    for bad in ({"kind": "magic"}, {"kind": "swap", "strength": -1.0}, {"kind": "noise", "noise_sd": 0.1},
                {"kind": "family_bias", "family": "svm"}, {"kind": "swap", "swap": ("knn", "knn")},
                {"kind": "drift", "drift_steps": 0}, {"kind": "saturate", "noise_sd": float("nan")}):
        with pytest.raises(ConfigError):
            Corruption(**bad)
    with pytest.raises(ConfigError, match="corruption="):
        make_world_model("corrupted", base=planted)
