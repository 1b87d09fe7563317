"""Script analysis reads a script and its task as the sandbox and pandas read them, once for all.

The code features and the prover start from one parser (``analysis/script.py``) and one reader
of a task's public headers (``analysis/facts.task_facts``), so what the features see is the
program the sandbox runs and the columns the script's own pandas finds.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

from wmrl_envs.analysis import script as script_module
from wmrl_envs.analysis.code_features import _ConstantFolder, _module_constants, analyse_script, interaction_features
from wmrl_envs.analysis.facts import task_facts
from wmrl_envs.analysis.proofs import shared_prover
from wmrl_envs.analysis.script import code_key, hand_back, parse_script, shape_key
from wmrl_envs.task_spec import Task, TaskSpec


def test_the_features_read_a_bom_and_a_coding_cookie_as_the_sandbox_does():
    bom = "\ufeffimport pandas as pd\nx = 1\n"  # a UTF-8 byte-order mark: Python skips it
    assert parse_script(bom).compiles
    assert analyse_script(bom).features["syntax_ok"] == 1.0
    assert analyse_script(bom).features["n_imports"] == 1.0

    # The file holds UTF-8 bytes; its cookie makes Python decode them as Latin-1.
    cookie = "# -*- coding: latin-1 -*-\nname = 'caf\u00e9'\n"
    assert analyse_script(cookie).string_constants == {"caf\u00e9".encode().decode("latin-1")}


def test_the_compilers_verdict_is_remembered_but_every_reader_gets_a_tree_of_its_own():
    script = "import pandas as pd\nSEED = 0\nif SEED:\n    x = 1\n"
    first = parse_script(script)
    first.tree.body.clear()  # the code features fold trees in place
    again = parse_script(script)
    assert again.compiles and again.syntax_error is None and len(again.tree.body) == 3
    assert analyse_script(script).features["n_imports"] == 1.0

    # An error only the code generator finds: the tree is there, the verdict says it all again.
    generator_only = "def f():\n    pass\nreturn 1\n"
    for parsed in (parse_script(generator_only), parse_script(generator_only)):
        assert parsed.tree is not None and not parsed.compiles
        assert "outside function" in str(parsed.syntax_error) and parsed.syntax_error.lineno == 3
    unparsable = parse_script("def f(:\n")
    assert unparsable.tree is None and isinstance(unparsable.syntax_error, SyntaxError)


def test_a_tree_handed_back_goes_to_one_reader_and_the_prover_hands_its_back(monkeypatch, tmp_path: Path):
    parses = []
    real_parse = script_module._parse
    monkeypatch.setattr(script_module, "_parse", lambda text: parses.append(text) or real_parse(text))
    script = "import pandas as pd\nSEED = 7\ntrain = pd.read_csv('train.csv')\nprint(train.shape, SEED)\n"
    first = parse_script(script)
    hand_back(first)
    taken = parse_script(script)
    assert taken.tree is first.tree and len(parses) == 1  # the handed-back tree, not a new parse
    assert parse_script(script).tree is not first.tree and len(parses) == 2  # taken once only

    # The prover only reads its tree and hands it back: proving, then analysing, parses once.
    other = script.replace("SEED = 7", "SEED = 8")
    (tmp_path / "train.csv").write_text("a,b\n1,2\n")
    spec = TaskSpec(id="t", name="t", suite="test", env_id="wmrl/MLEDojo-v0", split="train", metric="rmse",
                    task_type="regression", target_columns=("b",))
    task = Task(spec=spec, root=tmp_path, description_path=tmp_path / "description.md", public_dir=tmp_path,
                answers_path=tmp_path / "answers.csv")
    shared_prover().prove(task, other)
    analysed = analyse_script(other)
    assert parses.count(other) == 1
    assert analysed.features == analyse_script(other).features  # the same as from a fresh parse


def test_a_task_has_the_columns_pandas_reads_from_its_headers(tmp_path: Path):
    public = tmp_path / "public"
    public.mkdir()
    (public / "train.csv").write_text("id, age,y\n1,30,0.5\n2,40,1.5\n3,50,2.5\n")
    (public / "test.csv").write_text("id, age\n4,60\n")
    spec = TaskSpec(id="spaced", name="spaced", suite="test", env_id="wmrl/MLEDojo-v0", split="train",
                    metric="rmse", task_type="regression", target_columns=("y",))
    task = Task(spec=spec, root=tmp_path, description_path=tmp_path / "description.md", public_dir=public,
                answers_path=tmp_path / "private" / "answers.csv")
    script = 'import pandas as pd\ntrain = pd.read_csv("data/train.csv")\nX = train[["age"]]\n'

    assert task_facts(public).headers["train.csv"] == ("id", " age", "y")
    # pandas keeps the space, so train[["age"]] raises a KeyError: the features count it unknown.
    assert interaction_features(task, analyse_script(script))["unknown_columns"] == 1.0


class _NumbersErased(ast.NodeTransformer):
    """The shape key's definition, walked: every number literal (not a bool) becomes one string."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        number = isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool)
        return ast.Constant(value="<number>") if number else node


