"""Which samples every slot trains on, step by step: the shuffles both back ends share.

The lockstep engine and the plain per-client loop (``reference.ReferenceLoop``)
take their batches from :func:`shuffle_schedule` and their dropout seeds from
:func:`slot_seeds`, so both see identical batches and masks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def slot_steps(sizes: Sequence[int], batch_size: int, epochs: Sequence[float]) -> list[int]:
    """SGD steps of each slot: round(epochs * batches per epoch), halves rounded up."""
    return [math.floor(e * math.ceil(size / batch_size) + 0.5) for size, e in zip(sizes, epochs)]


def batch_width(batch_size: int, sizes: Sequence[int]) -> int:
    """Samples in one stacked batch: ``batch_size``, but never more than the largest dataset.

    A "full-batch" ``batch_size`` (larger than any client's data) would
    otherwise pad every batch to it: 20 clients of 700 samples at batch size
    6,000 computed 8.5x the real samples.
    """
    return max(1, min(batch_size, max(sizes, default=1)))


def permutations(
    sizes: Sequence[int], batch_size: int, epochs: Sequence[float], generator: torch.Generator
) -> tuple[list[list[torch.Tensor]], list[int]]:
    """One permutation per started epoch and slot, drawn epoch-major then slot by slot."""
    steps = slot_steps(sizes, batch_size, epochs)
    per_epoch = [math.ceil(size / batch_size) for size in sizes]
    needed = [math.ceil(s / nb) if nb else 0 for s, nb in zip(steps, per_epoch)]
    perms: list[list[torch.Tensor]] = [[] for _ in sizes]
    for epoch in range(max(needed, default=0)):
        for slot, size in enumerate(sizes):
            if epoch < needed[slot]:
                perms[slot].append(torch.randperm(size, generator=generator, device=generator.device).cpu())
    return perms, steps


def shuffle_schedule(
    sizes: Sequence[int], batch_size: int, epochs: Sequence[float], generator: torch.Generator
) -> list[list[torch.Tensor]]:
    """Per slot, its batches in training order (index tensors into the slot's dataset).

    Each epoch is a fresh permutation cut into batches of ``batch_size`` (the last
    one partial); a fractional epoch count keeps that fraction of an epoch's
    batches (rounded half up). Both the lockstep engine and the reference loop
    get their batches from here, so they see the same ones.
    """
    perms, steps = permutations(sizes, batch_size, epochs, generator)
    return [[b for p in slot_perms for b in p.split(batch_size)][:n_steps] for slot_perms, n_steps in zip(perms, steps)]


def batch_table(perms: list[torch.Tensor], n_steps: int, batch_size: int) -> torch.Tensor:
    """``[n_steps, batch_size]`` indices of one slot's batches, padding = -1."""
    rows = []
    for perm in perms:
        batches = math.ceil(len(perm) / batch_size)
        padded = torch.full((batches * batch_size,), -1, dtype=torch.int64)
        padded[: len(perm)] = perm
        rows.append(padded.view(batches, batch_size))
    if not rows:
        return torch.empty((0, batch_size), dtype=torch.int64)
    return torch.cat(rows)[:n_steps]


def slot_seeds(n: int, generator: torch.Generator) -> list[int]:
    """One seed per slot for a model that draws random numbers (dropout), taken after the shuffles.

    Slot s's masks come from a generator seeded with its seed, so they depend on
    neither the other slots nor how slots are grouped.
    """
    return torch.randint(0, 2**62, (n,), generator=generator, device=generator.device).tolist()
