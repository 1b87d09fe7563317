"""Who agent code is on the host, what it may take of the kernel's per-user budgets, and where it can reach.

The kernel keeps some budgets per host uid, whatever the namespaces: inotify instances and
watches, fanotify groups and marks, POSIX message-queue bytes, pending signals. Runs that share
a host uid share them, so one run could take them all and make a concurrent run fail (a denial
of service, and a covert channel). Two answers, by executor:

* The cold ``bwrap`` and ``docker`` executors start each run as a host uid of its own, drawn
  from :data:`RUN_UIDS` (a range no distribution allocates), never root: its budgets are its own.
* Warm runs are forks of one zygote and so all host uid 65534; each run gets a share of each
  budget (:func:`per_run_user_limits`, :func:`per_run_rlimits`) sized for
  :data:`CONCURRENT_RUNS` runs at once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import resource
import stat
import tempfile
from pathlib import Path

#: Host uids (and gids) of cold and Docker runs: 2^24 ids below 2^31, far above the ranges that
#: distributions give users (< 60000) and subordinate ids (100000 + 65536 n for small n).
RUN_UIDS = range(2**31 - 2**24, 2**31)
#: How many warm runs at once the per-uid budgets are divided for (at least 16, else one per core).
CONCURRENT_RUNS = max(16, os.cpu_count() or 1)
# The per-user-namespace limits a warm run gets its share of (those this kernel has).
_USER_LIMITS = ("max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks")
# The per-uid rlimits whose totals the kernel also bounds over all of a uid's processes.
_SHARED_RLIMITS = ("RLIMIT_MSGQUEUE", "RLIMIT_SIGPENDING")


def run_uid(run_name: str) -> int:
    """The host uid of the run whose folder is ``run_name`` (unique): a hash of the name, so every
    step of the run agrees on it; concurrent runs share one with odds of about n^2 / 2^25."""
    digest = int.from_bytes(hashlib.sha256(run_name.encode()).digest()[:8], "big")
    return RUN_UIDS[digest % len(RUN_UIDS)]


@functools.cache  # the host's limits, read once: every warm run asks
def per_run_user_limits() -> dict[str, int]:
    """A warm run's share of each per-uid kernel object budget, by ``/proc/sys/user`` name."""
    shares = {}
    for name in _USER_LIMITS:
        path = Path("/proc/sys/user") / name
        if path.exists():
            shares[name] = max(1, int(path.read_text()) // CONCURRENT_RUNS)
    return shares


@functools.cache  # the host's limits, read once: every warm run asks
def per_run_rlimits() -> dict[str, int]:
    """A warm run's share of the per-uid rlimits whose total the kernel bounds over all runs.

    The total is the host's own limit (raising it takes CAP_SYS_RESOURCE, which containers
    seldom grant), so a share is small: 51,200 bytes of POSIX message queues on a default host,
    less than one queue with the default attributes (about 80 KiB) needs.
    """
    return {name: max(1, _host_limit(name) // CONCURRENT_RUNS) for name in _SHARED_RLIMITS}


def _host_limit(name: str) -> int:
    soft, _ = resource.getrlimit(getattr(resource, name))
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def traversable_temp_dir() -> Path:
    """A temp folder that every uid can reach by path: the system temp dir where it is, else
    ``/tmp``, ``/var/tmp`` or ``/dev/shm``.

    A sandbox that starts as an unprivileged uid resolves its bind sources as that uid, so they
    must not sit below a folder closed to others, as a private ``TMPDIR`` (mode 0700, what
    ``mktemp -d`` and per-job temp dirs make) is.
    """
    candidates = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
    for folder in candidates:
        if folder.is_dir() and reachable_by_others(folder) and os.access(folder, os.W_OK):
            return folder
    raise FileNotFoundError(f"no temp folder that other users can enter among {', '.join(map(str, candidates))}")


def reachable_by_others(folder: Path) -> bool:
    """Whether a uid with no rights of its own can enter ``folder`` (every ancestor lets others search)."""
    folder = folder.resolve()
    return all(os.stat(part).st_mode & stat.S_IXOTH for part in (folder, *folder.parents))
