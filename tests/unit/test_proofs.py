"""The static prover: what it proves, what it must not, and that it reads the runtime's facts.

Every script below is also executed in the sandbox: each proved failure must fail for real as
its proof says, and skipping its execution must give the reward and calibrator pair that
executing it gives.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

from wmrl_envs.analysis.facts import runtime_facts, task_facts
from wmrl_envs.analysis.proofs import Prover, shared_prover
from wmrl_envs.calibration import Calibrator
from wmrl_envs.scoring import CodeGroup, CodeScorer, HashSchedule, ScoringCore
from wmrl_envs.tasks import get_task

HEADER = "import numpy as np\nimport pandas as pd\n"
READ = HEADER + 'train = pd.read_csv("data/train.csv")\n'


def _keyword_error(text: str, likeliest: str) -> str:
    """An unknown keyword's TypeError as this CPython words it: 3.13 and later add the likeliest parameter."""
    return f"{text}. Did you mean '{likeliest}'?" if sys.version_info >= (3, 13) else text


#: name -> (script, check, exception, exact message or None); titanic-survival's columns are
#: id, name, sex, age, passengerClass, survived.
FAILING: dict[str, tuple[str, str, str, str | None]] = {
    "kaggle_input_path": (HEADER + 'train = pd.read_csv("/kaggle/input/titanic/train.csv")\n', "missing_file",
                          "FileNotFoundError",
                          "FileNotFoundError: [Errno 2] No such file or directory: '/kaggle/input/titanic/train.csv'"),
    "bare_file_name": (HEADER + 'train = pd.read_csv("train.csv")\n', "missing_file", "FileNotFoundError",
                       "FileNotFoundError: [Errno 2] No such file or directory: 'train.csv'"),
    "kaggle_column": (READ + 'y = train["Survived"]\n', "missing_column", "KeyError", "KeyError: 'Survived'"),
    "drop_missing": (READ + 'X = train.drop(columns=["PassengerId", "survived"])\n', "missing_column", "KeyError",
                     "KeyError: \"['PassengerId'] not found in axis\""),
    "select_missing": (READ + 'X = train[["age", "Fare"]]\n', "missing_column", "KeyError",
                       "KeyError: \"['Fare'] not in index\""),
    "after_assignment": (READ + 'train["family"] = 1\nz = train["family"]\nw = train["Cabin"]\n', "missing_column",
                         "KeyError", "KeyError: 'Cabin'"),
    "inside_main": (HEADER + 'def main():\n    train = pd.read_csv("data/train.csv")\n    y = train["Survived"]\n\n\n'
                    'if __name__ == "__main__":\n    main()\n', "missing_column", "KeyError", "KeyError: 'Survived'"),
    "frame_append": (READ + "train = train.append(train)\n", "frame_attribute", "AttributeError",
                     "AttributeError: 'DataFrame' object has no attribute 'append'"),
    "missing_module": ("import lightgbm as lgb\nimport pandas as pd\n", "missing_module", "ModuleNotFoundError",
                       "ModuleNotFoundError: No module named 'lightgbm'"),
    "wrong_module": ("from sklearn.linear_model import LinearSVC\n", "missing_name", "ImportError", None),
    "unknown_keyword": ("from sklearn.ensemble import RandomForestClassifier\n"
                        "model = RandomForestClassifier(n_estimator=100)\n", "keyword", "TypeError",
                        _keyword_error("TypeError: RandomForestClassifier.__init__() got an unexpected keyword "
                                       "argument 'n_estimator'", "n_estimators")),
    "validated_keyword": (READ + "from sklearn.model_selection import train_test_split\n"
                          "a, b = train_test_split(train, test_sise=0.2)\n", "keyword", "TypeError",
                          "TypeError: got an unexpected keyword argument 'test_sise'"),
    "reader_keyword": (HEADER + 'train = pd.read_csv("data/train.csv", sepp=",")\n', "keyword", "TypeError",
                       _keyword_error("TypeError: read_csv() got an unexpected keyword argument 'sepp'", "sep")),
    "undefined_name": (READ + 'X = X_train.drop(columns=["id"])\n', "undefined_name", "NameError",
                       "NameError: name 'X_train' is not defined. Did you mean: 'train'?"),
    "module_attribute": (HEADER + "import math\nx = math.sqroot(2)\n", "module_attribute", "AttributeError",
                         "AttributeError: module 'math' has no attribute 'sqroot'. Did you mean: 'sqrt'?"),
    "kaggle_working": (READ + 'train.to_csv("/kaggle/working/submission.csv", index=False)\n', "missing_directory",
                       "OSError", "OSError: Cannot save file into a non-existent directory: '/kaggle/working'"),
    "unfitted_scaler": (READ + "from sklearn.preprocessing import StandardScaler\nscaler = StandardScaler()\n"
                        'X = scaler.transform(train[["age"]])\n', "unfitted_estimator", "NotFittedError",
                        "sklearn.exceptions.NotFittedError: This StandardScaler instance is not fitted yet. Call "
                        "'fit' with appropriate arguments before using this estimator."),
    "bare_relative_input": (HEADER + 'train = pd.read_csv("../input/train.csv")\n', "missing_file",
                            "FileNotFoundError",
                            "FileNotFoundError: [Errno 2] No such file or directory: '../input/train.csv'"),
    "syntax": (HEADER + 'train = pd.read_csv("data/train.csv"\n', "syntax", "SyntaxError",
               "SyntaxError: '(' was never closed"),
}

