"""Code agents: policies that answer ML-engineering tasks with a solution script.

* :mod:`agents.code.grammar`: the solution grammar (slots in, a complete scikit-learn script out).
* :mod:`agents.code.features`: a fixed-size feature vector per task, for policies to condition on.
* :mod:`agents.code.policy`: :class:`~agents.code.policy.GrammarPolicy`, the CPU default policy
  over the grammar's slots.
* :mod:`agents.code.lm_policy`: :class:`~agents.code.lm_policy.CausalLMPolicy`, a ``transformers``
  causal LM (optionally with LoRA) that writes the response token by token.

Nothing is imported here: import the module you need (the LM policy pulls in transformers).
"""
