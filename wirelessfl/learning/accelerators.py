"""Accelerator plug-ins: the engine asks each one "can you run this layer block faster?".

An accelerator looks at a model's traced graph (:class:`~wirelessfl.learning.stacked.StackedModel`)
and may *claim* a block of consecutive nodes: it then computes that block on
the stacked slots (forward, and a backward that autograd calls) instead of the
general path. The engine asks once per graph (training and evaluation) when it
is built; a claim it cannot build is a warning and the general path, never an
error. The default is no accelerator, so default results do not depend on an
optional package or a C compiler being present.

Plug-ins by name (``learning/plugins.py``; ``WIRELESSFL_ACCELERATORS=halide`` for ``wirelessfl simulate``):

* ``halide``: LeNet-5-like first blocks (a small conv, 2x2 max-pool, ReLU) as
  Halide kernels on a CPU (:mod:`wirelessfl.learning.first_block`; ``pip install
  wirelessfl[halide]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch.fx


@dataclass(frozen=True)
class Claim:
    """Nodes ``first..last`` of a graph (in order, ``last``'s value is the block's output) run by ``run(params, x)``.

    ``source`` is the node whose value is the block's input ``x`` (a stacked
    value); ``params`` are the slots' parameters by name.
    """

    nodes: tuple[torch.fx.Node, ...]
    source: torch.fx.Node
    run: Callable
    status: str


class Accelerator(Protocol):
    """A plug-in: ``claim`` returns the block it runs faster, or None."""

    name: str

    def claim(self, graph: torch.fx.GraphModule, modules: dict, input_shape: tuple[int, int, int], device) -> Claim | None: ...


def claims(accelerators: Sequence[Accelerator], graph, modules, input_shape, device) -> list[Claim]:
    """Every block some plug-in claims, the first plug-in first; nodes claimed once."""
    taken: set[torch.fx.Node] = set()
    out = []
    for accelerator in accelerators:
        claim = accelerator.claim(graph, modules, input_shape, device)
        if claim is not None and not taken & set(claim.nodes):
            taken |= set(claim.nodes)
            out.append(claim)
    return out
