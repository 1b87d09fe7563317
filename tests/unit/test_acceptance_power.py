"""bench/acceptance_power.py: the issue's clause and the resampling that reads it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.acceptance_power import load_finals, main, margin_rule, one_se_rule, pass_rate
from bench.archive import add_run


def test_the_one_se_clause_fails_an_equal_method_about_one_time_in_six() -> None:
    rng = np.random.default_rng(0)
    x, baseline = rng.normal(0.6, 0.1, (20000, 5)), rng.normal(0.6, 0.1, (20000, 5))
    assert one_se_rule(x, baseline).mean() == pytest.approx(0.83, abs=0.02)
    assert one_se_rule(x + 0.3, baseline).mean() > 0.99  # far better: always passes
    # The margin rule's bound tightens with seeds: an equal method passes it more often.
    wide, narrow = (rng.normal(0.6, 0.1, (20000, n)) for n in (5, 40))
    rule = margin_rule(0.05, 1.28)
    assert rule(narrow, rng.normal(0.6, 0.1, (20000, 40))).mean() > rule(wide, baseline).mean() + 0.3


def test_pass_rate_reads_every_clause_and_shares_one_real_draw() -> None:
    rng = np.random.default_rng(1)
    real = np.array([0.4, 0.5, 0.6, 0.7])
    rates = pass_rate({"r": real + 1.0}, real, {"r": real}, n=5, draws=2000, rule=one_se_rule, rng=rng)
    assert rates == {"r vs real": 1.0, "r vs world_model": 1.0, "all": 1.0}
    rates = pass_rate({"r": real - 1.0}, real, {"r": real}, n=5, draws=2000, rule=one_se_rule, rng=rng)
    assert rates["all"] == 0.0


def _record(folder: Path, corruption: str, strength, mode: str, seed: int, final: float, variant: str = "") -> None:
    key = {"corruption": corruption, "strength": strength, "mode": mode, "advantage": "std", "adaptive": False,
           "seed": seed, "variant": variant}
    add_run(folder, f"{corruption}-{mode}-{variant}-{seed}.json", {"key": key, "curve": [{"heldout_mean": final}]})


def test_finals_skip_variants_and_refuse_a_seed_that_ends_twice_differently(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for seed, final in ((3, 0.5), (4, 0.6)):
        _record(runs, "any", None, "real", seed, final)
        _record(runs, "none", None, "world_model", seed, final + 0.1)
        _record(runs, "none", None, "wmrl", seed, final, variant="calibration_global_form=isotonic")
        _record(runs, "none", None, "wmrl", seed, 0.0, variant="fusion_rule=eta2")
    finals = load_finals([runs], [3, 4])
    assert finals[("none", "wmrl")] == {3: 0.5, 4: 0.6} and finals[("any", "real")] == {3: 0.5, 4: 0.6}
    other = tmp_path / "other"
    _record(other, "none", None, "wmrl", 3, 0.9)  # a default run of the isotonic days, as recorded then
    with pytest.raises(ValueError, match="seed 3 ends at 0.9"):
        load_finals([runs, other], [3, 4])


def test_main_writes_the_tables(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for seed, final in enumerate((0.5, 0.6, 0.7)):
        _record(runs, "any", None, "real", seed, final)
        _record(runs, "none", None, "world_model", seed, final)
        _record(runs, "none", None, "wmrl", seed, final, variant="calibration_global_form=isotonic")
    main(["--runs", str(runs), "--seeds", "0", "1", "2", "--n", "5", "--draws", "200",
          "--name", str(tmp_path / "power")])
    text = (tmp_path / "power.md").read_text()
    assert "| clean | 0.600 ± 0.058 (3) |" in text and "1 SE (the issue's), n=5" in text
    assert json.loads((tmp_path / "power.json").read_text())["pass_rates"]
