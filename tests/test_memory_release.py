"""Freed memory given back between the chunks of a long computation (``elmo_features.util.memory``): on glibc the
holes that freed per-sentence arrays leave in the heap leave the resident set."""
from __future__ import annotations

import ctypes.util
import platform

import numpy as np
import pytest

from elmo_features.util.memory import release_freed_memory


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(platform.system() != "Linux" or "libc" not in (ctypes.util.find_library("c") or ""),
                    reason="glibc's malloc_trim: Linux with glibc only")
def test_freed_heap_holes_leave_the_resident_set():
    big = np.ones(16 * 2 ** 20 // 8)  # a 16 MB block freed: glibc then serves blocks up to 16 MB from its heap
    del big
    blocks = [np.ones(2 ** 20 // 8 * 3) for _ in range(200)]  # 3 MB each, 600 MB in the heap
    keep = blocks[-1].copy()  # (one block after them stays: the heap cannot simply shrink from its top)
    tail = np.ones(100)
    del blocks
    before = _rss_mb()
    release_freed_memory()
    after = _rss_mb()
    assert before - after > 300, (before, after)
    assert keep.sum() == 2 ** 20 // 8 * 3 and tail.sum() == 100
