"""Script analysis reads a script and its task as the sandbox and pandas read them, once for all.

The code features and the prover start from one parser (``analysis/script.py``) and one reader
of a task's public headers (``analysis/facts.task_facts``), so what the features see is the
program the sandbox runs and the columns the script's own pandas finds.
"""

from __future__ import annotations

from pathlib import Path

from wmrl_envs.analysis.code_features import analyse_script, interaction_features
from wmrl_envs.analysis.facts import task_facts
from wmrl_envs.analysis.script import parse_script
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
