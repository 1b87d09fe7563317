"""World models: predict how a solution script ends and what it scores, without executing it.

* :class:`~wmrl_envs.world_models.llm.LLMWorldModel`: a prompted causal LM (``"llm"``), and
  :mod:`~wmrl_envs.world_models.llm_outcome`, the LM asked for the outcome (``"llm_outcome"``);
  the chat backends they talk through are :mod:`wmrl_envs.llm`.
* ``SurrogateWorldModel`` in :mod:`wmrl_envs.world_models.surrogate`: an embedding regressor
  (``"surrogate"``) with its status head (:mod:`~wmrl_envs.world_models.status_head`).
* :mod:`~wmrl_envs.world_models.corrupted`: any world model made wrong on purpose (``"corrupted"``,
  the stress grid).

Build any of them with :func:`make_world_model`; implementations are imported only when chosen.
What they read of a script without running it (its features, the facts, the proofs of failure)
is script analysis, :mod:`wmrl_envs.analysis`; the training corpus is build-time code,
:mod:`wmrl_envs.world_models.build`.
"""

from wmrl_envs.world_models.base import DEFAULT_WORLD_MODEL, Prediction, WorldModel, make_world_model

__all__ = ["DEFAULT_WORLD_MODEL", "Prediction", "WorldModel", "make_world_model"]