#: Scripts that may well fail, but not provably: the prover must say nothing.
UNPROVABLE: dict[str, str] = {
    "caught": HEADER + 'try:\n    train = pd.read_csv("/kaggle/input/t.csv")\nexcept FileNotFoundError:\n'
              '    train = pd.read_csv("data/train.csv")\n',
    "early_return": READ + 'def main():\n    if len(train) > 5:\n        return\n    y = train["Survived"]\n\n\nmain()\n',
    "exits_first": HEADER + 'import sys\nsys.exit(0)\ntrain = pd.read_csv("/kaggle/x.csv")\n',
    "column_added_through_loc": READ + 'train.loc[:, "new"] = 1\ny = train["new"]\n',
    "column_added_in_a_loop": READ + 'for c in ["a"]:\n    train[c] = 0\ny = train["a"]\n'.replace(
        'for c in ["a"]', "for c in train.columns[:1].tolist() + ['a']"),
    "column_added_by_own_function": READ + 'def add(frame):\n    frame["extra"] = 1\n\n\nadd(train)\n'
                                    'y = train["extra"]\n',
    "column_added_by_a_pipeline_step": READ + "from sklearn.base import BaseEstimator, TransformerMixin\n"
                                       "class Add(BaseEstimator, TransformerMixin):\n"
                                       "    def fit(self, X, y=None):\n        X['extra'] = 1\n        return self\n"
                                       "Add().fit(train)\ny = train['extra']\n",
    "file_written_first": HEADER + 'pd.DataFrame({"a": [1]}).to_csv("feat.csv")\nf = pd.read_csv("feat.csv")\n',
    "renamed_columns": READ + 'train = train.rename(columns={"survived": "Survived"})\ny = train["Survived"]\n',
    "list_changed_in_place": READ + 'cols = ["sex"]\ncols[0] = "age"\nalias = cols\ny = train[alias[0]]\n',
    "dynamic_import": 'import importlib\nlgb = importlib.import_module("lightgbm")\n',
    "lazy_module_attribute": HEADER + "x = np.arrray([1])\n",
    "branch_not_taken": READ + 'MODE = "a"\nif MODE == "b":\n    y = train["Survived"]\n',
    "maybe_defined": READ + "if len(train) > 3:\n    X_train = train\nX = X_train\n",
    "fitted_through_an_alias": READ + "from sklearn.preprocessing import StandardScaler\nscaler = StandardScaler()\n"
                               'alias = scaler\nalias.fit(train[["age"]])\nX = scaler.transform(train[["age"]])\n',
    "fitted_inside_a_pipeline": READ + "from sklearn.pipeline import make_pipeline\n"
                                "from sklearn.preprocessing import StandardScaler\nscaler = StandardScaler()\n"
                                'make_pipeline(scaler).fit(train[["age"]])\nX = scaler.transform(train[["age"]])\n',
    "built_with_a_vocabulary": READ + "from sklearn.feature_extraction.text import CountVectorizer\n"
                               'vectorizer = CountVectorizer(vocabulary=["a", "b"])\n'
                               'X = vectorizer.transform(train["name"])\n',
    "written_module": 'open("helpers.py", "w").write("x = 1")\nimport helpers\n',
}

