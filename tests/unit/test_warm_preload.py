"""What the warm executor preloads: importtime logs parsed, modules chosen, profiles kept per runtime digest."""

from __future__ import annotations

import dataclasses
import json
import logging
from types import SimpleNamespace

import pytest

from wmrl_envs.sandbox import make_executor
from wmrl_envs.sandbox.preload import measure, parse_importtime, preload_modules, save_profile
from wmrl_envs.sandbox.runtime import load_runtime

LOG = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:      2000 |       5000 | site
import time:       300 |        300 |     numpy.core._multiarray_umath
import time:       700 |       1000 |   numpy.core
import time:      1000 |      52000 | numpy
Traceback (most recent call last):
import time:        10 |        900 | narwhals._pandas_like.namespace
"""


def test_only_top_level_imports_count_with_their_cumulative_time():
    assert parse_importtime(LOG) == [("site", 5000), ("numpy", 52000), ("narwhals._pandas_like.namespace", 900)]


def test_measure_keeps_what_most_scripts_import(tmp_path):
    # Trusted one-liners: the unsandboxed executor is enough to read their import times.
    (tmp_path / "public").mkdir()
    task = SimpleNamespace(public_dir=tmp_path / "public", limits=None)
    scripts = ["import json, csv", "import json, decimal", "import json"]
    profile = measure(make_executor("unsafe-subprocess"), [(s, task) for s in scripts], min_share=0.5, min_ms=0.0)
    assert profile["scripts"] == 3
    assert profile["measured"]["json"]["share"] == 1.0
    assert profile["measured"]["csv"]["share"] == pytest.approx(1 / 3)
    assert "json" in profile["modules"]
    assert "csv" not in profile["modules"] and "decimal" not in profile["modules"]


def test_profiles_are_kept_per_runtime_digest(tmp_path, monkeypatch, caplog):
    runtime = dataclasses.replace(load_runtime(), requirements_sha256="a" * 64)
    monkeypatch.setenv("WMRL_ASSETS_DIR", str(tmp_path))  # an empty profiles file to start from
    with caplog.at_level(logging.WARNING):
        assert preload_modules(runtime) == ()
    assert "no preload profile" in caplog.text
    save_profile("a" * 64, {"modules": ["numpy", "pandas"]})
    save_profile("b" * 64, {"modules": ["json"]})
    assert preload_modules(runtime) == ("numpy", "pandas")
    assert set(json.loads((tmp_path / "runtime-preload.json").read_text())) == {"a" * 64, "b" * 64}


def test_the_shipped_profile_matches_the_shipped_runtime():
    # A runtime-requirements.txt change without a new measurement leaves warm runs unpreloaded.
    assert preload_modules(load_runtime()), "measure it: python -m bench.warm_sandbox preload"
