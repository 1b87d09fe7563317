"""The registration check every registered experiment runs before it trains
(:mod:`bench.registration`): the settings block, what differs, and the refusal."""

from __future__ import annotations

import pytest

from bench.archive import read_runs
from bench.registration import (
    check_registration,
    differing,
    failed_name,
    registered_settings,
    run_registered,
    settings_block,
)

SETTINGS = {"seeds": [0, 1], "steps": 16, "trainer": {"anchor_fraction": 0.1, "fusion_rule": "none"}}


def registration_text(settings_block: str) -> str:
    return f"# A registration\n\nWords.\n\n```json\n{settings_block}\n```\n\nMore words.\n"


def test_the_registration_passes_exactly_its_own_settings():
    text = registration_text('{"seeds": [0, 1], "steps": 16,\n "trainer": {"fusion_rule": "none", "anchor_fraction": 0.1}}')
    assert registered_settings(text) == SETTINGS
    check_registration(text, SETTINGS)
    with pytest.raises(SystemExit, match=r"trainer\.anchor_fraction"):
        check_registration(text, {**SETTINGS, "trainer": {"anchor_fraction": 0.2, "fusion_rule": "none"}})
    with pytest.raises(SystemExit, match="steps"):
        check_registration(text, {**SETTINGS, "steps": 2})
    with pytest.raises(SystemExit, match="eval_k"):
        check_registration(text, {**SETTINGS, "eval_k": 4})  # a setting the registration does not fix
    with pytest.raises(SystemExit, match="no ```json block"):
        registered_settings("# A registration without settings\n")


def test_the_printed_settings_block_reads_back_as_the_settings():
    long = {**SETTINGS, "trainer": {f"knob_{i}": i / 10 for i in range(12)}, "tasks": {"train": ["a"], "heldout": ["b"]}}
    block = settings_block(long)
    assert '\n  "knob_3": 0.3,\n' in block  # a long mapping a key a line
    assert registered_settings(registration_text(block)) == long


def test_differing_names_nested_keys():
    assert differing(SETTINGS, SETTINGS) == []
    assert differing({"a": {"b": 1, "c": [1]}}, {"a": {"b": 1, "c": [2]}, "d": 0}) == ["a.c", "d"]
    assert differing(None, SETTINGS) == ["(all)"]


# ------------------------------------------------------------------ the run loop
def test_run_registered_runs_what_is_missing_keeps_failures_and_refuses_other_settings(tmp_path):
    registration, runs, scratch = tmp_path / "x_registration.md", tmp_path / "x", tmp_path / "scratch"
    made, prepared = [], []

    def run_one(name, memo, current):
        made.append(name)
        if name == "b.json" and made.count("b.json") == 1:
            raise RuntimeError("the sandbox stopped")
        return {"settings": current, "final_heldout": 0.5, "wall_s": 60.0}

    def go(settings=SETTINGS, **options):
        return run_registered(registration, runs, scratch, ["a.json", "b.json"], lambda: settings,
                              lambda: prepared.append(1), run_one, **options)

    with pytest.raises(SystemExit, match="is missing"):
        go()
    registration.write_text(registration_text(settings_block(SETTINGS)))
    with pytest.raises(RuntimeError, match="the sandbox stopped"):
        go(keep_failures=True)
    archived = read_runs(runs)
    assert sorted(archived) == ["a.json", "failed/b-1.json"]
    assert archived["failed/b-1.json"]["error"] == "RuntimeError: the sandbox stopped"
    assert go(keep_failures=True) == SETTINGS  # only b runs again
    assert made == ["a.json", "b.json", "b.json"] and sorted(read_runs(runs)) == ["a.json", "b.json", "failed/b-1.json"]
    assert failed_name("b.json", read_runs(runs)) == "failed/b-2.json"
    assert go(report_only=True) == SETTINGS and len(made) == 3
    with pytest.raises(SystemExit, match="steps"):
        go(settings={**SETTINGS, "steps": 2})
