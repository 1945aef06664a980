"""retain_freed_memory: glibc serves multi-MB blocks from the heap (reused) instead of fresh mmaps."""

import ctypes
import platform
import subprocess
import sys

import pytest

from wirelessfl.learning.heap import retain_freed_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# A fresh interpreter mallocs 16 MB and reports how much of it glibc mapped with mmap
# (mallinfo2().hblkhd): all of it under glibc's defaults (threshold 128 KiB), none once
# the threshold is 32 MiB, as a CPU LockstepEngine sets it.
PROBE = """
import ctypes, sys
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
if sys.argv[1] == "retain":
    from wirelessfl.learning.heap import retain_freed_memory
    assert retain_freed_memory()
if sys.argv[1] == "engine":
    from wirelessfl.learning.lockstep import LockstepEngine
    from wirelessfl.learning.models import get_architecture
    LockstepEngine(get_architecture("mlp", (1, 2, 2), 2))
before = libc.mallinfo2().hblkhd
block = libc.malloc(16 * 2**20)
print(libc.mallinfo2().hblkhd - before)
"""


def _mapped_bytes(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's; other C libraries are left alone")
def test_multi_megabyte_blocks_come_from_the_reused_heap_not_from_fresh_mmaps():
    try:
        ctypes.CDLL("libc.so.6").mallinfo2
    except AttributeError:
        pytest.skip("this glibc has no mallinfo2 (before 2.33)")
    assert _mapped_bytes("default") >= 16 * 2**20
    assert _mapped_bytes("retain") == 0
    assert _mapped_bytes("engine") == 0  # a CPU engine sets it


def test_retain_freed_memory_is_idempotent_and_says_whether_it_applies():
    assert retain_freed_memory() is GLIBC
    assert retain_freed_memory() is GLIBC
