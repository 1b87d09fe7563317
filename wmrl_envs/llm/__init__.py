"""Running causal LMs: the chat backends and a local model server, shared by whoever prompts one.

* :mod:`~wmrl_envs.llm.backends`: one chat interface over an OpenAI-compatible endpoint (vLLM,
  a llama.cpp server), an in-process llama.cpp model and a local ``transformers`` checkpoint;
  the LLM world models (:mod:`wmrl_envs.world_models.llm`, :mod:`~wmrl_envs.world_models.llm_outcome`)
  talk through it, and the LM policy finds its default model file here;
* :mod:`~wmrl_envs.llm.server`: a real OpenAI-compatible server on 127.0.0.1 backed by llama.cpp
  (``python -m wmrl_envs.llm.server``), for tests and CPU experiments.

Nothing here knows tasks, scripts or scores; the optional ``llm`` extra is imported only where a
model is loaded or served.
"""
