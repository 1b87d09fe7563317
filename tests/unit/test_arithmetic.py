"""Which arithmetic the sandbox pins (wmrl_envs/sandbox/arithmetic.py); that it takes effect is in test_sandbox.py."""

from __future__ import annotations

import pytest

from wmrl_envs.sandbox.arithmetic import (
    NATIVE,
    PORTABLE,
    PORTABLE_ENV,
    arithmetic,
    arithmetic_env,
    cpu_flags,
    supports_portable,
)

V3 = "fpu sse2 avx f16c fma avx2 bmi1 bmi2 abm movbe xsave"
AVX512_HOST = f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {V3} avx512f avx512bw\n\nprocessor\t: 1\n"


def host(flags: str) -> str:
    return f"processor\t: 0\nflags\t\t: {flags}\n"


def test_flags_are_read_from_the_first_processor():
    assert cpu_flags(AVX512_HOST) == {*V3.split(), "avx512f", "avx512bw"}
    assert cpu_flags("processor\t: 0\nmodel name\t: something\n") == frozenset()


@pytest.mark.parametrize(
    ("machine", "cpuinfo", "expected"),
    [
        ("x86_64", AVX512_HOST, True),  # AVX-512 hosts run the x86-64-v3 code too
        ("AMD64", host(V3), True),
        ("x86_64", host("fpu sse2 sse4_2 avx"), False),  # no AVX2: Haswell kernels are illegal instructions
        ("x86_64", host(V3.replace(" fma", "")), False),  # AVX2 without FMA
        ("x86_64", host(V3.replace(" movbe", "")), False),  # numpy's X86_V3 needs every v3 feature
        ("aarch64", AVX512_HOST, False),  # another architecture: there is no x86-64-v3 there
    ],
)
def test_the_pin_needs_an_x86_64_v3_host(machine, cpuinfo, expected):
    assert supports_portable(machine, cpu_flags(cpuinfo)) is expected


def test_the_environment_matches_the_arithmetic():
    assert arithmetic() in (PORTABLE, NATIVE)
    assert arithmetic_env() == ({} if arithmetic() == NATIVE else PORTABLE_ENV)
