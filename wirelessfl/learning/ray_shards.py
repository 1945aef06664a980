"""Training groups on Ray actors: one simulation's local training spread over a Ray cluster.

``RayShards`` is a backend for ``LockstepEngine.shards``: each ``train`` call's
slot groups (:class:`wirelessfl.learning.shards.GroupJob`) go to long-lived
actors, group i to actor i mod W, and their rows come back to the driver, which
aggregates, evaluates and checkpoints as in process. An actor keeps the datasets
it was sent (by their object reference, least recently used dropped past
``DATA_BYTES``), so a client's data crosses the network the first time one of
its groups lands on a worker, and after that only parameter rows move.

Ray's fault tolerance covers a lost worker: actors restart (``max_restarts``)
and a call that was running on one is retried on its restarted self
(``max_task_retries``). A job is a pure function of what it carries, so a retry
computes the same rows; what a loss costs is the new process, its model build,
re-fetching its datasets from the object store, and the lost call's groups run
again. Ray is imported only here, when ``--executor ray`` asks for it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from wirelessfl.learning.lockstep import LockstepEngine
from wirelessfl.learning.plugins import from_environment
from wirelessfl.learning.ray_connect import import_ray, join
from wirelessfl.learning.shards import GroupJob, Shards, run_job, state_bytes

RESTARTS = 3
"""Times a lost actor is restarted, and a call on it retried, before the run stops (and can be resumed)."""
DATA_BYTES = 2**31
"""Dataset bytes an actor, and the driver's table of object references, keep before dropping the oldest."""


class _ShardWorker:
    """A Ray actor: one CPU engine of the run's architecture and the datasets its groups were sent."""

    def __init__(self, arch, max_samples: int, normalisation=None) -> None:
        torch.set_num_threads(1)
        self.engine = LockstepEngine(arch, "cpu", max_samples=max_samples, accelerators=from_environment(), normalisation=normalisation)
        self.data: OrderedDict[str, tuple] = OrderedDict()

    def _dataset(self, ray, ref) -> tuple:
        key = ref.hex()
        if key not in self.data:
            self.data[key] = ray.get(ref)
            while len(self.data) > 1 and sum(x.nbytes + y.nbytes for x, y in self.data.values()) > DATA_BYTES:
                self.data.popitem(last=False)
        self.data.move_to_end(key)
        return self.data[key]

    def train(self, job: GroupJob):
        import ray

        return run_job(self.engine, job, [self._dataset(ray, ref) for ref in job.data])


class RayShards(Shards):
    """``engine.shards`` on Ray: joins ``address`` (or the running Ray, else starts a local one) with ``workers`` actors.

    ``sent`` and ``received`` count the bytes of the rows moved (datasets apart,
    which move once per worker: ``data_sent``); ``calls`` the ``train`` calls.
    """

    cpu_only = "--executor ray trains on the workers' CPUs; use --device cpu"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"--workers must be an integer >= 1, got {workers!r}")
        self.ray = import_ray()
        self.address, self.workers = address, workers
        self.started = False
        self.actors: dict[tuple, list] = {}
        self.refs: OrderedDict[tuple[int, int], tuple] = OrderedDict()
        self.sent = self.received = self.data_sent = self.calls = self.started_actors = 0

    def __enter__(self) -> RayShards:
        self.started = join(self.ray, self.address)
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        if self.workers is not None and self.workers > cpus:
            self.__exit__()
            # each actor holds one CPU: more than the cluster has would wait for CPUs forever
            raise ValueError(f"--workers {self.workers}: the Ray cluster has {cpus} CPUs (a worker takes one)")
        return self

    def __exit__(self, *exc: Any) -> None:
        for actors in self.actors.values():
            for actor in actors:
                self.ray.kill(actor)
        self.actors.clear()
        self.refs.clear()
        if self.started:
            self.ray.shutdown()
            self.started = False

    def size(self) -> int:
        """Actors per architecture: ``workers``, else one per CPU of the cluster."""
        return self.workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def _actors(self, engine: LockstepEngine) -> list:
        key = (engine.arch, engine.max_samples, engine.normalisation)
        if key not in self.actors:
            worker = self.ray.remote(num_cpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS)(_ShardWorker)
            self.actors[key] = [worker.remote(engine.arch, engine.max_samples, engine.normalisation) for _ in range(self.size())]
            self.started_actors += len(self.actors[key])
        return self.actors[key]

    def _ref(self, x: torch.Tensor, y: torch.Tensor):
        """The object reference of one dataset, put once while the same unmodified tensors are passed."""
        key = (id(x), id(y))
        found = self.refs.get(key)
        if found is not None and found[2] == (x._version, y._version):
            self.refs.move_to_end(key)
            return found[3]
        # a view would ship its whole storage (the pool it was cut from): send its own samples only
        xs, ys = (t.detach().cpu().clone() for t in (x, y))
        ref = self.ray.put((xs, ys))
        self.data_sent += xs.nbytes + ys.nbytes
        self.refs[key] = (x, y, (x._version, y._version), ref, xs.nbytes + ys.nbytes)
        while len(self.refs) > 1 and sum(entry[4] for entry in self.refs.values()) > DATA_BYTES:
            self.refs.popitem(last=False)
        return ref

    def train_groups(self, engine: LockstepEngine, jobs: list[GroupJob]) -> list:
        """Each job on an actor (job i on actor i mod W), the driver waiting for all; their (rows, loss, state)."""
        actors = self._actors(engine)
        futures = []
        for i, job in enumerate(jobs):
            job.data = [self._ref(x, y) for x, y in job.data]
            self.sent += job.payload_bytes()
            futures.append(actors[i % len(actors)].train.remote(job))
        try:
            results = self.ray.get(futures)
        except self.ray.exceptions.RayActorError as err:
            raise RuntimeError(
                f"a Ray worker was lost more than {RESTARTS} times ({str(err).splitlines()[0]}); "
                "the run stopped at its last checkpoint"
            ) from None
        self.calls += 1
        for own, loss, state in results:
            self.received += own.nbytes + loss.nbytes + state_bytes(state)
        return results

    def summary(self) -> str:
        """One line: workers, calls and the bytes that moved."""
        mb = 2**20
        return (
            f"ray: {self.started_actors} workers, {self.calls} training calls; rows sent "
            f"{self.sent / mb:.1f} MiB, returned {self.received / mb:.1f} MiB; datasets sent once {self.data_sent / mb:.1f} MiB"
        )
