"""The stress bench's naming of candidates: a run's settings and its label follow its variant."""

import argparse

import pytest

from bench import stress, stress_records
from bench.archive import add_run
from trainers.wmrl_config import WMRLConfig


def key(variant: str) -> stress.RunKey:
    return stress.RunKey("family_bias", 0.5, "wmrl", "std", False, 0, variant)


def test_a_joined_variant_applies_every_setting_and_names_its_rule():
    joined = key("calibration_stratify=true+fusion_rule=none")
    assert joined.overrides() == {"calibration_stratify": True, "fusion_rule": "none"}
    assert stress.mode_label("wmrl", joined.variant) == "wmrl-stratified (none rule)"
    # Its file cannot be mistaken for the screen's stratified runs under the eta2 rule.
    assert joined.name != key("calibration_stratify=true").name


def test_weight_sweeps_study_the_eta2_rule_whatever_the_default():
    assert key("fusion_w_max=2").overrides() == {"fusion_w_max": 2.0, "fusion_rule": "eta2"}
    assert key("c_rule=inverse_eta2").overrides() == {"fusion_rule": "eta2"}
    assert key("").overrides() == {}


def test_a_run_of_a_former_default_is_reported_under_the_correction_it_ran_with():
    result = {"key": {"mode": "wmrl", "variant": "calibration_stratify=true"}, "fusion_rule": "eta2",
              "calibration_stratify": True, "calibration_global_form": stress_records.DEFAULT_GLOBAL_FORM}
    assert stress_records.as_recorded(result)["key"]["variant"] == "calibration_stratify=true+fusion_rule=eta2"
    joined = {"key": {"mode": "wmrl", "variant": "calibration_stratify=true+fusion_rule=none"},
              "fusion_rule": "none", "calibration_stratify": True, "calibration_global_form": stress_records.DEFAULT_GLOBAL_FORM}
    assert stress_records.as_recorded(joined) == joined


def test_a_default_run_made_before_a_switch_became_default_keeps_its_own_name(monkeypatch):
    monkeypatch.setitem(stress_records.DEFAULT_SWITCHES, "calibration_debias_flagged_strata", True)
    unrecorded = {"key": {"mode": "wmrl", "variant": ""}, "fusion_rule": stress_records.DEFAULT_RULE,
                  "calibration_global_form": stress_records.DEFAULT_GLOBAL_FORM}
    assert stress_records.as_recorded(unrecorded)["key"]["variant"] == "calibration_debias_flagged_strata=false"
    recorded_on = {**unrecorded, "calibration_debias_flagged_strata": True}
    assert stress_records.as_recorded(recorded_on) == recorded_on


def test_a_default_run_of_the_isotonic_days_is_reported_under_its_map_form(monkeypatch):
    monkeypatch.setattr(stress_records, "DEFAULT_GLOBAL_FORM", "chosen")
    before = {"key": {"mode": "wmrl", "variant": ""}, "fusion_rule": stress_records.DEFAULT_RULE}  # no form recorded
    assert stress_records.as_recorded(before)["key"]["variant"] == "calibration_global_form=isotonic"
    now = {**before, "calibration_global_form": "chosen"}
    assert stress_records.as_recorded(now) == now
    switched = {"key": {"mode": "wmrl", "variant": "calibration_debias_flagged_strata=true"},
                "fusion_rule": stress_records.DEFAULT_RULE}  # a candidate of the isotonic days
    assert stress_records.as_recorded(switched)["key"]["variant"] == (
        "calibration_debias_flagged_strata=true+calibration_global_form=isotonic")


def test_a_rule_candidate_of_the_isotonic_days_is_reported_under_its_map_form(monkeypatch):
    monkeypatch.setattr(stress_records, "DEFAULT_GLOBAL_FORM", "chosen")
    before = {"key": {"mode": "wmrl", "variant": "fusion_rule=eta2"}, "fusion_rule": "eta2"}  # no form recorded
    relabelled = stress_records.as_recorded(before)["key"]["variant"]
    assert relabelled == "fusion_rule=eta2+calibration_global_form=isotonic"
    assert stress.mode_label("wmrl", relabelled) == "wmrl-eta2 (isotonic map)"
    # A run asked for by that joined name keeps it, so the two share one label.
    explicit = {"key": {"mode": "wmrl", "variant": relabelled}, "fusion_rule": "eta2",
                "calibration_global_form": "isotonic"}
    assert stress_records.as_recorded(explicit) == explicit
    # A preset fixes its own map form.
    preset = {"key": {"mode": "wmrl", "variant": "preset=paper"}, "fusion_rule": "paper"}
    assert stress_records.as_recorded(preset) == preset