VALID: dict[str, str] = {
    "plain": READ + 'test = pd.read_csv("data/test.csv")\nX = train.drop(columns=["id", "survived"])\n'
             'X_test = test[X.columns]\nsub = pd.DataFrame({"id": test["id"], "survived": "no"})\n'
             'sub.to_csv("submission.csv", index=False)\n',
    "constant_branch": READ + 'MODE = "b"\nif MODE == "b":\n    y = train["survived"]\n',
    "data_prefixes": HEADER + 'a = pd.read_csv("./data/train.csv")\nb = pd.read_csv("/workspace/data/test.csv")\n',
    "fitted_and_predicted_in_loops": READ + 'test = pd.read_csv("data/test.csv")\n'
                                     "from sklearn.ensemble import RandomForestClassifier\n"
                                     'for frame in (train, test):\n    frame["age"] = frame["age"].fillna(-1)\n'
                                     'model = RandomForestClassifier(n_estimators=10, random_state=0)\n'
                                     'model = model.fit(train[["id", "age"]], train["survived"])\n'
                                     'sub = pd.DataFrame({"id": test["id"], "survived": model.predict(test[["id", "age"]])})\n'
                                     'sub.to_csv("submission.csv", index=False)\n',
}


# ----------------------------------------------------------------------------- where proofs generalise
# Three situations (issue 44): the methods of the objects the prover follows, loops over what is
# known to be iterated, and the column names an estimator was fitted on against those it is asked
# about. Each: name -> (script, check, exception, message), and scripts that must stay unproved.

TEST = 'test = pd.read_csv("data/test.csv")\n'

#: DataFrame and Series methods and attributes, estimator constructors: the installed signatures.
METHOD_FAILING: dict[str, tuple[str, str, str, str]] = {
    "drop_positional_axis": (READ + 'X = train.drop("name", 1)\n', "method_arguments", "TypeError",
                             "TypeError: DataFrame.drop() takes from 1 to 2 positional arguments but 3 were given"),
    "frame_fillna_method": (READ + 'train = train.fillna(method="ffill")\n', "method_arguments", "TypeError",
                            "TypeError: NDFrame.fillna() got an unexpected keyword argument 'method'"),
    "sort_values_keyword": (READ + 'train.sort_values(by="age", inplace=True, foo=1)\n', "method_arguments",
                            "TypeError", "TypeError: DataFrame.sort_values() got an unexpected keyword argument 'foo'"),
    "series_fillna_method": (READ + 'age = train["age"].fillna(method="bfill")\n', "method_arguments", "TypeError",
                             "TypeError: NDFrame.fillna() got an unexpected keyword argument 'method'"),
    "series_iteritems": (READ + 'for key, value in train["age"].iteritems():\n    print(key, value)\n',
                         "frame_attribute", "AttributeError", "AttributeError: 'Series' object has no attribute 'iteritems'"),
    "series_misspelt_method": (READ + 'mean_age = train["age"].meen()\n', "frame_attribute", "AttributeError",
                               "AttributeError: 'Series' object has no attribute 'meen'. Did you mean: 'mean'?"),
    "estimator_positional": ("from sklearn.ensemble import RandomForestClassifier\nmodel = RandomForestClassifier(100, 5)\n",
                             "keyword", "TypeError", "TypeError: RandomForestClassifier.__init__() takes from 1 to 2 "
                             "positional arguments but 3 were given"),
}
METHOD_UNPROVABLE: dict[str, str] = {
    # read in chunks: a TextFileReader, not a DataFrame (whose columns would be known)
    "not_surely_a_frame": HEADER + 'train = pd.read_csv("data/train.csv", chunksize=100)\nX = train.drop("name", 1)\n',
    # a built frame's index may hold the name: then the attribute is that row's value
    "index_may_hold_the_name": HEADER + 'frame = pd.DataFrame({"a": pd.Series([1], index=["iteritems"])})\n'
                               'x = frame["a"].iteritems\n',
    "method_taking_any_keyword": READ + 'table = train.pivot_table(values="age", index="sex", foo=1)\n',
    "frame_maybe_replaced": READ + 'if len(train) > 3:\n    train = train.to_numpy()\nX = train.drop("name", 1)\n',
    "arguments_it_takes": READ + 'X = train.drop(columns=["name"])\nage = train["age"].fillna(0)\n',
}