def _walked_keys(script: str) -> tuple[str, str]:
    tree = ast.parse(script)
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    return sha(ast.dump(tree)), sha(ast.dump(_NumbersErased().visit(tree)))


@pytest.mark.parametrize("script", [
    "x = 'Constant(value=3)'\ny = 3\n",  # code's text inside a string stays text
    "b'Constant(value=4)'\n4j\n1e-05\n1e999\n0x10\n1_000\nTrue\nNone\n...\n",
    "x = u'a'\ny = f'{3:.2f}{z!r}'\n",
    "x = 'it\\'s \"q\" Constant(value=1)'\nmatch y:\n    case 3 | -2.5:\n        pass\n",
    'x = """a\nConstant(value=5)\nb"""\ns = "\\\\"\nt = 7\n',
    "def f(a=1, *, b=2.0):\n    return a[1:3]\n",
    ("import pandas as pd\nfrom sklearn.ensemble import RandomForestClassifier\n"
     "train = pd.read_csv('/data/train.csv')\nmodel = RandomForestClassifier(n_estimators=200, max_depth=None,"
     " random_state=0)\nmodel.fit(train.drop(columns=['y']), train['y'])\nprint(f'{model.score(train.drop("
     "columns=[\"y\"]), train[\"y\"]):.3f}')\n"),
])
def test_the_keys_are_those_of_the_dumped_tree_with_its_numbers_erased(script: str):
    assert (code_key(script), shape_key(script)) == _walked_keys(script)


def test_a_tree_that_cannot_be_printed_is_keyed_by_its_text_and_still_analysed():
    # A hex literal parses however long it is; its decimal repr exceeds Python's digit limit, so
    # neither ast.dump nor ast.unparse can print it. The sandbox runs such a script as any other.
    huge = "from sklearn.linear_model import Ridge\nx = 0x" + "f" * 5000 + "\nmodel = Ridge(alpha=x)\n"
    assert parse_script(huge).compiles
    assert code_key(huge) == shape_key(huge) == hashlib.sha256(huge.encode()).hexdigest()
    assert code_key(huge + "\n") != code_key(huge)
    assert analyse_script(huge).features["syntax_ok"] == 1.0


def test_folding_that_keeps_to_statements_gives_the_program_a_full_walk_gives():
    script = '''"""A docstring, dropped."""
import pandas as pd
MODE = "cv"
def fit(frame):
    """Dropped too."""
    if MODE == "holdout":
        return frame.sample(frac=0.5)
    else:
        return frame
    print("dead after a return in the taken branch")
class Model:
    """And this one."""
    size = [n * 2 for n in range(3)]
try:
    data = fit(pd.read_csv("train.csv"))
except OSError:
    if MODE == "cv":
        raise
finally:
    pass
'''
    folded = []
    for into_expressions in (True, False):
        tree = parse_script(script).tree
        nodes = list(ast.walk(tree))
        folded.append(ast.dump(_ConstantFolder(_module_constants(tree, nodes), into_expressions).visit(tree)))
    assert folded[0] == folded[1]
    assert "holdout" not in folded[1] and "dead after" not in folded[1] and "docstring" not in folded[1]
