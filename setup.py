"""The package list, the one part of the build that pyproject.toml cannot say by itself.

The code packages are found on disk, so a new subpackage ships without editing a list. The
top-level data folders ship as two more packages (their folders and files are mapped in
pyproject.toml); ``packages.find`` cannot add a package whose folder has another name.
"""

from setuptools import find_namespace_packages, setup

CODE = find_namespace_packages(include=["wmrl_envs*", "agents*", "trainers*"], exclude=["*.__pycache__"])
setup(packages=[*CODE, "wmrl_envs._assets", "wmrl_envs._leaderboards"])
