"""What a stress run records about its correction, read the same way by every stress benchmark.

A shared module (no ``main``): ``bench.stress`` writes and reports runs, ``bench.stress_replay``
replays them and ``bench.acceptance_power`` reads them, each through these names.
"""

from __future__ import annotations

from typing import Any

from trainers.wmrl_config import WMRLConfig

#: What a stress record's ``stratum_check`` says when its logged |z| read a monotone map's residuals
#: on every step (records without it read the line's on the steps whose global map was one).
STRATUM_CHECK = "monotone map"

# Today's default correction: a default ``wmrl`` run made under another one is relabelled (as_recorded).
DEFAULT_RULE = WMRLConfig().fusion.rule
#: The sweepable settings that are switches (``true`` or ``false``), and the mode each names when on.
SWITCHES = {"calibration_stratify": "stratified", "calibration_debias_flagged_strata": "flagged-strata",
            "calibration_extend_ends": "extended-ends"}
#: Each switch's default today (all calibration settings), read off the config like DEFAULT_RULE.
DEFAULT_SWITCHES = {name: getattr(WMRLConfig().calibration, name.removeprefix("calibration_")) for name in SWITCHES}
#: The calibration map's default form, read off the config like DEFAULT_RULE.
DEFAULT_GLOBAL_FORM = WMRLConfig().calibration.global_form


def names_a_default(setting: str) -> bool:
    """Whether a sweep setting (NAME=VALUE) names today's default: a run swept to it is a default run."""
    name, _, value = setting.partition("=")
    defaults = {"fusion_rule": DEFAULT_RULE, "calibration_global_form": DEFAULT_GLOBAL_FORM,
                **{switch: str(on).lower() for switch, on in DEFAULT_SWITCHES.items()}}
    return defaults.get(name) == value


def as_recorded(result: dict[str, Any]) -> dict[str, Any]:
    """A ``wmrl`` run made when the default correction was another one, reported under the
    correction it ran with, so a table never puts two corrections under one name: a default run
    of the ``eta2`` days becomes ``wmrl-eta2``, a stratified one ``wmrl-stratified (eta2 rule)``,
    and a rule candidate of the isotonic days ``wmrl-eta2 (isotonic map)``. A switch missing from a
    run's record was off, and a missing global map form was isotonic: the run came before the
    setting existed. A preset fixes its whole correction, so its runs keep their name. A candidate
    whose every setting names today's default is the default: a ``calibration_global_form=chosen``
    run is plain ``wmrl`` now that the chosen map is the default."""
    key = result["key"]
    variant = key.get("variant", "")
    if key["mode"] != "wmrl" or variant.startswith("preset="):
        return result  # a preset names its whole correction itself
    if variant and all(names_a_default(setting) for setting in variant.split("+")):
        variant = ""  # a candidate that became the default (it keeps its name while others are joined to it)
    if not variant:
        variant = "+".join(f"{name}={str(result.get(name, False)).lower()}"
                           for name, default in DEFAULT_SWITCHES.items() if result.get(name, False) != default)
    form = result.get("calibration_global_form", "isotonic")
    if form != DEFAULT_GLOBAL_FORM and "calibration_global_form=" not in variant:
        variant = f"{variant}+calibration_global_form={form}" if variant else f"calibration_global_form={form}"
    rule = result.get("fusion_rule") or DEFAULT_RULE
    if rule != DEFAULT_RULE and "fusion_rule=" not in variant:
        variant = f"{variant}+fusion_rule={rule}" if variant else f"fusion_rule={rule}"
    return result if variant == key.get("variant", "") else {**result, "key": {**key, "variant": variant}}
