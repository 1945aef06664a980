"""Slot groups and the worker threads that train them concurrently on a CPU.

Tiny per-group ops scale badly over intra-op threads, whereas groups of slots
are independent (their own rows, buffers and results): worker threads with one
intra-op thread each are faster and, with a partition that does not follow the
thread count, give the same results in any interleaving.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import torch

GROUP_MULTIPLE = 2
"""On a CPU, slots are split into a multiple of this many groups, whatever the thread count.

The partition decides the shapes of the batched kernels, and kernels of other
shapes round differently (1e-8, then amplified by training), so a partition
that followed the thread count made results depend on it: ``OMP_NUM_THREADS=1``
vs 2, or a sweep's process pool vs in-process. Each group also always runs with
one intra-op thread (:func:`run_groups`). Threads now only decide how many
groups run at once; 2 keeps both cores of the 2-core machines busy, and a CPU
with more cores than groups leaves the rest idle (docs/research/notes/2026-11-25-hand-written-engine-history.md).
"""


CPU_GROUP_SAMPLES = 512
"""Samples of one stacked pass on a CPU by default: a group's activations stay in cache, one group per worker thread."""

GPU_GROUP_SAMPLES = 8192
"""Samples of one stacked pass on a GPU by default (1,000 LeNet-5 clients at batch 32 in 4 groups of 250, each
about 1.1 GB of activations by ``learning/memory.py``'s estimate). Each group's step is a fixed number of kernel launches (about 170 for LeNet-5), so groups sized
for a CPU leave a GPU waiting for the host: 100 clients in groups of 16 kept an H200 busy 19% of an epoch, and
the launches per step grew with the clients (1,175 at 100, 11,179 at 1,000; ``benchmarks/profile_cuda.py``).
This size made 100 LeNet-5 clients 3.6x faster there (8.2x -> 31.7x the per-client loop, busy 66%)."""


def group_samples(device: torch.device) -> int:
    """``LockstepEngine``'s default ``max_samples`` on this device."""
    return CPU_GROUP_SAMPLES if device.type == "cpu" else GPU_GROUP_SAMPLES


def balanced_group(n: int, largest: int, multiple: int = 1) -> int:
    """Group size <= ``largest`` that splits n slots into the fewest, most equal groups (20 by 16 -> 10 + 10).

    The number of groups is a multiple of ``multiple`` (when there are enough
    slots), so that workers get equal loads.
    """
    if not n:
        return 1
    groups = math.ceil(n / largest)
    if multiple > 1 and n >= multiple:
        groups = math.ceil(groups / multiple) * multiple
    return math.ceil(n / groups)


def partition(device: torch.device) -> int:
    """``multiple`` of :func:`balanced_group` on this device: fixed on a CPU, one group at a time elsewhere."""
    return GROUP_MULTIPLE if device.type == "cpu" else 1


class _GroupWorkers:
    """A persistent pool of CPU worker threads, each running its tasks with one intra-op thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._size = 0

    def run(self, task, arguments: Sequence[int], workers: int) -> None:
        """``task(a)`` for every a, on ``workers`` threads; returns when all are done, re-raising the first error."""
        threads = torch.get_num_threads()
        with self._lock:
            if self._size != workers:
                if self._pool is not None:
                    self._pool.shutdown()
                self._pool, self._size = ThreadPoolExecutor(workers, thread_name_prefix="lockstep"), workers
            futures = [self._pool.submit(_single_threaded, task, a) for a in arguments]
            wait(futures)
            if any(future.exception() is None and future.result() for future in futures):
                # torch.set_num_threads in a worker also set the default of threads started later
                torch.set_num_threads(threads)
            for future in futures:
                future.result()


_WORKERS = _GroupWorkers()


def _workers(device: torch.device) -> int:
    """Threads for independent slot groups: one per intra-op thread on a CPU, one on other devices."""
    return torch.get_num_threads() if device.type == "cpu" else 1


def _single_threaded(task, argument: int) -> bool:
    """``task(argument)`` with one intra-op thread in this worker (OpenMP's setting is per thread).

    Returns whether this call changed the setting.
    """
    changed = torch.get_num_threads() != 1
    if changed:
        torch.set_num_threads(1)
    task(argument)
    return changed


def run_groups(task, starts: Sequence[int], device: torch.device) -> None:
    """``task(start)`` for every group start, each with one intra-op thread; on a multi-core CPU concurrently.

    Tiny per-group ops scale badly over intra-op threads, whereas groups are
    independent (their own rows, buffers and results), so worker threads with one
    intra-op thread each are faster and give the same results in any
    interleaving. A single group, or a single thread, runs in this thread, also
    with one intra-op thread, so that no kernel's result depends on the thread
    count. The caller's thread count is left as it was.
    """
    workers = _workers(device)
    if device.type != "cpu":
        for start in starts:
            task(start)
    elif workers <= 1 or len(starts) <= 1:
        threads = torch.get_num_threads()
        try:
            for start in starts:
                _single_threaded(task, start)
        finally:
            torch.set_num_threads(threads)
    else:
        _WORKERS.run(task, starts, workers)
