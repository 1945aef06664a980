"""Run sweep units: in process, in a spawn process pool, or on Ray; a failed unit is retried once.

A unit is ``simulate(scenario, run_dir=unit_dir)``: it resumes from its own
checkpoints and counts as finished once ``trace.parquet`` and
``clients.parquet`` exist, so a finished unit is never run again. Every
executor calls the same :func:`run_unit`, and all randomness derives from
the seeds, so the three give the same tables. A unit is claimed by one process
at a time (:func:`claim`), and pool workers die with the sweep's process
(:func:`die_with_parent`), so a killed sweep and its ``--resume`` never write
the same unit.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelessfl.config import Scenario, dump_scenario
from wirelessfl.learning.ray_connect import import_ray, join

EXECUTORS = ("local", "process", "ray")
EventFn = Callable[[str, "UnitTask", Any], None]
#: What an executor runs for each task: ``work(task, threads, on_round) -> info`` (default :func:`run_unit`;
#: ``wirelessfl tune`` passes its trial function). Must be importable by name for the pool and Ray.
WorkFn = Callable[..., dict]
LOCK_NAME = "unit.lock"
PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 0.5


@dataclass(frozen=True)
class UnitTask:
    """What a worker needs: picklable, no torch objects."""

    key: str
    label: str
    dir: str
    scenario: Scenario


@dataclass
class Outcome:
    status: str
    error: str = ""
    attempts: int = 0
    trained_units: int = 0
    computed: bool = False
    wall_s: float = 0.0


def is_done(unit_dir: Path) -> bool:
    return (unit_dir / "trace.parquet").is_file() and (unit_dir / "clients.parquet").is_file()


class UnitBusy(RuntimeError):
    """Another live process holds the unit's claim (``unit.lock``); this one must not write the unit."""


