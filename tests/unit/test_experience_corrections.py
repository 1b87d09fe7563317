"""The reading of corrections from earlier anchors (``bench/experience_corrections.py``): prequential,
shrunk, and by the level asked for."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.experience_corrections import corrected


def test_an_anchor_moves_by_the_shrunk_mean_residual_of_earlier_steps_at_its_level_only():
    frame = pd.DataFrame({"step": [0, 0, 1, 1, 2], "group_id": [0, 1, 2, 3, 4],
                          "task_id": ["a", "b", "a", "b", "a"], "stratum": ["tree", "tree", "linear", "tree", "tree"],
                          "raw": [0.5, 0.5, 0.5, 0.5, 0.5], "real": [0.9, 0.1, 0.7, 0.3, 0.5]})
    by_task = corrected(frame, ("task_id",), k=1.0)
    assert by_task[:2].tolist() == [0.5, 0.5]  # step 0 has no earlier anchor
    assert by_task[2] == pytest.approx(0.5 + 1 / 2 * 0.4)  # task a's step-0 residual, one pair shrunk by k = 1
    assert by_task[3] == pytest.approx(0.5 + 1 / 2 * -0.4)
    assert by_task[4] == pytest.approx(0.5 + 2 / 3 * (0.4 + 0.2) / 2)  # task a's two earlier residuals, not its own
    by_both = corrected(frame, ("task_id", "stratum"), k=1.0)
    assert by_both[2] == 0.5  # no earlier linear anchor on task a
    assert by_both[4] == pytest.approx(0.5 + 1 / 2 * 0.4)  # only task a's earlier tree anchor