#: Loops over what the walk knows is iterated: a certain failure in any walked iteration.
LOOP_FAILING: dict[str, tuple[str, str, str, str]] = {
    "over_frames": (READ + TEST + 'for frame in [train, test]:\n    frame["Age"] = frame["Age"].fillna(0)\n',
                    "missing_column", "KeyError", "KeyError: 'Age'"),
    "over_dict_items": (READ + 'renames = {"sex": "gender", "Embarked": "port"}\nfor old, new in renames.items():\n'
                        '    train[new] = train[old]\n', "missing_column", "KeyError", "KeyError: 'Embarked'"),
    "over_a_long_range": (READ + 'total = 0.0\nfor i in range(10_000):\n    total += train["Fare"].iloc[i % 10]\n',
                          "missing_column", "KeyError", "KeyError: 'Fare'"),
    "over_enumerate_zip": (READ + TEST + 'for i, (frame, label) in enumerate(zip((train, test), ("train", "test"))):\n'
                           '    print(i, label, frame["Survived"].mean())\n', "missing_column", "KeyError",
                           "KeyError: 'Survived'"),
    "over_known_columns": (READ + 'for column in train.columns:\n    train[column + "_missing"] = train[column].isna()\n'
                           'rate = train["Age_missing"].mean()\n', "missing_column", "KeyError", "KeyError: 'Age_missing'"),
}
LOOP_UNPROVABLE: dict[str, str] = {
    "break_first": READ + 'for column in ["age", "Fare"]:\n    if column == "age":\n        break\n    y = train[column]\n',
    "empty": READ + 'for column in []:\n    y = train["Fare"]\n',
    "caught_in_the_body": READ + 'for column in ["age", "Fare"]:\n    try:\n        y = train[column]\n'
                          '    except KeyError:\n        y = None\n',
    "returns_first": READ + 'def first_present(columns):\n    for column in columns:\n        if column in train.columns:\n'
                     '            return column\n        y = train[column]\n\n\nfirst_present(["age", "Fare"])\n',
    # the body shortens what it iterates: "Fare" is never reached
    "list_changed_by_the_body": READ + 'columns = ["age", "Fare"]\nfor column in columns:\n    columns.remove("Fare")\n'
                                '    y = train[column]\n',
    # frames, lists and dicts changed through what holds them
    "frame_changed_through_a_list": READ + TEST + 'frames = [train, test]\nframes[0]["Fare"] = 0.0\nfare = train["Fare"]\n',
    "dict_changed_before_the_frame": HEADER + 'columns = {"a": [1]}\ncolumns["b"] = [2]\nframe = pd.DataFrame(columns)\n'
                                     'b = frame["b"]\n',
    "list_changed_through_another": READ + 'columns = ["Fare"]\nboth = [columns]\nboth[0][0] = "age"\ny = train[columns]\n',
}

