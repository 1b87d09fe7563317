"""The seccomp filter every contained run gets: a few system calls agent code never needs, denied.

Namespaces do not cover everything a kernel keeps per user. Keyrings are the clearest case:
keys are charged to the host uid, listed in ``/proc/keys`` for every process of that uid and
readable by serial, so without this filter two runs of one uid (concurrent ones, or a run and
the next while a finished run's namespace lingers) could pass data through them. The filter
returns ``EPERM`` for:

* ``add_key``, ``request_key``, ``keyctl``: the keyrings above;
* ``userfaultfd``, ``perf_event_open``, ``bpf``: the usual helpers of kernel exploits and side
  channels (Docker's default profile denies them too);
* ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``: a large attack surface that
  scientific Python never uses.

A system call of another ABI (32-bit calls on x86-64, the x32 ABI) could name the same calls by
other numbers, so every call of a foreign ABI is denied as well.

The program is classic BPF, built here once and handed to each sandbox as bytes: bubblewrap
reads it from ``--seccomp FD``; the warm executor's zygote, which runs without WMRL's packages,
receives it at start and installs it in each run's init (``zygote.py``). Docker runs keep the
engine's default profile, which denies the same calls.
"""

from __future__ import annotations

import errno
import platform
import struct

from wmrl_envs.errors import SandboxUnavailableError

#: The calls denied with EPERM, by name.
DENIED_SYSCALLS = (
    "add_key", "request_key", "keyctl",
    "userfaultfd", "perf_event_open", "bpf",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip

# Per machine: the audit architecture seccomp reports, the numbers of the denied calls, and
# the first number of a second ABI that shares the architecture (x32 on x86-64).
_ARCHES = {
    "x86_64": (0xC000003E, {"add_key": 248, "request_key": 249, "keyctl": 250, "userfaultfd": 323,
                            "perf_event_open": 298, "bpf": 321, "io_uring_setup": 425, "io_uring_enter": 426,
                            "io_uring_register": 427}, 0x40000000),
    "aarch64": (0xC00000B7, {"add_key": 217, "request_key": 218, "keyctl": 219, "userfaultfd": 282,
                             "perf_event_open": 241, "bpf": 280, "io_uring_setup": 425, "io_uring_enter": 426,
                             "io_uring_register": 427}, None),
}

# Classic BPF opcodes and seccomp's return values (linux/filter.h, linux/seccomp.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_IF_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # in struct seccomp_data
_INSTRUCTION = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k


def filter_program(machine: str | None = None) -> bytes:
    """The filter as ``struct sock_filter`` instructions, for ``machine`` (default: this one).

    Raises :class:`SandboxUnavailableError` on a machine whose system-call numbers are not known
    here (the sandbox would otherwise run without the filter it promises).
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise SandboxUnavailableError(f"no seccomp filter for the {machine} architecture; "
                                      f"known: {', '.join(sorted(_ARCHES))}")
    arch, numbers, second_abi = _ARCHES[machine]
    denied = [numbers[name] for name in DENIED_SYSCALLS]
    # Layout: check the ABI, load the number, one comparison per denied call, allow, deny.
    body = [(_LOAD_WORD, 0, 0, _NR_OFFSET)]
    if second_abi is not None:
        body.append((_JUMP_IF_AT_LEAST, "deny", 0, second_abi))
    body += [(_JUMP_IF_EQUAL, "deny", 0, number) for number in denied]
    program = [(_LOAD_WORD, 0, 0, _ARCH_OFFSET), (_JUMP_IF_EQUAL, 0, "deny", arch), *body, (_RETURN, 0, 0, _ALLOW),
               (_RETURN, 0, 0, _DENY)]
    deny_at = len(program) - 1
    encoded = []
    for index, (code, jump_true, jump_false, k) in enumerate(program):
        # Jumps are relative to the next instruction.
        jt = deny_at - index - 1 if jump_true == "deny" else jump_true
        jf = deny_at - index - 1 if jump_false == "deny" else jump_false
        encoded.append(_INSTRUCTION.pack(code, jt, jf, k))
    return b"".join(encoded)
