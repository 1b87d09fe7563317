"""The stress replay rebuilds a run's calibrator after every step from the run's record alone."""

import numpy as np
import pytest

from bench import stress_records, stress_replay
from bench.archive import add_run, read_record
from wmrl_envs.calibration import Calibrator, CalibratorConfig

FAMILIES = ("linear", "boosting", "forest", "constant")


def recorded_run(tmp_path, steps: int = 10, per_step: int = 12, biased: str = "constant", debias: bool = True):
    """A record written the way bench/stress.py writes one: a live calibrator fed step by step,
    its logged metrics, then its state, added to a run folder's archive (its path there is
    returned). The ``biased`` family's world-model scores run 0.4 high."""
    rng = np.random.default_rng(0)
    calibrator = Calibrator(CalibratorConfig(debias_flagged_strata=debias))
    history = []
    for _ in range(steps):
        real = rng.uniform(0, 1, per_step)
        strata = rng.choice(FAMILIES, per_step).tolist()
        wm = real + rng.normal(0, 0.05, per_step) + 0.4 * (np.array(strata) == biased)
        wm[:2] = wm[2]  # a script sampled three times: copies of one pair
        real[:2] = real[2]
        strata[:2] = [strata[2]] * 2
        tasks = [f"task{max(i - 2, 0) % 3}" for i in range(per_step)]  # the copies share a task
        calibrator.add_pairs(wm, real, tasks, strata)
        history.append(calibrator.metrics())
    record = {"stratum_z_max": [h.get("calibration/stratum_z_max") for h in history],
              "stratum_check": stress_records.STRATUM_CHECK,
              "global_affine": [h.get("calibration/global_affine") for h in history],
              "pairs_per_step": [h.get("calibration/n_pairs") for h in history],
              "calibrator_state": calibrator.state_dict()}
    path = tmp_path / "runs" / "run.json"
    add_run(path.parent, path.name, record)
    return path, calibrator


def test_the_replay_reads_what_the_run_logged_at_every_step(tmp_path):
    path, live = recorded_run(tmp_path)
    readings = stress_replay.replay(read_record(path))
    assert [r.pairs for r in readings] == [12 * (i + 1) for i in range(10)]
    assert all(r.agrees for r in readings)
    last = {s.name: s for s in readings[-1].strata}
    assert last["constant"].offset > 0.2  # set aside: the audit reads it after the correction
    assert live.debiased_strata == {name: s.offset for name, s in last.items() if s.set_aside}
    # Copies are one pair: three copies a step leave 10 distinct pairs of 120.
    assert sum(s.distinct_pairs for s in last.values()) == 120 - 2 * 10


def test_a_record_that_does_not_match_its_pairs_fails_the_command(tmp_path, capsys):
    path, _ = recorded_run(tmp_path, biased="none", debias=False)
    record = read_record(path)
    logged = next(i for i, z in enumerate(record["stratum_z_max"]) if z is not None)
    record["stratum_z_max"][logged] += 0.5
    add_run(path.parent, path.name, record)
    assert stress_replay.main([str(path)]) == 1
    assert "REPLAY DIFFERS FROM THE RUN" in capsys.readouterr().out


def test_an_old_record_is_refused_with_a_reason(tmp_path, capsys):
    old = tmp_path / "runs" / "old.json"
    add_run(old.parent, old.name, {"anchor_pairs": [[0.5, 0.4]], "stratum_z_max": [None]})
    with pytest.raises(stress_replay.ReplayError, match="no calibrator state"):
        stress_replay.replay(read_record(old))
    assert stress_replay.main([str(old)]) == 1
    assert "cannot replay" in capsys.readouterr().err
    assert stress_replay.main([str(old.with_name("missing.json"))]) == 1  # a run the archive does not hold
    assert "holds no run 'missing.json'" in capsys.readouterr().err


def test_pair_counts_that_do_not_end_at_the_state_are_refused(tmp_path):
    path, _ = recorded_run(tmp_path, steps=3)
    record = read_record(path)
    record["pairs_per_step"][-1] -= 1
    with pytest.raises(stress_replay.ReplayError, match="does not end"):
        stress_replay.replay(record)


def test_steps_an_older_run_logged_from_the_line_are_shown_but_not_compared(tmp_path, capsys):
    """Before the stratum check read a monotone map, a step whose global map was a line logged
    the line's residuals: the replay cannot give them, so such a step is marked, not failed."""
    path, _ = recorded_run(tmp_path, biased="none", debias=False)
    record = read_record(path)
    line_steps = [i for i, line in enumerate(record["global_affine"]) if line == 1.0]
    checked = [i for i in line_steps if record["stratum_z_max"][i] is not None]
    assert checked  # a sound world model whose real score is linear in it: the chosen map is the line
    record["stratum_z_max"][checked[0]] += 0.5
    add_run(path.parent, path.name, record)
    assert stress_replay.main([str(path)]) == 1  # recorded with the monotone check: a real difference
    del record["stratum_check"]
    add_run(path.parent, path.name, record)
    assert stress_replay.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("(logged: the line's)") == len(line_steps)
    readings = stress_replay.replay(record)
    assert [r.step - 1 for r in readings if not r.comparable] == line_steps