#: An estimator (or pipeline) fitted on a frame, asked about a frame with other column names.
NAMES = "ValueError: The feature names should match those that were passed during fit."
NAMES_FAILING: dict[str, tuple[str, str, str, str]] = {
    "predict_other_columns": (READ + TEST + "from sklearn.ensemble import RandomForestClassifier\n"
                              'X = train[["id", "age"]]\nmodel = RandomForestClassifier(n_estimators=10, random_state=0)\n'
                              'model.fit(X, train["survived"])\npred = model.predict(test)\n',
                              "feature_names", "ValueError", NAMES),
    "pipeline_reordered_columns": (READ + TEST + "from sklearn.impute import SimpleImputer\n"
                                   "from sklearn.linear_model import LogisticRegression\n"
                                   "from sklearn.pipeline import make_pipeline\n"
                                   'model = make_pipeline(SimpleImputer(strategy="median"), LogisticRegression(max_iter=500))\n'
                                   'model.fit(train[["id", "age"]], train["survived"])\n'
                                   'proba = model.predict_proba(test[["age", "id"]])[:, 1]\n',
                                   "feature_names", "ValueError", NAMES),
    "pipeline_class_missing_column": (READ + TEST + "from sklearn.ensemble import RandomForestClassifier\n"
                                      "from sklearn.impute import SimpleImputer\nfrom sklearn.pipeline import Pipeline\n"
                                      'model = Pipeline([("impute", SimpleImputer()), ("forest", RandomForestClassifier())])\n'
                                      'model = model.fit(train[["id", "age"]], train["survived"])\n'
                                      'pred = model.predict(test[["age"]])\n', "feature_names", "ValueError", NAMES),
    "fitted_by_fit_transform": (READ + TEST + "from sklearn.preprocessing import StandardScaler\nscaler = StandardScaler()\n"
                                'X = scaler.fit_transform(train[["age"]])\nX_test = scaler.transform(test[["id"]])\n',
                                "feature_names", "ValueError", NAMES),
}
_FIT = READ + TEST + "from sklearn.ensemble import RandomForestClassifier\nmodel = RandomForestClassifier(n_estimators=10)\n"
NAMES_UNPROVABLE: dict[str, str] = {
    "fitted_on_an_array": _FIT + 'model.fit(train[["id", "age"]].to_numpy(), train["survived"])\n'
                          'pred = model.predict(test[["age", "id"]])\n',
    "same_columns": _FIT + 'X = train[["id", "age"]]\nmodel.fit(X, train["survived"])\npred = model.predict(test[X.columns])\n',
    "caught": _FIT + 'model.fit(train[["id", "age"]], train["survived"])\ntry:\n    pred = model.predict(test)\n'
              'except ValueError:\n    pred = None\n',
    "refitted_through_a_list": _FIT + 'model.fit(train[["id", "age"]], train["survived"])\nmodels = [model]\n'
                               'models[0].fit(test[["id"]], [0, 1] * 164)\npred = model.predict(test[["id"]])\n',
    "refitted_step": READ + TEST + "from sklearn.pipeline import make_pipeline\n"
                     "from sklearn.preprocessing import StandardScaler\nfrom sklearn.tree import DecisionTreeClassifier\n"
                     'model = make_pipeline(StandardScaler(), DecisionTreeClassifier())\n'
                     'model.fit(train[["id"]], train["survived"])\nmodel[0].fit(test[["age"]])\n'
                     'pred = model.predict(test[["age"]])\n',
    "no_name_check": READ + TEST + "from sklearn.dummy import DummyClassifier\nmodel = DummyClassifier()\n"
                     'model.fit(train[["id", "age"]], train["survived"])\npred = model.predict(test)\n',
    "selects_by_name": READ + TEST + "from sklearn.compose import ColumnTransformer\nfrom sklearn.impute import SimpleImputer\n"
                       "from sklearn.linear_model import LogisticRegression\nfrom sklearn.pipeline import make_pipeline\n"
                       'model = make_pipeline(ColumnTransformer([("num", SimpleImputer(), ["id", "age"])]), '
                       "LogisticRegression(max_iter=500))\n"
                       'model.fit(train[["id", "age"]], train["survived"])\npred = model.predict(test)\n',
    # a parameter that makes transform raise before it reads its input (NotImplementedError)
    "parameter_read_first": READ + TEST + "from sklearn.discriminant_analysis import LinearDiscriminantAnalysis\n"
                            'lda = LinearDiscriminantAnalysis(solver="lsqr")\n'
                            'lda.fit(train[["id"]], train["survived"])\nX = lda.transform(test[["age"]])\n',
}

#: Every proved case above and before, each run in the sandbox below.
ALL_FAILING = {**FAILING, **METHOD_FAILING, **LOOP_FAILING, **NAMES_FAILING}


def _assert_verdict(prover, task, failing, unprovable, name):
    if name in unprovable:
        assert prover.prove(task, unprovable[name]) is None, name
        return
    script, check, exception, message = failing[name]
    proof = prover.prove(task, script)
    assert proof is not None, name
    assert (proof.check, proof.exception, proof.message) == (check, exception, message)
    assert proof.status == "runtime_error" and proof.line is not None


@pytest.mark.parametrize("name", sorted(METHOD_FAILING) + sorted(METHOD_UNPROVABLE))
def test_methods_of_frames_series_and_estimators_follow_the_installed_signatures(prover, task, name):
    _assert_verdict(prover, task, METHOD_FAILING, METHOD_UNPROVABLE, name)


