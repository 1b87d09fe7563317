"""The paper-scale projection of ``bench/libero_throughput.py`` from measured rates."""

from __future__ import annotations

import importlib

import pytest


@pytest.fixture(scope="module")
def throughput():
    return importlib.import_module("bench.libero_throughput")


def row(backend: str, workers: int, rate: float, cpu: float) -> dict:
    return {"backend": backend, "workers": workers, "episodes_per_s": rate, "cpu_s_per_episode": cpu}


def test_the_projection_scales_one_workers_rate_by_the_measured_efficiency(throughput):
    rows = [row("inline", 1, 2.2, 9.0), row("local", 1, 2.0, 10.0), row("local", 2, 3.0, 11.0), row("ray", 2, 3.2, 10.0)]
    p = throughput.projection(rows, episodes=128, cluster_workers=64, updates=2000)
    assert p["scaling_efficiency"] == pytest.approx(0.75) and p["efficiency_from_workers"] == 2
    assert p["update_wall_s"] == pytest.approx(128 / (64 * 2.0 * 0.75))
    assert p["cpu_s_per_episode"] == pytest.approx(10.0) and p["update_cpu_s"] == pytest.approx(1280.0)
    assert p["total_wall_h"] == pytest.approx(2000 * p["update_wall_s"] / 3600)
    assert p["total_cpu_h"] == pytest.approx(2000 * 1280.0 / 3600)
    with pytest.raises(SystemExit, match="1-worker"):
        throughput.projection([row("local", 2, 3.0, 1.0)], 128, 64, 2000)
