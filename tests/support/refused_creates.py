"""Make the kernel refuse this process's file creations with a chosen errno (seccomp).

A disk quota that is spent fails ``open(O_CREAT)`` and writes with
``EDQUOT``. This machine's file systems offer no quotas a test could set
(tmpfs is built without them; ext4 quotas need a loop mount and the quota
tools), so a seccomp filter installed in a child process makes the kernel
answer every ``openat`` with ``O_CREAT`` with that errno: the store's own
code then meets a real ``OSError`` from a real system call, as it would on a
spent quota. Nothing outside the child is affected, and the filter cannot be
lifted by the child (seccomp filters are for the life of the process).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_ARCHES = {"x86_64": (0xC000003E, 257), "aarch64": (0xC00000B7, 56)}
"""machine -> (AUDIT_ARCH_*, openat's syscall number)."""

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS_W = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06


def supported() -> bool:
    """Whether this machine's architecture is one the filter knows."""
    return platform.machine() in _ARCHES


def refuse_creates(errno_value: int) -> None:
    """From now on, ``openat(..., O_CREAT, ...)`` in this process fails with ``errno_value``."""
    arch, openat = _ARCHES[platform.machine()]
    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (args[2] = flags, low word first)
    program = [
        (_LD_ABS_W, 0, 0, 4),
        (_JEQ_K, 0, 5, arch),
        (_LD_ABS_W, 0, 0, 0),
        (_JEQ_K, 0, 3, openat),
        (_LD_ABS_W, 0, 0, 32),
        (_JSET_K, 0, 1, os.O_CREAT),
        (_RET_K, 0, 0, _RET_ERRNO | errno_value),
        (_RET_K, 0, 0, _RET_ALLOW),
    ]
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog_buffer, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