@pytest.mark.parametrize("name", sorted(LOOP_FAILING) + sorted(LOOP_UNPROVABLE))
def test_loops_over_what_is_known_to_be_iterated_are_walked(prover, task, name):
    _assert_verdict(prover, task, LOOP_FAILING, LOOP_UNPROVABLE, name)


@pytest.mark.parametrize("name", sorted(NAMES_FAILING) + sorted(NAMES_UNPROVABLE))
def test_an_estimator_refuses_columns_other_than_those_it_was_fitted_on(prover, task, name):
    _assert_verdict(prover, task, NAMES_FAILING, NAMES_UNPROVABLE, name)


@pytest.fixture(scope="module")
def task():
    return get_task("titanic-survival")


@pytest.fixture(scope="module")
def prover():
    return Prover()


@pytest.mark.parametrize("name", sorted(FAILING))
def test_a_certain_failure_is_proved_with_the_sandbox_message(prover, task, name):
    script, check, exception, message = FAILING[name]
    proof = prover.prove(task, script)
    assert proof is not None, name
    assert (proof.check, proof.exception) == (check, exception)
    if message is not None:
        assert proof.message == message
    assert proof.status != "valid" and proof.line is not None


@pytest.mark.parametrize("name", sorted(UNPROVABLE))
def test_what_may_not_fail_is_never_proved(prover, task, name):
    assert prover.prove(task, UNPROVABLE[name]) is None


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_scripts_are_not_proved(prover, task, name):
    assert prover.prove(task, VALID[name]) is None


def test_no_code_is_a_proof_and_verdicts_are_cached(prover, task):
    assert prover.prove(task, None).status == "no_code"
    script = FAILING["kaggle_column"][0]
    assert prover.prove(task, script) is prover.prove(task, script)


def test_a_scorer_and_its_world_model_prove_a_script_once(task, monkeypatch):
    """Both ask the prover about each script (the scorer settles proofs, the world model predicts
    what is left): one shared prover, also across pickling (Ray ships scorers to workers)."""
    scorer = CodeScorer()
    assert scorer.prover is shared_prover() and scorer.world_model.prover is shared_prover()
    assert pickle.loads(pickle.dumps(scorer)).prover is shared_prover()
    own = Prover()
    assert pickle.loads(pickle.dumps(own)) is not own and pickle.loads(pickle.dumps(own)) is not shared_prover()

    script = FAILING["kaggle_column"][0] + "\n# asked once\n"
    calls, original = [], Prover._prove
    monkeypatch.setattr(Prover, "_prove", lambda self, t, s: calls.append(s) or original(self, t, s))
    [group] = scorer.score([CodeGroup(task, [script, VALID[sorted(VALID)[0]] + "\n# once\n"])], ["world_model"])
    assert group.samples[0].decided_by == "proof" and group.samples[1].decided_by != "proof"
    assert len(calls) == 2  # each script proved once, not once by the scorer and again by the model


def test_the_import_error_names_the_module_file_as_the_sandbox_sees_it(prover, task):
    proof = prover.prove(task, FAILING["wrong_module"][0])
    assert proof.message.startswith("ImportError: cannot import name 'LinearSVC' from 'sklearn.linear_model' "
                                    "(/opt/wmrl-runtime/lib/")
    assert proof.message.endswith("sklearn/linear_model/__init__.py)")


def test_runtime_facts_come_from_the_runtime_and_are_cached():
    facts = runtime_facts()
    assert facts is runtime_facts()
    assert "lightgbm" not in facts.top_level and "sklearn" in facts.top_level
    assert "LinearSVC" in facts.modules["sklearn.svm"]["names"]
    assert "LinearSVC" not in facts.modules["sklearn.linear_model"]["names"]
    assert "n_estimators" in facts.callables["sklearn.ensemble.RandomForestClassifier"]["params"]
    # How the runtime's own pandas binds a method, and what its scikit-learn checks once fitted.
    drop = facts.classes[facts.callables["pandas.DataFrame"]["class"]]["methods"]["drop"]
    assert (drop["qualname"], drop["positional"], "columns" in drop["kwonly"]) == ("DataFrame.drop", ["self", "labels"], True)
    scaler = facts.classes[facts.callables["sklearn.preprocessing.StandardScaler"]["class"]]
    assert set(scaler["names_checked"]) == {"fit", "fit_transform"} and "transform" in scaler["names_checked"]["fit"]


