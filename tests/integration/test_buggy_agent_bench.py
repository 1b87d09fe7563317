"""bench/buggy_agent.py's per-run function on one step: real sandbox, the real old and new world models."""

from __future__ import annotations

import importlib
import json
from argparse import Namespace
from dataclasses import asdict

import pytest

from bench.archive import add_run
from wmrl_envs.calibration import CalibratorConfig
from wmrl_envs.scoring.fusion import FusionConfig


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("bench.buggy_agent")


def test_one_step_run_records_bugs_and_a_rerun_skips_it(bench, tmp_path, monkeypatch):
    args = bench.parse_args(["--steps", "1", "--tasks-per-step", "2", "--group-size", "2", "--eval-every", "1",
                             "--eval-tasks", "diabetes-progression", "--eval-k", "2", "--train-tasks",
                             "breast-cancer-diagnosis", "biopsy-malignancy", "--workers", "2",
                             "--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs")])
    world_models = bench.load_world_models(args.runs)
    old, proofs, new = world_models["old"], world_models["proofs"], world_models["new"]
    assert old.model.prover is None and old.fingerprint["prove"] is False and not old.fingerprint["status_head"]
    assert proofs.model.prover is not None and proofs.fingerprint == {**old.fingerprint, "prove": True}
    assert new.model.prover is not None and new.fingerprint["prove"] is True
    memo = bench.ExecutionMemo(args.runs / "memo.jsonl")
    tasks = bench.select_tasks(bench.ENV_ID, bench.SUITE, "heldout", args.eval_tasks)
    key = bench.RunKey("world_model", "old", 0)

    result = bench.run_or_load(key, args, memo, tasks, world_models)
    assert [p["step"] for p in result["curve"]] == [0, 1]
    assert all(0.0 <= p["heldout_mean"] <= 1.0 for p in result["curve"])
    assert result["world_model"] == old.fingerprint
    config = json.loads((args.runs / key.name / "config.json").read_text())["family"]
    assert config["policy"] == "grammar-buggy" and config["prove"] is False
    assert config["world_model_path"] == old.path
    train = result["train"]
    assert train["buggy"]["n"] + train["clean"]["n"] == 4 and len(train["bug_share"]) == 1
    assert set(train["operators"]) == set(bench.DEFAULT_BUG_OPERATORS)
    assert result["by_category_cpu_s"]["world_model"] > 0 and result["by_category_cpu_s"]["execution"] == 0
    for part in ("buggy", "clean"):  # every held-out sample scored by every world model
        point = result["curve"][0][part]
        assert point["n"] == 0 or all(point[f"wm_{name}"] is not None for name in world_models)

    def must_not_train(*_):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(bench, "train_run", must_not_train)
    assert bench.run_or_load(key, args, memo, tasks, world_models) == result
    # A run whose world model changed since is stale: it trains again.
    monkeypatch.setattr(bench, "train_run", lambda *_: {**result, "world_model": old.fingerprint, "retrained": True})
    stale = {**result, "world_model": {**old.fingerprint, "artefact_sha256": "0" * 64}}
    add_run(args.results, f"{key.name}.json", stale)
    assert bench.run_or_load(key, args, memo, tasks, world_models)["retrained"]
    # So is one whose ledger did not charge memoized replays (made before stress.ExecutionMemo marked them).
    uncharged = {k: v for k, v in result.items() if k != "memo_replays_charged"}
    add_run(args.results, f"{key.name}.json", uncharged)
    assert bench.run_or_load(key, args, memo, tasks, world_models)["retrained"]
    # A world_model run applies no corrections; a wmrl run is stale under other ones than the
    # defaults apply now, or unrecorded ones (it predates recording them).
    assert result["corrections"] is None and bench.stale_reason(result, args, world_models) is None
    assert result["provenance"]["arithmetic"] in ("x86-64-v3", "native")
    wanted = {"fusion_rule": FusionConfig().rule, "calibration_global_form": CalibratorConfig().global_form}
    wmrl_key, args = bench.RunKey("wmrl", "old", 0), Namespace(**{**vars(args), "steps": 3})  # past the warmup
    assert bench.corrections(bench.run_config(wmrl_key, args, old)) == wanted
    wmrl = {**result, "key": asdict(wmrl_key), "corrections": wanted}
    assert bench.stale_reason(wmrl, args, world_models) is None
    assert "'eta2'" in bench.stale_reason({**wmrl, "corrections": {**wanted, "fusion_rule": "eta2"}}, args, world_models)
    unrecorded = {k: v for k, v in wmrl.items() if k != "corrections"}
    assert "not recorded" in bench.stale_reason(unrecorded, args, world_models)


def test_a_replayed_execution_is_charged_like_the_run_it_replays(bench, tmp_path):
    from trainers.families.code import charge
    from trainers.ledger import ComputeLedger
    from wmrl_envs.scoring import ScoredGroup, ScoreResult

    memo = bench.ExecutionMemo(tmp_path / "memo.jsonl")
    run = ScoreResult(task_id="t", stream="real", real_score=0.4, valid=True, status="valid", executed=True,
                      cost={"execution_s": 2.0, "execution_cpu_s": 1.5, "world_model_s": 0.0})
    memo.store("t:abc", run)
    replay = ScoreResult(task_id="t", stream="real")
    bench.ExecutionMemo(tmp_path / "memo.jsonl").restore("t:abc", replay)
    ledgers = [ComputeLedger(), ComputeLedger()]
    for ledger, sample in zip(ledgers, (run, replay)):
        charge(ledger, [ScoredGroup("t", 0, "real", [sample])])
    assert ledgers[0].totals["execution"].cpu_s == ledgers[1].totals["execution"].cpu_s == 1.5


def test_a_memo_made_with_another_arithmetic_is_refused(bench, tmp_path):
    """Replaying scores measured with other kernels would mix two arithmetics in one grid."""
    from wmrl_envs.sandbox.arithmetic import NATIVE, PORTABLE
    from wmrl_envs.scoring import ScoreResult

    path = tmp_path / "memo.jsonl"
    memo = bench.ExecutionMemo(path)
    memo.store("t:abc", ScoreResult(task_id="t", stream="real", real_score=0.4, valid=True, status="valid",
                                    executed=True, cost={"execution_s": 2.0, "execution_cpu_s": 1.5}))
    assert json.loads(path.read_text())["arithmetic"] == memo.arithmetic
    assert bench.ExecutionMemo(path).entries.keys() == {"t:abc"}
    another = NATIVE if memo.arithmetic == PORTABLE else PORTABLE
    for other in ({"arithmetic": another}, {}):  # another host's arithmetic; a memo from before the pin
        entry = {k: v for k, v in json.loads(path.read_text()).items() if k != "arithmetic"}
        path.write_text(json.dumps({**entry, **other}) + "\n")
        with pytest.raises(SystemExit, match="line 1: an execution run with .* arithmetic"):
            bench.ExecutionMemo(path)

