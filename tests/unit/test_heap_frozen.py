"""`wmrl train` trains with the heap alive at its start left out of the garbage collector's walks."""

from __future__ import annotations

import gc

from trainers.cli import heap_frozen


def test_the_heap_is_frozen_while_the_block_runs_and_given_back_after():
    assert gc.get_freeze_count() == 0
    with heap_frozen():
        assert gc.get_freeze_count() > 1000  # the interpreter, the libraries, this test session
        cycle: list = []
        cycle.append(cycle)  # made inside: still the collector's
        assert gc.is_tracked(cycle) and any(o is cycle for o in gc.get_objects())
    assert gc.get_freeze_count() == 0