def test_task_facts_read_the_public_headers(task):
    facts = task_facts(task.public_dir)
    assert facts.headers["train.csv"] == ("id", "name", "sex", "age", "passengerClass", "survived")
    assert facts.sample_columns == ("id", "survived") and facts.sample_rows == 328
    assert {"train.csv", "test.csv", "sample_submission.csv"} <= facts.files


# ----------------------------------------------------------------------------- against the sandbox


@pytest.fixture(scope="module")
def executed(task):
    """Every script above executed once, with proofs still made (the prover's audit mode)."""
    scorer = CodeScorer(workers=2, execute_proved=True)
    names = sorted(ALL_FAILING) + sorted(VALID)
    scripts = [ALL_FAILING[n][0] if n in ALL_FAILING else VALID[n] for n in names]
    proofs = [scorer.prover.prove(task, s) for s in scripts]
    results = scorer.execute([task] * len(scripts), scripts)
    scorer.close()
    return dict(zip(names, zip(proofs, results)))


@pytest.mark.parametrize("name", sorted(ALL_FAILING))
def test_the_run_ends_as_its_proof_says(executed, name):
    proof, result = executed[name]
    assert result.executed and not result.infra_failure and result.valid is False and result.real_score == 0.0
    assert (result.status, result.exception) == (proof.status, proof.exception), result.stderr[-600:]
    # The proof's message is the line the sandbox's traceback ends with; the result lines agree.
    assert proof.message in result.stderr, (proof.message, result.stderr[-600:])
    assert result.error.endswith(proof.message)


@pytest.mark.parametrize("name", sorted(VALID))
def test_unproved_scripts_run(executed, name):
    proof, result = executed[name]
    assert proof is None and result.executed and result.status in ("valid", "invalid_submission", "no_submission")


def test_skipping_a_proved_failure_gives_what_executing_it_gives(task):
    scripts = [FAILING[n][0] for n in ("kaggle_column", "missing_module", "undefined_name")] + [VALID["plain"]]
    outcomes = []
    for execute_proved in (False, True):
        core = ScoringCore(HashSchedule(0.1), Calibrator(), scorer=CodeScorer(workers=2, execute_proved=execute_proved))
        group = core.score([CodeGroup(task, scripts, group_id=0)], streams=["anchor"])[0]
        outcomes.append((group, core.calibrator.state_dict()))
        core.close()
    (skipped, state_skipped), (ran, state_ran) = outcomes
    np.testing.assert_array_equal(skipped.rewards, ran.rewards)
    for key in ("wm_scores", "real_scores", "task_ids"):
        assert state_skipped[key] == state_ran[key], key
    assert len(state_skipped["wm_scores"]) == 4
    assert [s.status for s in skipped.samples] == [s.status for s in ran.samples]
    assert [s.executed for s in skipped.samples] == [False, False, False, True]
    assert all(s.executed for s in ran.samples)
    # A skipped run costs world-model time only.
    for sample in skipped.samples[:3]:
        assert sample.proved and sample.cost.get("execution_s", 0.0) == 0.0 and sample.cost["world_model_s"] > 0


# ----------------------------------------------------------------------------- the whole corpus


def test_no_proof_is_false_on_the_whole_executed_corpus(prover):
    """Every executed row of the shipped corpora, valid ones included: a proof always names the
    failure the run ended with, status and exception class."""
    import json

    from agents.code.handwritten import render_solution
    from wmrl_envs.paths import assets_dir
    from wmrl_envs.world_models.build import corpus as corpus_lib

    tasks, proved, valid = {}, 0, 0
    for name in ("corpus.csv", "dsbench_corpus.csv", "outcome_corpus.csv", "handwritten_corpus.csv"):
        frame = corpus_lib.read_corpus(assets_dir() / "world_models" / name)
        frame = frame[frame["outcome"] != ""]
        for item, row in zip(corpus_lib.corpus_items(frame), frame.itertuples()):
            task = tasks.setdefault(item.task_id, get_task(item.task_id))
            proof = prover.prove(task, item.script(task.spec, render_solution))
            valid += row.outcome == "valid"
            if proof is None:
                continue
            proved += 1
            assert row.outcome != "valid", (item, proof)
            assert (proof.status, proof.exception) == (row.outcome, row.exception or None), (json.dumps(item.key), proof)
    assert proved > 500 and valid > 1000