def test_a_candidate_that_became_the_default_is_reported_as_the_default(monkeypatch, capsys):
    monkeypatch.setattr(stress_records, "DEFAULT_GLOBAL_FORM", "chosen")
    candidate = {"key": {"mode": "wmrl", "variant": "calibration_global_form=chosen"}, "fusion_rule": stress_records.DEFAULT_RULE,
                 "calibration_global_form": "chosen"}
    assert stress_records.as_recorded(candidate)["key"]["variant"] == ""
    joined = {**candidate, "key": {"mode": "wmrl", "variant": "calibration_global_form=chosen+fusion_rule=eta2"},
              "fusion_rule": "eta2"}
    assert stress_records.as_recorded(joined) == joined  # not the default: it keeps the name it ran under
    # Asked for again it would be a second default run of each seed: refused, except to report old runs.
    with pytest.raises(SystemExit):
        stress.parse_args(["--corrections", "--sweep", "calibration_global_form=chosen"])
    assert "it is the default run" in capsys.readouterr().err
    assert stress.parse_args(["--corrections", "--report", "--sweep", "calibration_global_form=chosen"]).report


def test_pooled_folders_are_separate_draws_and_one_folder_holds_a_run_once(tmp_path, capsys):
    settings = {"steps": 1, "tasks_per_step": 2, "group_size": 2, "pair_window": None}
    record = lambda seed, variant="": {"key": {"corruption": "none", "strength": None, "mode": "wmrl",  # noqa: E731
                                               "advantage": "std", "adaptive": False, "seed": seed, "variant": variant},
                                       "settings": settings, "fusion_rule": stress_records.DEFAULT_RULE,
                                       "calibration_global_form": stress_records.DEFAULT_GLOBAL_FORM,
                                       "curve": [{"step": 0, "compute_cpu_s": 0.0, "heldout_mean": 0.5,
                                                  "heldout_se": 0.1}],
                                       "compute_cpu_s": 1.0, "audit_flagged_at_pairs": None,
                                       "final_anchor_fraction": 0.1, "pairs_per_step": [2.0]}
    for folder, seeds in (("a", (13, 14)), ("b", (13, 15))):
        for seed in seeds:
            add_run(tmp_path / folder, f"run{seed}.json", record(seed))
    pooled = stress.pooled_runs([tmp_path / "a", tmp_path / "b"], settings, [13, 14])
    assert sorted(r["key"]["seed"] for r in pooled) == [1013, 1014, 2013]  # seed 15 was not asked for
    args = argparse.Namespace(corruptions=[("none", None)], advantages=["std"])
    row = stress.summarise(pooled, args)[0]
    assert sorted(row["seeds"]) == [1013, 1014, 2013]
    # Runs made before scripts were counted: one executed script per calibrator pair, of 1 x 2 x 2.
    assert row["executed_share"] == 0.5 and not row["executed_share_counted"]
    # A default run, and a candidate that named today's default, of one seed in one folder: refused.
    twice = [stress_records.as_recorded(record(13)), stress_records.as_recorded(record(13, "calibration_global_form=chosen"))]
    with pytest.raises(SystemExit, match="two runs of wmrl on none, seed 13"):
        stress.summarise(twice, args)


def test_a_label_names_the_first_setting_and_brackets_the_rest():
    assert stress.mode_label("wmrl", "") == "wmrl"
    assert stress.mode_label("wmrl", "preset=paper") == "wmrl-paper-preset"
    assert stress.mode_label("wmrl", "calibration_global_form=chosen") == "wmrl (chosen map)"
    assert stress.mode_label("wmrl", "calibration_stratify=true+calibration_global_form=isotonic+fusion_rule=eta2") \
        == "wmrl-stratified (isotonic map, eta2 rule)"
    assert stress.mode_label("wmrl", "fusion_w_max=8+fusion_rule=eta2") == "wmrl (fusion_w_max=8, eta2 rule)"


def test_the_sweep_refuses_an_unknown_setting_in_a_joined_variant(capsys):
    with pytest.raises(SystemExit):
        stress.parse_args(["--corrections", "--sweep", "calibration_stratify=true+bogus=1"])
    assert "bogus=1" in capsys.readouterr().err


def test_the_flagged_strata_candidate_is_a_switch_with_a_mode_of_its_own(capsys):
    flagged = key("calibration_debias_flagged_strata=true")
    assert flagged.overrides() == {"calibration_debias_flagged_strata": True}
    assert stress.mode_label("wmrl", flagged.variant) == "wmrl-flagged-strata"
    assert WMRLConfig.from_flat(**flagged.overrides()).calibration.debias_flagged_strata is True
    with pytest.raises(SystemExit):
        stress.parse_args(["--corrections", "--sweep", "calibration_debias_flagged_strata=yes"])
    assert "'true' or 'false'" in capsys.readouterr().err


