"""Landlock: the kernel's unprivileged access control, as a second file-system layer of the worker.

The worker restricts itself with a ruleset that handles every access right its kernel knows and grants
none, so after :func:`restrict` it can open, list, create, remove, execute or truncate nothing by path
(descriptors it already holds keep working). Where the kernel's Landlock ABI has them, the same
ruleset also refuses TCP ``bind``/``connect`` (ABI 4), and scopes abstract Unix sockets and signals to
the worker's own domain (ABI 6): it cannot connect to an abstract socket or signal a process outside
it. Every worker restricts itself separately, so each is its own domain: workers cannot signal or
``ptrace`` each other either.

It needs Linux 5.13 or later with Landlock enabled (``lsm=...,landlock``); where
``landlock_create_ruleset`` is missing or disabled the layer is reported missing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
from typing import Final

__all__ = ("abi_version", "restrict")

_CREATE_RULESET: Final = 444
_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1

#: File-system rights by the ABI version that introduced them: execute .. make-symlink (1), refer (2),
#: truncate (3), ioctl on devices (5).
_FS_RIGHTS: Final = ((1, (1 << 13) - 1), (2, 1 << 13), (3, 1 << 14), (5, 1 << 15))
_NET_RIGHTS: Final = 0b11  # bind and connect TCP (ABI 4)
_SCOPES: Final = 0b11  # abstract Unix sockets and signals (ABI 6)


@functools.cache
def abi_version(libc: ctypes.CDLL) -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled (asked once: the
    template asks, its workers inherit the answer)."""
    if sys.platform != "linux":
        return 0
    version = int(libc.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def _ruleset_attr(abi: int) -> bytes:
    fs = 0
    for since, rights in _FS_RIGHTS:
        if abi >= since:
            fs |= rights
    if abi >= 6:
        return struct.pack("QQQ", fs, _NET_RIGHTS, _SCOPES)
    if abi >= 4:
        return struct.pack("QQ", fs, _NET_RIGHTS)
    return struct.pack("Q", fs)


def restrict(libc: ctypes.CDLL) -> bool:
    """Restrict the calling process to no path access at all (needs ``no_new_privs``); False if not."""
    abi = abi_version(libc)
    if abi < 1:
        return False
    attr = _ruleset_attr(abi)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = int(libc.syscall(_CREATE_RULESET, buffer, len(attr), 0))
    if ruleset < 0:
        return False
    try:
        return int(libc.syscall(_RESTRICT_SELF, ruleset, 0)) == 0
    finally:
        os.close(ruleset)