@contextmanager
def claim(unit_dir: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``unit_dir/unit.lock`` while the unit runs, so one process at a time writes it.

    The lock belongs to the open file, so a holder that dies (even by SIGKILL)
    releases it: a stale lock file never blocks a ``--resume``. A second
    process finding it held raises :class:`UnitBusy` at once rather than
    waiting, since the holder may run for hours; the sweep reports the unit
    as failed and a later ``--resume`` runs it. No claim where there is no
    ``fcntl`` (Windows).
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(unit_dir / LOCK_NAME, "a+") as handle:  # "a": opening never truncates the holder's pid
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            raise UnitBusy(
                f"units/{unit_dir.name} is being run by another process"
                f"{f' (pid {holder})' if holder.isdigit() else ''}, which holds its {LOCK_NAME}; "
                "run `wirelessfl sweep --resume` on the sweep after that process has ended"
            ) from None
        try:
            handle.truncate(0)
            handle.write(str(os.getpid()))
            handle.flush()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def run_unit(task: UnitTask, threads: int | None = None, on_round: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Train and time one unit into its directory (a normal simulate run directory)."""
    from wirelessfl.results.io import atomic_write_json, atomic_write_text
    from wirelessfl.results.run_outputs import write_run_outputs
    from wirelessfl.simulate import simulate

    unit_dir = Path(task.dir)
    if is_done(unit_dir):
        return {"trained_units": 0, "computed": False}
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    unit_dir.mkdir(parents=True, exist_ok=True)
    with claim(unit_dir):
        if is_done(unit_dir):  # finished by the process that held the claim before this one
            return {"trained_units": 0, "computed": False}
        atomic_write_text(unit_dir / "scenario.yaml", dump_scenario(task.scenario))
        began = time.perf_counter()
        result = simulate(task.scenario, run_dir=unit_dir, on_round=on_round, client_rounds=False)
        elapsed = time.perf_counter() - began
        atomic_write_json(unit_dir / "unit.json", {"label": task.label, "trained_units": result.trained_units, "wall_s": elapsed})
        write_run_outputs(unit_dir, task.scenario, result, elapsed, figures="none", notes=[f"sweep unit {task.label}."])
    return {"trained_units": result.trained_units, "computed": True, "wall_s": elapsed}


def error_text(err: BaseException) -> str:
    """One line: the exception type and the first line of its message (Ray's wrapper unwrapped)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException) and type(err).__name__.startswith("RayTaskError"):
        err = cause
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def torch_threads(workers: int, cpus: int | None = None) -> int:
    return max(1, (cpus or os.cpu_count() or 1) // max(1, workers))


def die_with_parent(parent: int) -> None:
    """Pool initializer: end this worker as soon as the sweep's process ``parent`` ends, however it ends.

    A worker outliving a killed sweep (SIGKILL or SIGTERM to its pid) would go
    on writing its unit beside a ``--resume``, and keep the resource tracker
    alive through the pipe it inherited. On Linux the kernel sends SIGKILL
    on the parent's death (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
    thread polls ``os.getppid()``, which changes once the parent is gone.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="wirelessfl-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


class LocalExecutor:
    """Sequential, in this process; progress per round."""

    name = "local"

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def run(self, tasks: list, on_event: EventFn, work: WorkFn | None = None) -> Iterator[tuple[Any, dict | None, str]]:
        for task in tasks:
            on_event("start", task, None)
            try:
                info = (work or run_unit)(task, None, lambda progress, task=task: on_event("round", task, progress))
            except Exception as err:
                yield task, None, error_text(err)
            else:
                yield task, info, ""


class ProcessExecutor:
    """A spawn process pool of ``workers`` processes; each sets ``cpu_count // workers`` torch threads.

    Inside ``with``, the pool is kept from one ``run`` to the next (a tuning runs a batch of trials per
    call; starting workers, which import torch, would otherwise cost seconds a batch) and shut down on exit.
    """

    name = "process"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._pool_workers = 0

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close(wait=exc[0] is None)

    def _close(self, wait: bool) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=not wait)
            self._pool = None

    def _pool_for(self, workers: int) -> ProcessPoolExecutor:
        if self._pool is None or self._pool_workers != workers:
            self._close(wait=True)
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=die_with_parent,
                initargs=(os.getpid(),),
            )
            self._pool_workers = workers
        return self._pool

    def run(self, tasks: list, on_event: EventFn, work: WorkFn | None = None) -> Iterator[tuple[Any, dict | None, str]]:
        workers = max(1, min(self.workers, len(tasks)))
        threads = torch_threads(workers)
        pool = self._pool_for(workers)
        try:
            futures = {}
            for task in tasks:
                futures[pool.submit(work or run_unit, task, threads)] = task
                on_event("start", task, None)
            for future in as_completed(futures):
                task = futures[future]
                try:
                    info = future.result()
                except Exception as err:
                    yield task, None, error_text(err)
                else:
                    yield task, info, ""
        except BaseException:
            self._close(wait=False)
            raise
        if getattr(pool, "_broken", False):  # a worker died: the next run starts a fresh pool
            self._close(wait=False)


class RayExecutor:
    """Ray tasks running :func:`run_unit`: joins ``address`` or the running Ray, else starts a local one."""

    name = "ray"

    def __init__(self, address: str | None, workers: int | None) -> None:
        self.ray = import_ray()
        self.address = address
        self.workers = workers
        self.started = False

    def __enter__(self) -> RayExecutor:
        self.started = join(self.ray, self.address)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.started:
            self.ray.shutdown()

    def run(self, tasks: list, on_event: EventFn, work: WorkFn | None = None) -> Iterator[tuple[Any, dict | None, str]]:
        ray = self.ray
        cpus = int(ray.cluster_resources().get("CPU", 1))
        node_cpus = max((int(n["Resources"].get("CPU", 1)) for n in ray.nodes() if n.get("Alive")), default=1)
        workers = max(1, min(self.workers or cpus, len(tasks)))
        threads = max(1, min(torch_threads(workers, cpus), node_cpus))
        remote = ray.remote(num_cpus=threads, max_retries=0)(work or run_unit)
        waiting, running = list(tasks), {}
        while waiting or running:
            while waiting and len(running) < workers:
                task = waiting.pop(0)
                running[remote.remote(task, threads)] = task
                on_event("start", task, None)
            ready, _ = ray.wait(list(running), num_returns=1)
            task = running.pop(ready[0])
            try:
                info = ray.get(ready[0])
            except Exception as err:
                yield task, None, error_text(err)
            else:
                yield task, info, ""


def make_executor(kind: str, workers: int | None = None, address: str | None = None, pending: int = 1):
    if kind not in EXECUTORS:
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"--workers must be an integer >= 1, got {workers!r}")
    if kind == "ray":
        return RayExecutor(address, workers)
    if address is not None:
        raise ValueError("--address joins a Ray cluster; use it with --executor ray")
    if kind == "process":
        return ProcessExecutor(workers or min(max(1, pending), os.cpu_count() or 1))
    return LocalExecutor()


def execute(tasks: list[UnitTask], executor, on_event: EventFn | None = None) -> dict[str, Outcome]:
    """Run every task; a task that raises runs once more, then is recorded as failed (never dropped)."""
    emit = on_event or (lambda kind, task, payload: None)
    outcomes: dict[str, Outcome] = {}
    pending = list(tasks)
    with executor:
        for attempt in (1, 2):
            failed = []
            for task, info, error in executor.run(pending, emit):
                if error:
                    failed.append(task)
                    outcomes[task.key] = Outcome("failed", error, attempt)
                    emit("retry" if attempt == 1 else "failed", task, error)
                else:
                    outcomes[task.key] = Outcome("ok", "", attempt, info["trained_units"], info["computed"], info.get("wall_s", 0.0))
                    emit("done", task, outcomes[task.key])
            pending = failed
            if not pending:
                break
    return outcomes

