"""The registration check every registered experiment runs before it trains
(:mod:`bench.registration`): the settings block, what differs, and the refusal."""

from __future__ import annotations

import pytest

from bench.registration import check_registration, differing, registered_settings, settings_block

SETTINGS = {"seeds": [0, 1], "steps": 16, "trainer": {"anchor_fraction": 0.1, "fusion_rule": "none"}}


def registration(settings_block: str) -> str:
    return f"# A registration\n\nWords.\n\n```json\n{settings_block}\n```\n\nMore words.\n"


def test_the_registration_passes_exactly_its_own_settings():
    text = registration('{"seeds": [0, 1], "steps": 16,\n "trainer": {"fusion_rule": "none", "anchor_fraction": 0.1}}')
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
    assert registered_settings(registration(block)) == long


def test_differing_names_nested_keys():
    assert differing(SETTINGS, SETTINGS) == []
    assert differing({"a": {"b": 1, "c": [1]}}, {"a": {"b": 1, "c": [2]}, "d": 0}) == ["a.c", "d"]
    assert differing(None, SETTINGS) == ["(all)"]
