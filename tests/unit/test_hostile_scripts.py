"""The world model reads whatever a policy writes: no script makes it raise.

A training policy explores, and one script that crashes the scorer ends the run (an RL policy
that found such a script would find it again). Each script below is one a sandbox runs or
reports as any other; the keys, the prover and the surrogate each answer for it.
"""

from __future__ import annotations

import ast
import math

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from wmrl_envs.analysis.code_features import analyse_script
from wmrl_envs.analysis.proofs import shared_prover
from wmrl_envs.analysis.script import code_key, parse_script, shape_key
from wmrl_envs.tasks import list_tasks
from wmrl_envs.world_models import make_world_model

BIG = "1" + "0" * 400  # an int past any float
HUGE_HEX = "0x" + "f" * 5000  # parses; its decimal form is past Python's digit limit

#: Lines a policy might write, each put after a valid script's imports.
HOSTILE = {
    "int past the digit limit": f"x = {HUGE_HEX}",
    "int past any float, as a hyperparameter": f"alpha = {BIG}\nsize = Ridge(alpha={BIG}, max_iter={HUGE_HEX})",
    "infinite floats as sizes": "m = RandomForestRegressor(n_estimators=1e999, max_depth=-1e999, random_state=1e999)",
    "a huge default and f-string": f"f = lambda x={BIG}: x\nprint(f'{{{HUGE_HEX}}}')",
    "huge comparisons and slices": f"if {BIG} > 3.5:\n    y = [1][0:{BIG}]\nfor i in range({HUGE_HEX}):\n    break",
    "deep nesting": "x = " + "[" * 90 + "]" * 90 + "\ny = " + "abs(" * 90 + "1" + ")" * 90,
    "a deep chain of ifs": "".join("    " * i + "if True:\n" for i in range(60)) + "    " * 60 + "pass",
    "a long string and odd text": "s = '" + "a" * 100_000 + "'\nt = '\\x00\\u202e'\n\u03b1\u03b2 = 1",
    "match, walrus, async": "if (n := 3) > 2:\n    match n:\n        case 3 | 4:\n            pass\nasync def g():\n    await g()",
    "star import, exec, recursion": "from os import *\nexec('x = 1')\ndef f(n):\n    return f(n - 1)",
    "an error only the compiler finds": "return 1",
}


@pytest.fixture(scope="module")
def task():
    return next(t for t in list_tasks(suite="mle", split="heldout") if t.spec.task_type == "regression")


@pytest.fixture(scope="module")
def scripts(task) -> dict[str, str]:
    lines = render_script(task.spec, REFERENCE_SOLUTIONS[next(iter(REFERENCE_SOLUTIONS))], 0).splitlines()
    after_imports = max(i for i, line in enumerate(lines) if line.startswith(("import ", "from "))) + 1
    head, rest = "\n".join(lines[:after_imports]), "\n".join(lines[after_imports:])
    return {name: f"{head}\n{line}\n{rest}\n" for name, line in HOSTILE.items()}


def test_every_hostile_script_is_keyed_proved_and_analysed(task, scripts):
    for name, script in scripts.items():
        parsed = parse_script(script)
        assert parsed.tree is not None, name  # each parses: the analyses below see its tree
        assert any(HOSTILE[name].splitlines()[0] in (ast.get_source_segment(script, stmt) or "")
                   for stmt in parsed.tree.body), name  # the line is code, not inside a docstring
        assert code_key(script) and shape_key(script), name
        shared_prover().prove(task, script)  # a proof or None, never an exception
        assert analyse_script(script).features["syntax_ok"] == 1.0, name


def test_the_surrogate_scores_every_hostile_script(task, scripts):
    predictions = make_world_model("surrogate").predict([task] * len(scripts), list(scripts.values()))
    for name, prediction in zip(scripts, predictions):
        assert prediction.parsed and math.isfinite(prediction.score), (name, prediction.error)
        assert 0.0 <= prediction.p_valid <= 1.0, name
