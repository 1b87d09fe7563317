"""The verl integration, checked inside verl's own virtualenv.

verl 0.9.1 pins transformers<5.11 and cannot share this environment, so this module runs
``scripts/setup_verl.sh`` (idempotent: a few seconds once built; the first build takes minutes,
see its header), then runs ``tests/integration/verl_checks.py`` with that venv's pytest once and
reports each of its checks here by name. A check that fails, errors or is skipped there fails here.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[2]
CHECKS = "tests/integration/verl_checks.py"
EXPECTED = [
    "test_example_keys_resolve_to_the_integration",
    "test_external_modules_variable_registers_both_names_on_import_verl",
    "test_settings_reject_unknown_keys",
    "test_reward_worker_scores_a_uid_group_through_the_fused_core",
    "test_with_async_anchors_a_world_model_sample_is_answered_while_its_batchs_anchors_run",
    "test_held_out_tasks_are_always_executed",
    "test_estimator_equals_verl_grpo_without_anchors[True]",
    "test_estimator_equals_verl_grpo_without_anchors[False]",
    "test_estimator_weights_anchor_rows_only",
    "test_estimator_drops_infrastructure_failures",
    "test_registered_estimator_is_the_configured_core",
    "test_reward_workers_share_the_experience_of_the_calibrator_actor",
]


@pytest.fixture(scope="module")
def verl_python() -> str:
    setup = subprocess.run(["bash", "scripts/setup_verl.sh"], cwd=ROOT, capture_output=True, text=True, timeout=3600,
                           check=False)
    assert setup.returncode == 0, f"scripts/setup_verl.sh failed:\n{setup.stderr[-4000:]}"
    return setup.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def outcomes(verl_python, tmp_path_factory) -> dict[str, str]:
    """Each check's outcome in verl's venv: "passed", or the failure's text."""
    report = tmp_path_factory.mktemp("verl") / "checks.xml"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    run = subprocess.run([verl_python, "-m", "pytest", CHECKS, "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert report.is_file(), f"verl's pytest wrote no report (exit {run.returncode}):\n{run.stdout[-4000:]}{run.stderr[-4000:]}"
    results = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        results[case.get("name")] = "passed" if problem is None else f"{problem.tag}: {problem.get('message')}\n{problem.text}"
    return results


def test_every_check_ran(outcomes):
    assert sorted(outcomes) == sorted(EXPECTED)


@pytest.mark.parametrize("check", EXPECTED)
def test_check(outcomes, check):
    assert outcomes.get(check) == "passed", outcomes.get(check, "did not run")
