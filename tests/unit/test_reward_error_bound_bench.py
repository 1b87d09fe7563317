"""The bound's coverage bench (bench/reward_error_bound.py) on one small setting: it runs the real
scoring core over executed corpus rows and reads coverage as the report says."""

from __future__ import annotations

import math

import numpy as np

from bench.corpus_rows import load_rows, predictions
from bench.reward_error_bound import CHECKPOINTS, coverage, make_core, one_draw
from wmrl_envs.world_models import make_world_model


def test_one_draw_reads_coverage_at_every_checkpoint_and_an_empty_core_claims_nothing():
    rows = load_rows("mle")
    pred = predictions(make_world_model("surrogate"), rows)
    bound, share = coverage(make_core(), pred, rows, np.arange(rows.real.size))
    assert bound == math.inf and share == 1.0  # no anchors: no finite bound, nothing to miss
    out = one_draw(pred, rows, draw=0, group_size=4)
    assert sorted(out) == list(CHECKPOINTS)
    for n in CHECKPOINTS:
        bound, share = out[n]
        assert math.isfinite(bound) and 0 < bound < 1 and 0.5 < share <= 1.0
