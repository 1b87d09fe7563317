"""The arithmetic agent code runs with: the same vector code on every x86-64 host of level v3 or above.

numpy and its OpenBLAS pick their compute kernels by the processor they load on. An AVX-512
kernel adds in another order than an AVX2 one, so one script fits a slightly different model on
each host, and its score can land a leaderboard rank or more apart; one changed reward then
sends a training run down another path. Measured on the stress grid (docs/robustness.md, "Runs
across machines"): the untrained policy scored 0.2876 held-out on an AVX-512 host and 0.2853 on
an AVX2 one. Pinning OpenBLAS alone made step 0 agree to the last digit but not step 8; pinning
numpy's SIMD dispatch as well made the whole `real` run (12 steps, 480 executions) give the AVX2
host's curve to the last digit.

So every executor pins both in the agent's environment when the host can run the x86-64-v3 level
(AVX2, FMA, BMI and the rest, which x86-64 servers have had since 2013):
``OPENBLAS_CORETYPE=Haswell`` and ``NPY_ENABLE_CPU_FEATURES=X86_V3`` (numpy's dispatch beyond its
baseline stops at that level; the name is the runtime's numpy 2.4 spelling, and
``tests/unit/test_sandbox.py`` checks it takes effect). Any other host keeps the libraries' own
choice: a kernel it cannot execute would kill every script with an illegal instruction. Results
record which arithmetic ran (``provenance()["arithmetic"]``); two hosts agree when both say
``x86-64-v3``.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

#: The pinned level, as results record it.
PORTABLE = "x86-64-v3"
#: What results record when the libraries choose by themselves.
NATIVE = "native"
#: The agent's environment at the pinned level.
PORTABLE_ENV = {"OPENBLAS_CORETYPE": "Haswell", "NPY_ENABLE_CPU_FEATURES": "X86_V3"}

# x86-64-v3 in /proc/cpuinfo's spelling (LZCNT is "abm"); numpy refuses to enable X86_V3 without them.
_V3_FLAGS = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})


def cpuinfo_field(cpuinfo: str, name: str) -> str | None:
    """The first processor's ``name`` field in a ``/proc/cpuinfo`` text (None when it has none)."""
    for line in cpuinfo.splitlines():
        if line.startswith(name):
            return line.partition(":")[2].strip()
    return None


@functools.lru_cache(maxsize=1)
def read_cpuinfo() -> str:
    """This host's ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first processor's feature flags in a ``/proc/cpuinfo`` text (empty when it has none)."""
    return frozenset((cpuinfo_field(cpuinfo, "flags") or "").split())


def supports_portable(machine: str, flags: frozenset[str]) -> bool:
    """Whether a host of this architecture and these CPU flags can run the pinned level."""
    return machine.lower() in ("x86_64", "amd64") and _V3_FLAGS <= flags


@functools.lru_cache(maxsize=1)
def arithmetic() -> str:
    """The arithmetic this host's sandboxed scripts run with: :data:`PORTABLE` or :data:`NATIVE`."""
    return PORTABLE if supports_portable(platform.machine(), cpu_flags(read_cpuinfo())) else NATIVE


def arithmetic_env() -> dict[str, str]:
    """The environment variables that pin the arithmetic on this host (none where it cannot)."""
    return dict(PORTABLE_ENV) if arithmetic() == PORTABLE else {}
