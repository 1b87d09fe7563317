"""World models: predict a solution script's score without executing it.

* :class:`~wmrl_envs.world_models.llm.LLMWorldModel`: a prompted causal LM (``"llm"``).
* ``SurrogateWorldModel`` in :mod:`wmrl_envs.world_models.surrogate`: an embedding regressor
  (``"surrogate"``).

Build either with :func:`make_world_model`; implementations are imported only when chosen.
"""

from wmrl_envs.world_models.base import Prediction, WorldModel, make_world_model

__all__ = ["Prediction", "WorldModel", "make_world_model"]
