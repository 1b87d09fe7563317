"""Benchmark scripts (not tests): each writes ``bench/results/<name>.json`` and ``.md``.

Run a script as a module from the repository root, so that it imports this checkout's code::

    python -m bench.<name> [arguments]        # e.g. python -m bench.stress --quick

Scripts never import one another. What several share lives in helper modules, which have no
``main``: :mod:`bench.common` (result files, provenance footer, small statistics),
:mod:`bench.archive` (per-run records, one compressed archive per run folder),
:mod:`bench.curves` (learning curves), :mod:`bench.corpus_rows` (executed corpus rows and their
scripts) and :mod:`bench.training` (the fast task sets and the execution memo of the training
benchmarks).
"""
