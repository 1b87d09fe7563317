"""Script analysis: what can be known of a solution script and its task without running either.

* :mod:`~wmrl_envs.analysis.script` parses a script as the sandbox reads it: the one parser the
  other two modules start from;
* :mod:`~wmrl_envs.analysis.code_features` reads the surrogate's static features off the script's
  text (folded constants, estimator families, hyperparameters) and its task's meta-features;
* :mod:`~wmrl_envs.analysis.facts` holds the exact facts proofs rest on: the agent runtime's
  modules and signatures (introspected once per runtime digest) and a task's public files and
  CSV headers (the one reader of them);
* :mod:`~wmrl_envs.analysis.proofs` proves, from those facts, that a script certainly fails.

This room sits below the world models and the scoring core, which read it, and above grading and
the task records; it predicts no score (docs/architecture.md §1, §11).
"""
