"""WMRL environments served to other stacks (``wmrl_envs.integrations.openenv``: an OpenEnv server).

Each module imports its optional library itself and is imported only on demand, never by
``import wmrl_envs``. An integration adds no scoring logic: rewards come from the env's
:class:`~wmrl_envs.scoring.ScoringCore`.
"""
