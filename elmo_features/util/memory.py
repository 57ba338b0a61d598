"""Freed memory given back to the operating system between the chunks of a long computation.

glibc's malloc keeps memory a program frees for its next allocations; its threshold for serving a large allocation
from its own heap rather than from a fresh mapping grows with the largest block freed (up to 32 MB), so a loop
over chunks of per-sentence arrays (each 0.1-3 MB) leaves the heap full of freed holes that still count in the
resident set: gigabytes over SemCor and WordNet's glosses. ``release_freed_memory`` asks glibc to hand the free
pages back (``malloc_trim(0)``, which also releases free pages inside the heap since glibc 2.8); elsewhere (musl,
macOS, Windows) it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util

_trim = None  # glibc's malloc_trim, or False where there is none (looked up once)


def release_freed_memory() -> None:
    """Give the memory freed so far back to the operating system where the C library can (glibc); a few ms."""
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):  # (not glibc)
            _trim = False
    if _trim:
        _trim(0)
