"""A seccomp filter refusing new user namespaces, for bwrap as root (no user namespace of its own to forbid them).

A nested user namespace gives a process every capability inside it: the mounts it inherits stay locked, but the
kernel code reachable that way is a common escalation path. The filter answers EPERM to ``unshare`` and ``clone``
with CLONE_NEWUSER, and ENOSYS to ``clone3`` (its flags are behind a pointer a filter cannot read; the C library
then falls back to ``clone``). System calls of another architecture (32-bit binaries) are refused outright, so
they cannot bypass it with other numbers.
"""

from __future__ import annotations

import functools
import os
import platform
import struct
from pathlib import Path

from mtl_graph.core.process_temp import process_file

CLONE_NEWUSER = 0x10000000
_ARCHES = {  # machine: (AUDIT_ARCH, unshare, clone, clone3)
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
_X32_BIT = 0x40000000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38


def _insn(code: int, jt: int = 0, jf: int = 0, k: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The BPF program (struct sock_filter[]) for this machine, None on an architecture it does not know."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, unshare, clone, clone3 = arch
    program = [
        _insn(_LD_ABS, k=4),  # 0: arch
        _insn(_JEQ, 1, 0, audit_arch),  # 1: native? skip the refusal
        _insn(_RET, k=_ERRNO | _EPERM),  # 2: another architecture
        _insn(_LD_ABS, k=0),  # 3: syscall number
        _insn(_JGE, 0, 1, _X32_BIT),  # 4: x32 ABI
        _insn(_RET, k=_ERRNO | _EPERM),  # 5
        _insn(_JEQ, 0, 1, clone3),  # 6
        _insn(_RET, k=_ERRNO | _ENOSYS),  # 7
        _insn(_JEQ, 1, 0, unshare),  # 8: -> 10
        _insn(_JEQ, 0, 3, clone),  # 9: not clone -> 13 (allow)
        _insn(_LD_ABS, k=16),  # 10: low half of the first argument (flags)
        _insn(_JSET, 0, 1, CLONE_NEWUSER),  # 11
        _insn(_RET, k=_ERRNO | _EPERM),  # 12
        _insn(_RET, k=_ALLOW),  # 13
    ]
    if struct.pack("=I", 1) != struct.pack("<I", 1):  # big endian: the low half is the second word
        program[10] = _insn(_LD_ABS, k=20)
    return b"".join(program)


@functools.cache
def filter_file() -> Path | None:
    """The program written once per process to a file bwrap reads it from (None: unknown architecture)."""
    program = filter_program()
    if program is None:
        return None
    fd, name = process_file("mtl-seccomp-", ".bpf")  # a killed server's file goes with the next one made
    with os.fdopen(fd, "wb") as fh:
        fh.write(program)
    return name