def test_the_acceptance_judges_the_candidate_it_is_given():
    def row(mode, variant, finals, z=None):
        return {"corruption": "family_bias", "mode": mode, "variant": variant, "adaptive": False,
                "finals_by_seed": dict(enumerate(finals)), "last_stratum_z_by_seed": [z] * len(finals),
                "speedup_vs_real": None}
    rows = [row("real", "", [0.60, 0.62, 0.64]), row("world_model", "", [0.30, 0.35, 0.40]),
            row("wmrl", "", [0.61, 0.63, 0.62], z=9.0),
            row("wmrl", "calibration_debias_flagged_strata=true", [0.60, 0.64, 0.63], z=1.0)]
    default, _ = stress.acceptance(rows, 3.5)
    candidate, table = stress.acceptance(rows, 3.5, "calibration_debias_flagged_strata=true")
    assert not default[0]["holds_scores"] and candidate[0]["holds_scores"]  # the stratum alarm decides
    assert candidate[0]["wmrl"] == pytest.approx((0.60 + 0.64 + 0.63) / 3)
    assert "`wmrl-flagged-strata`" in table
    # A report reads it for every correction its runs hold, whatever the sweep asked for.
    checks, md = stress.acceptance_sections(rows, 3.5)
    assert list(checks) == ["default", "calibration_debias_flagged_strata=true"]
    assert "`wmrl` (the default)" in md and "`wmrl-flagged-strata`:" in md


def test_the_speedup_reads_real_on_the_rows_own_seeds():
    def run(seed, scores, compute):
        return {"key": {"seed": seed}, "curve": [{"step": i, "compute_cpu_s": c, "heldout_mean": s, "heldout_se": 0.0}
                                                 for i, (s, c) in enumerate(zip(scores, compute))]}
    real = [run(1, [0.2, 0.6, 0.6], [0, 100, 200]), run(2, [0.2, 0.8, 0.4], [0, 100, 200])]
    assert stress.real_target(real, {1}) == (pytest.approx(0.6), pytest.approx(100.0))
    # Both seeds: the mean curve 0.2, 0.7, 0.5 reaches its final 0.5 at 60% of the first step's compute.
    assert stress.real_target(real, {1, 2}) == (pytest.approx(0.5), pytest.approx(60.0))
    # A seed real never ran: real's curve over every run it has.
    assert stress.real_target(real, {1, 3}) == stress.real_target(real, {1, 2})
    assert stress.real_target([], {1}) == (None, None)


def test_issue_46s_acceptance_reads_each_registered_point_per_row_and_schedule():
    def row(variant, share, ratio, diff, mae, coverage, bounded, by_seed):
        return {"corruption": "none", "mode": "wmrl", "variant": variant, "seeds": [40, 41], "executed_share": share,
                "compute_ratio": {"point": ratio, "lo": ratio - 1, "hi": ratio + 1},
                "score_difference": {"point": diff, "lo": diff - 0.05, "hi": diff + 0.05},
                "fresh_pairs": {"pairs": 96, "mae": mae, "bounded": bounded, "coverage": coverage},
                "fresh_mae_by_seed": by_seed}

    rows = [row("", 0.104, 6.5, -0.02, 0.15, 0.90, 80, {40: 0.14, 41: 0.16}),
            row(stress.INFORMED, 0.104, 5.9, 0.01, 0.16, 0.95, 30, {40: 0.15, 41: 0.17})]
    checks, md = stress.anchors_acceptance(rows)
    hashed, informed = checks
    assert (hashed["share_ok"], hashed["saving_ok"], hashed["mae_ok"], hashed["coverage_ok"]) == (True, True, None, True)
    # 5.9x misses the ratio; a higher MAE than hash's misses point 3; 30 bounded pairs are too few to judge.
    assert (informed["saving_ok"], informed["mae_ok"], informed["coverage_ok"]) == (False, False, None)
    assert "paired − hash +0.010 (SE 0.000)" in md and "unjudged" in md
    # The second registered grid reads its own informed variant, per cost, by the same points.
    per_cost = stress.INFORMED_VARIANT["anchors_per_cost"]
    checks, md = stress.anchors_acceptance([rows[0], {**rows[1], "variant": per_cost}], per_cost)
    assert [c["anchors"] for c in checks] == ["hash", "informed per cost"] and checks[1]["mae_ok"] is False
    assert "| none | informed per cost |" in md
    assert stress.PRESETS["anchors_per_cost"]["seeds"] == [45, 46, 47, 48, 49]


def test_an_asynchronous_run_records_a_training_wall_only_where_no_evaluation_hid_its_anchors():
    history = [{"time/step_s": 2.0}, {"time/step_s": 3.0}]
    # Synchronous: whatever the evaluations, the steps hold every execution.
    assert stress.training_wall(history, max_staleness=0, eval_every=4, steps=12) == {"train_wall_s": 5.0}
    # Asynchronous with an evaluation mid-run: anchors ran during it, in time no step counts.
    assert stress.training_wall(history, max_staleness=2, eval_every=4, steps=12) == {}
    # Evaluated at the start and the end only: the last step lands every anchor, the sum is the wall.
    assert stress.training_wall(history, max_staleness=2, eval_every=12, steps=12) == {"train_wall_s": 5.0}
    args = stress.parse_args(["--async"])
    assert args.eval_every == args.steps == 12 and args.fresh_executions
