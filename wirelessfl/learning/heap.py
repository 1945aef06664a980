"""Keep freed CPU memory in the process, so every training step does not page-fault.

A lockstep step allocates and frees activations of several MB each (LeNet-5's
first convolution output for 13 slots x 32 samples is 7.8 MB). glibc's malloc
serves blocks that large with ``mmap`` and returns them with ``munmap``, or
trims the top of the heap once enough is free; either way the next step's
allocation touches fresh pages, and the kernel zero-fills them page by page.
Measured on the 2-core Xeon (docs/research/notes/2026-11-25-hand-written-engine-history.md): 1,000-8,000 minor faults and
1.4-11 ms of system time in a 19-32 ms single-threaded step, and ~100,000
faults a round of 100 clients' training and evaluation on two worker threads.

:func:`retain_freed_memory` sets glibc's mmap threshold to its largest value
(32 MiB: smaller blocks come from the heap and are reused), the trim threshold
to 1 GiB (freed memory stays in the process for the next step) and the top pad
to 128 MiB: the engine's worker threads allocate from glibc's per-thread
arenas, whose 64 MiB heaps are unmapped as soon as they empty, whatever the
trim threshold, unless the pad is larger than a heap. The process then keeps
up to its peak working set instead of returning it between steps (scenario 2's
peak RSS was 3.6 GB with the setting, 3.4-4.9 GB without). Other C libraries
(musl, macOS, Windows) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_TOP_PAD = -2
MMAP_THRESHOLD = 32 * 2**20
"""glibc's largest mmap threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``); mallopt refuses more."""
TRIM_THRESHOLD = 2**30
TOP_PAD = 128 * 2**20
"""Also keeps worker threads' heaps: glibc deletes an emptied 64 MiB thread heap unless the pad exceeds it."""

_applied: bool | None = None


def retain_freed_memory() -> bool:
    """Make glibc's malloc reuse freed blocks up to 32 MiB instead of unmapping them; once per process.

    Returns whether the setting is in force (False where the C library is not glibc).
    Setting either threshold turns off glibc's dynamic threshold, so both are set (and the top pad).
    """
    global _applied
    if _applied is None:
        _applied = _set_glibc_thresholds()
    return _applied


def _set_glibc_thresholds() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(bool(mallopt(option, value)) for option, value in settings)
