"""The built-in tasks' leaderboards, installed as the package ``wmrl_envs._leaderboards``.

This file makes the folder a regular package: setuptools' editable installs cannot import a
mapped folder without one, and with it ``importlib.resources`` finds the folder in a wheel and
in an editable install alike (:func:`wmrl_envs.paths.leaderboards_dir`).
"""
