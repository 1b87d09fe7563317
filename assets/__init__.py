"""WMRL's shipped artefacts, installed as the package ``wmrl_envs._assets`` (pyproject.toml).

This file makes the folder a regular package: setuptools' editable installs cannot import a
mapped folder without one, and with it ``importlib.resources`` finds the folder in a wheel and
in an editable install alike (:func:`wmrl_envs.paths.assets_dir`).
"""
