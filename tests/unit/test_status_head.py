"""The status head: labels, token features, calibration, and the planning of the outcome corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.code.grammar import SLOTS, SolutionChoices, render_script
from wmrl_envs.errors import ConfigError
from wmrl_envs.mutations import OPERATORS
from wmrl_envs.tasks import list_tasks
from wmrl_envs.world_models import status_head
from wmrl_envs.world_models.build import corpus as corpus_lib
from wmrl_envs.world_models.status_head import (
    StatusHeadConfig,
    code_tokens,
    fit_status_head,
    label_of,
    split_label,
)


def test_labels_carry_the_exception_of_errors_only():
    assert label_of("runtime_error", "KeyError") == "runtime_error:KeyError"
    assert label_of("timeout", None) == "timeout" and label_of("valid", None) == "valid"
    assert split_label("runtime_error:KeyError") == ("runtime_error", "KeyError")
    assert split_label("runtime_error:other") == ("runtime_error", None)


def test_tokens_keep_names_and_literals_and_drop_comments():
    tokens = code_tokens('import lightgbm as lgb  # fast\nx = pd.read_csv("/kaggle/input/a b.csv")\n').split()
    assert "lightgbm" in tokens and "S:/kaggle/input/a_b.csv" in tokens and "fast" not in tokens
    assert code_tokens("x = (\n")  # an unfinished script still gives the tokens read so far


#: f-strings and their tokens as Python 3.10-3.11 give them, which the head was fitted on: one
#: string token of the literal's source. Python 3.12 and later tokenize an f-string as its parts,
#: so this holds there only because the status head joins them again.
F_STRINGS = {
    'print(f"score: {x:.3f} and {y!r}")\n': "print ( S:score:_{x:.3f}_and_{y!r} )",
    "s = f'{a}' f\"b{c}\" 'd'\n": "s = S:{a} S:{c} S:d",
    'msg = f"""multi\nline {x}\n  end"""\nz = 1\n': "msg = S:multi_line_{x}_end z = 1",
    "t = rf'\\d{n}' + F'{{lit}}' + f'{x=}'\n": "t = S:\\d{n} + S:{{lit}} + S:{x=}",
    "u = f\"{f'{inner}'} out {d['k']:>{w}}\"\n": "u = S:{f'{inner}'}_out_{d['k']:>{w}}",
    "print(f'caf\u00e9 {x}', 'ok')\r\ny = 2\r\n": "print ( S:caf\u00e9_{x} , S:ok ) y = 2",
}


@pytest.mark.parametrize("fast", [True, False], ids=["interpreter", "tokenize"])
def test_an_f_string_is_one_token_of_its_source_on_every_python(fast, monkeypatch):
    if not fast:
        monkeypatch.setattr(status_head, "_C_TOKENS", None)
    assert {script: code_tokens(script) for script in F_STRINGS} == F_STRINGS


def _synthetic(n: int, seed: int):
    """Scripts whose outcome follows one token: a learnable, noisy rule."""
    rng = np.random.default_rng(seed)
    scripts, statuses, exceptions, groups = [], [], [], []
    for i in range(n):
        kind = rng.integers(3)
        body = ["x = load()\n", "x = x.appendd(y)\n", "while True:\n    pass\n"][kind]
        scripts.append(f"# row {i}\n{body}")
        flip = rng.random() < 0.1
        outcome_kind = (kind + 1) % 3 if flip else kind
        statuses.append(["valid", "runtime_error", "timeout"][outcome_kind])
        exceptions.append("AttributeError" if outcome_kind == 1 else None)
        groups.append(f"task{i % 12}")
    return scripts, np.zeros((n, 2)), statuses, exceptions, groups


def test_the_head_learns_the_rule_and_its_probabilities_are_calibrated():
    scripts, features, statuses, exceptions, groups = _synthetic(240, 0)
    head = fit_status_head(scripts, features, statuses, exceptions, groups, StatusHeadConfig(max_iter=50))
    assert set(head.labels) == {"valid", "runtime_error:AttributeError", "timeout"}
    test_scripts, test_features, truth, _, _ = _synthetic(300, 1)
    predicted = head.predict(test_scripts, test_features)
    assert np.mean([p[0] == t for p, t in zip(predicted, truth)]) > 0.85
    assert all(p[1] == "AttributeError" for p in predicted if p[0] == "runtime_error")
    # Noise of 10%: a calibrated head puts about 0.9 on the rule's answer, not ~1.
    p_valid = np.array([p[2] for p in predicted])
    valid_rule = np.array(["load()" in s for s in test_scripts])
    assert 0.75 < p_valid[valid_rule].mean() < 0.97 and head.cv_log_loss > 0


def test_the_head_refuses_a_single_outcome():
    scripts, features, _, _, groups = _synthetic(30, 0)
    with pytest.raises(ConfigError, match="two distinct outcomes"):
        fit_status_head(scripts, features, ["valid"] * 30, [None] * 30, groups)


def _render(spec, choices, seed):
    return render_script(spec, SolutionChoices(**choices), seed)


def test_mutant_plans_deal_every_operator_and_are_deterministic():
    tasks = list_tasks(suite="mle", split="train")[:10]
    plan = corpus_lib.plan_mutants(tasks, SLOTS, _render, per_task=6, seed=3)
    assert plan == corpus_lib.plan_mutants(tasks, SLOTS, _render, per_task=6, seed=3)
    assert len(plan) == 60 and {i.mutation for i in plan} <= set(OPERATORS)
    # Dealt in turn: 60 rows over 30 operators reach most of them.
    assert len({i.mutation for i in plan}) >= 20
    for item in plan[:12]:
        task = next(t for t in tasks if t.id == item.task_id)
        assert item.script(task.spec, _render) != _render(task.spec, json.loads(item.choices), item.seed)
    with pytest.raises(ConfigError, match="unknown mutation operator"):
        corpus_lib.plan_mutants(tasks, SLOTS, _render, per_task=1, operators=["nope"])


#: The frozen out-of-sample set's hand-written scripts (LLM idioms).
OOS_SCRIPTS = Path(__file__).resolve().parents[2] / "bench" / "oos" / "scripts"

#: Scripts on which the interpreter's tokenizer and ``tokenize`` part ways, or which stop either.
ODD_SCRIPTS = ["x = $1\n", "x = `a`\n", "print(1 <> 2)\n", "async def f():\n    await g()\n", "s = 'abc\nprint(s)\n",
               "x = '''abc\n", "def f(:\n", "if x:\n  a\n b\n", "x = 1if y else 2\n", "a = 0777\n", "b = 1e\n",
               "x = f'{a!r:>{w}}'\n", "x = '\\ud800'\n", "\x00x = 1\n", "x = (1,\n", "x = 1 \\\n + 2", "\u00e9 = 1\n",
               "x = 1_000j + 0x_ff\n", "x = b'\\xff' rb'a' Rb'b'\n", "x = 1\r\ny = 2\r\n", "x = 1\ry = 2\n",
               "\ufeffx = 1\n", "\tif x:\n\t\tpass\n", "x = ?\n", "x = !a\n", "x = 'a' 'b'\n"]


@pytest.mark.skipif(status_head._C_TOKENS is None, reason="tokenize is the interpreter's tokenizer on Python 3.12+")
def test_the_fast_tokens_are_those_of_tokenize(monkeypatch):
    tasks = list_tasks(suite="mle", split="train")[:12] + list_tasks(suite="dsbench", split="train")[:4]
    plan = corpus_lib.plan_mutants(tasks, SLOTS, _render, per_task=12, seed=5)
    by_id = {t.id: t for t in tasks}
    scripts = [item.script(by_id[item.task_id].spec, _render) for item in plan]
    rng = np.random.default_rng(5)
    scripts += [render_script(t.spec, SolutionChoices.from_indices([rng.integers(len(o)) for o in SLOTS.values()]), i)
                for i, t in enumerate(tasks * 4)]
    scripts += [p.read_text(encoding="utf-8") for p in sorted(OOS_SCRIPTS.glob("*/*.py"))] + ODD_SCRIPTS
    fast = [code_tokens(s) for s in scripts]
    monkeypatch.setattr(status_head, "_C_TOKENS", None)
    assert fast == [code_tokens(s) for s in scripts]
    assert len(scripts) > 300 and len(set(fast)) > 250
