"""One slot group's training as a self-contained job, for running groups outside this process.

The engine's partition of slots into groups is fixed (``workers.GROUP_MULTIPLE``)
and each group trains on its own rows with one intra-op thread, so a group is
the natural unit to ship elsewhere: a :class:`GroupJob` holds everything the
group's steps read (its parameter rows, its batches as indices into its own
datasets, its optimizer-state rows, its correction rows and dropout seeds), and
:func:`run_job` runs it through the same ``LockstepEngine.train_rows`` the
in-process threads run. Gathered samples are the same numbers whatever the
concatenation they come from, so a shard's rows equal the in-process rows bit
for bit on the same CPU. :class:`PickledShards` is the backend that proves it
without a cluster (every job and result goes through ``pickle``); Ray actors
are :mod:`wirelessfl.learning.ray_shards`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import torch

from wirelessfl.learning import optim


@dataclass
class GroupJob:
    """Slots ``start:stop`` of one ``train`` call (rows already in the engine's sorted-by-steps order)."""

    params: torch.Tensor  # [k, P]
    table: torch.Tensor  # [steps[0], k, width] indices into each row's own dataset, -1 = padding
    data: list  # the group's distinct datasets (x, y); a backend may replace them by references
    which: list[int]  # row -> index into ``data``
    steps: list[int]  # per row, descending
    cfg: Any  # the TrainConfig
    mask: torch.Tensor | None  # bool [P] trainable, None = all
    needed: list[bool]
    mu: float
    state: Any  # optimizer-state rows, None = a fresh state
    pull: torch.Tensor | None
    offset: torch.Tensor | None
    weights: list[torch.Tensor] | None  # per-sample loss weights per row
    seeds: list[int] | None  # dropout seeds per row

    @classmethod
    def cut(cls, start, stop, work, table, offsets, datasets, order, sorted_steps, width, cfg, mask, needed, mu,
            state, pull, offset, sample_weights, seeds) -> GroupJob:
        """The job of rows ``start:stop`` of a ``train`` call's sorted rows (``table`` holds concatenation offsets)."""
        slots = order[start:stop]
        distinct: dict[tuple[int, int], int] = {}
        data, which = [], []
        for slot in slots:
            x, y = datasets[slot]
            key = (id(x), id(y))
            if key not in distinct:
                distinct[key] = len(data)
                data.append((x, y))
            which.append(distinct[key])
        rows = table[: sorted_steps[start], start:stop, :width].cpu()
        base = torch.tensor([offsets[slot] for slot in slots], dtype=torch.int64).view(1, -1, 1)
        local = torch.where(rows >= 0, rows - base, -1)
        cut_rows = lambda t: None if t is None else t[start:stop].cpu().clone()  # noqa: E731
        return cls(
            params=work[start:stop].cpu().clone(), table=local, data=data, which=which,
            steps=list(sorted_steps[start:stop]), cfg=cfg, mask=mask, needed=list(needed), mu=mu,
            state=None if state is None else optim.map_state(lambda t: t[start:stop].cpu().clone(), state),
            pull=cut_rows(pull), offset=cut_rows(offset),
            weights=None if sample_weights is None else [sample_weights[slot].detach().cpu() for slot in slots],
            seeds=seeds,
        )

    def payload_bytes(self) -> int:
        """Bytes of the rows this job sends (parameters, state, corrections, batches), the datasets left out."""
        tensors = [self.params, self.table, self.pull, self.offset, *(self.weights or [])]
        return sum(t.nbytes for t in tensors if t is not None) + state_bytes(self.state)


def state_bytes(state) -> int:
    """Bytes of a nested optimizer state (0 for None)."""
    if state is None:
        return 0
    if isinstance(state, torch.Tensor):
        return state.nbytes
    return sum(state_bytes(inner) for inner in state)


def run_job(engine, job: GroupJob, datasets: list) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """The group's steps on ``engine`` (a CPU engine of the same architecture): its rows, losses and state rows."""
    x_cat, y_cat, offsets = engine._concat(datasets)
    row_offset = torch.tensor([offsets[i] for i in job.which], dtype=torch.int64).view(1, -1, 1)
    table = torch.where(job.table >= 0, job.table + row_offset, -1)
    w_cat = w_table = None
    if job.weights is not None:
        sizes = torch.tensor([0, *(len(w) for w in job.weights)], dtype=torch.int64)
        w_cat = torch.cat([w.reshape(-1) for w in job.weights]).to(engine.device, torch.float32)
        w_table = torch.where(job.table >= 0, job.table + sizes.cumsum(0)[:-1].view(1, -1, 1), -1)
    transform = optim.build(job.cfg)
    own = job.params.to(engine.device, torch.float32).clone()
    state = transform.init(own) if job.state is None else job.state
    loss = torch.zeros(len(job.steps), device=engine.device)
    generators = None if job.seeds is None else [torch.Generator(engine.device).manual_seed(s) for s in job.seeds]
    mask_f = None if job.mask is None else job.mask.to(engine.device, torch.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every in-process group runs: kernels of one thread, the same rounding
    try:
        engine.train_rows(own, table, x_cat, y_cat, w_cat, w_table, job.steps, state, job.pull, job.offset, mask_f,
                          job.needed, transform, job.mu, generators, loss)
    finally:
        torch.set_num_threads(threads)
    return own, loss, state


def put_rows(state, rows: slice, part) -> None:
    """Copy a group's optimizer-state rows ``part`` into ``state[rows]`` (the same nesting)."""
    if isinstance(state, torch.Tensor):
        state[rows] = part
        return
    for inner, inner_part in zip(state, part):
        put_rows(inner, rows, inner_part)


class Shards:
    """Where an engine's training groups run when not in its own threads: ``attach`` it, then ``train_groups``."""

    cpu_only = "shards train on CPUs; use --device cpu"

    def attach(self, engine):
        """Run ``engine``'s training groups here (CPU engines only: a shard's kernels are the CPU's)."""
        if engine.device.type != "cpu":
            raise ValueError(f"{self.cpu_only} (the run asked for {engine.device.type})")
        engine.shards = self
        return engine

    def train_groups(self, engine, jobs: list[GroupJob]) -> list[tuple[torch.Tensor, torch.Tensor, Any]]:
        """Each job's (rows, loss, optimizer-state rows), in the order of ``jobs``."""
        raise NotImplementedError


class PickledShards(Shards):
    """Every group's job pickled, run on a second engine of the same architecture, and its result pickled back.

    What a remote shard does, in one process: the check that a job carries
    everything its rows depend on (no view of the caller's tensors survives
    ``pickle``). ``sent`` counts the bytes of the pickled jobs and results.
    """

    def __init__(self) -> None:
        self.engine = None
        self.sent = 0

    def train_groups(self, engine, jobs: list[GroupJob]) -> list[tuple[torch.Tensor, torch.Tensor, Any]]:
        if self.engine is None:
            self.engine = type(engine)(engine.arch, "cpu", max_samples=engine.max_samples, normalisation=engine.normalisation)
        results = []
        for job in jobs:
            wire = pickle.dumps(job)
            copy = pickle.loads(wire)
            result = pickle.dumps(run_job(self.engine, copy, copy.data))
            self.sent += len(wire) + len(result)
            results.append(pickle.loads(result))
        return results
