"""Build-time code for the built-in suites: never imported while tasks are only loaded and graded.

* :mod:`~wmrl_envs.tasks.build.suites` generates task folders from the suite files;
* :mod:`~wmrl_envs.tasks.build.description` writes the ``description.md`` an agent reads;
* :mod:`~wmrl_envs.tasks.build.lock` writes and checks ``assets/suites/<suite>.lock.json``;
* :mod:`~wmrl_envs.tasks.build.population` is the reference population whose scores become the
  leaderboards (``scripts/build_leaderboards.py``).
"""
