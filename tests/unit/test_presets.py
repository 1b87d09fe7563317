"""Named presets of ``wmrl train``: real settings, overridable, valid."""

import dataclasses

import pytest

from trainers.cli import build_parser
from trainers.wmrl_config import GROUPS, PRESET_DEVIATIONS, PRESETS, WMRLConfig, flat_fields


def config_of(argv: list[str], preset: str | None) -> WMRLConfig:
    args = build_parser(preset).parse_args(argv)
    names = set(flat_fields()) | {f.name for f in dataclasses.fields(WMRLConfig) if f.name not in GROUPS}
    return WMRLConfig.from_flat(**{k: v for k, v in vars(args).items() if k in names})


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_names_real_settings_validates_and_says_what_it_leaves_out(name):
    assert set(PRESETS[name]) <= set(flat_fields()) | {"steps", "seed", "mode"}
    config = config_of(["train", "--preset", name], name)
    flat = {**{f"{'' if g in ('family', 'schedule', 'loss') else g + '_'}{k}": v
               for g in GROUPS for k, v in dataclasses.asdict(getattr(config, g)).items()}}
    for key, value in PRESETS[name].items():
        assert flat[key] == value, key
    assert PRESET_DEVIATIONS[name]


def test_the_paper_preset_gives_the_releases_corrections_and_explicit_flags_win():
    config = config_of(["train", "--preset", "paper", "--anchor-fraction", "0.5"], "paper")
    assert config.fusion.rule == "paper" and config.fusion.calibrate_after == 32 and config.fusion.half_life == 64
    assert config.calibration.min_pairs_global == 200 and config.calibration.pair_window == 5000
    assert config.schedule.min_anchor_groups == 2 and config.schedule.group_size == 8
    assert config.schedule.anchor_fraction == 0.5  # the flag, not the preset
    assert not config.measures_fusion_constant  # the paper rule needs no gradient warmup
    assert config_of(["train"], None).fusion.rule == "none"  # the default
