"""End-to-end smoke run of `wmrl train` with a tiny budget: real sandbox, real world model, real eval."""

from __future__ import annotations

import csv
import gc
import json

import torch

from trainers.cli import main
from trainers.policies import load_run_policy, make_policy
from trainers.wmrl import WMRLTrainer


def test_wmrl_train_smoke(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    frozen = []
    train = WMRLTrainer.train
    monkeypatch.setattr(WMRLTrainer, "train", lambda self, *a, **k: frozen.append(gc.get_freeze_count()) or train(self, *a, **k))
    code = main(["train", "--mode", "wmrl", "--steps", "3", "--tasks-per-step", "2",
                 "--group-size", "2", "--warmup-steps", "1", "--tasks", "wine-cultivar", "auto-fuel-economy",
                 "--eval-k", "1", "--eval-tasks", "glass-identification", "--output-dir", str(out),
                 "--no-tensorboard", "--seed", "0"])
    assert code == 0
    assert frozen[0] > 1000 and gc.get_freeze_count() == 0  # trained with the heap of its start frozen, then thawed
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert len(rows) == 3
    assert {"reward/mean", "calibration/n_pairs", "fusion/w_anchor", "cost/execution_s"} <= set(rows[0])
    assert float(rows[-1]["calibration/n_pairs"]) > 0  # anchors were executed and paired
    results = json.loads((out / "results.json").read_text())
    assert [r["policy"] for r in results["reports"]] == ["untrained", "trained (wmrl)"]
    assert all(0.0 <= r["summary"]["score_mean"] <= 1.0 for r in results["reports"])  # real scores, not NaN
    assert results["meta"]["ledger"]["totals"]["execution"]["count"] > 0
    assert (out / "results.md").exists() and (out / "checkpoint.pt").exists()
    assert "Held-out evaluation" in capsys.readouterr().out
    trained, untrained = load_run_policy(out).state_dict(), make_policy("grammar", seed=0).state_dict()
    assert any(not torch.equal(trained[k], untrained[k]) for k in trained)


def test_train_reports_a_bad_group_setting_in_one_line(tmp_path, capsys):
    code = main(["train", "--anchor-fraction", "0", "--output-dir", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "anchor_fraction must be in (0, 1]" in err and "Traceback" not in err
    code = main(["train", "--calibration-min-pairs-global", "1", "--output-dir", str(tmp_path / "x")])
    assert code == 2 and "min_pairs_global must be >= 2" in capsys.readouterr().err


def test_task_lists_use_one_flag_and_the_old_one_still_works(capsys):
    from trainers.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["train", "--tasks", "a", "b"]).task_ids == ["a", "b"]
    assert parser.parse_args(["eval", "--tasks", "a"]).tasks == ["a"]
    assert parser.parse_args(["train", "--task-ids", "a"]).task_ids == ["a"]
    assert "--task-ids is deprecated" in capsys.readouterr().err
