"""Build-time code for the world models: never imported while a world model predicts.

* :mod:`~wmrl_envs.world_models.build.corpus` plans the executed corpus the surrogate and its
  status head are trained on (``scripts/build_world_model.py``), reads and writes its CSV rows,
  and renders a row's script again (its caller hands it the grammar's renderer and the executor).

``tests/unit/test_architecture.py`` checks that no runtime module imports this room.
"""
