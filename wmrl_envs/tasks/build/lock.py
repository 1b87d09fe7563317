"""The lock of a built-in suite (``assets/suites/<suite>.lock.json``) and the check against it.

The lock records, per task, the sha256 of every generated file, the sample submission's score
and the split sizes, plus the versions of the packages the data came from. Regenerating a suite
and comparing with :func:`compare_with_lock` proves the generator deterministic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError
from wmrl_envs.paths import assets_dir
from wmrl_envs.tasks.suite_def import DATA_PACKAGES, GENERATOR_VERSION, load_suite_def, source_packages

SCORE_RTOL = 1e-9
"""Relative tolerance for comparing a recomputed score with a recorded one.

File checksums must match exactly, but a score is recomputed from those same bytes by NumPy and
scikit-learn, whose summation order (SIMD width, BLAS, thread count) differs between machines:
the same sample submission scored 0.5007421943123576 on one machine and 0.5007421943123574 on
another. 1e-9 absorbs such last-digit noise (a few 1e-16 relative) by a wide margin while still
catching any real change in a grader or in the data, which moves a score far more. The tolerance
is purely relative: a recorded score of exactly 0 must be recomputed as exactly 0.
"""


def lock_file(suite: str) -> Path:
    """Where the suite's lock lives."""
    return assets_dir() / "suites" / f"{suite}.lock.json"


def lock_payload(suite: str, entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The content of ``<suite>.lock.json``: versions, datasets used and per-task hashes and scores."""
    definition = load_suite_def(suite)
    datasets: dict[str, set[str]] = {}
    for task in definition.tasks:
        for ref in filter(None, (task.source, task.test_source)):
            kind, _, name = ref.partition(":")
            datasets.setdefault(kind, set()).add(name)
    return {
        "suite": definition.suite,
        "version": definition.version,
        "generator": GENERATOR_VERSION,
        "packages": {**{p: package_version(p) for p in DATA_PACKAGES},
                     **{p: v for t in definition.tasks for p, v in source_packages(t).items()}},
        "datasets": {kind: sorted(names) for kind, names in sorted(datasets.items())},
        "tasks": {t.id: dict(entries[t.id]) for t in definition.tasks},
    }


def write_lock(suite: str, entries: Mapping[str, Mapping[str, Any]]) -> Path:
    path = lock_file(suite)
    path.write_text(json.dumps(lock_payload(suite, entries), indent=1, sort_keys=False) + "\n")
    return path


def read_lock(suite: str) -> dict[str, Any]:
    path = lock_file(suite)
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; write it with `wmrl tasks build --suite {suite} --write-lock`")
    return json.loads(path.read_text())


def compare_with_lock(suite: str, entries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Differences between freshly generated entries and the recorded lock (empty when they agree).

    File hashes must be identical; sample submission scores agree up to :data:`SCORE_RTOL`.
    """
    locked = read_lock(suite)["tasks"]
    problems = [f"{tid}: not in the lock" for tid in entries if tid not in locked]
    problems += [f"{tid}: in the lock but not generated" for tid in locked if tid not in entries]
    for tid in sorted(set(entries) & set(locked)):
        got, want = entries[tid], locked[tid]
        for name in sorted(set(got["files"]) | set(want["files"])):
            if got["files"].get(name) != want["files"].get(name):
                problems.append(f"{tid}: {name} differs from the lock")
        if not math.isclose(got["sample_submission_score"], want["sample_submission_score"], rel_tol=SCORE_RTOL):
            problems.append(f"{tid}: sample submission scores {got['sample_submission_score']!r}, "
                            f"lock says {want['sample_submission_score']!r}")
    return problems
