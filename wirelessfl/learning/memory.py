"""What a run needs in memory, estimated from sizes alone before anything big is allocated.

A run's peak is its *persistent* memory (the clients' data on the device, the
models every algorithm keeps between rounds, the round records) plus the largest
*transient* of one of its phases:

* ``train``: one ``LockstepEngine.train`` call. The slots' start rows (gathered
  from the server models) and the engine's working copy, the optimizer state
  (momentum: 1 row per slot, Adam: 2; with ``keep_optimizer_state`` also the
  state taken from the clients' store and its device copy), the concatenated
  training data and the shuffle table, and for every slot group running at once
  (``workers.balanced_group``: ``max_samples // batch_size`` slots per group, one group
  per worker thread on a CPU) its gradient buffer, Adam's denominator, the
  layer-gradient temporaries and the activations of one batch. When the slots
  are reordered by step count the results are permuted back into fresh tensors
  (one more copy of parameters and state) after the groups are freed.
* ``evaluate``: the ``[m, P]`` client models gathered for evaluation (a method
  that evaluates by row, ``Footprint.eval_by_row``: the rows of the slot groups
  running at once), the
  concatenated split and the forward activations of one pass (about
  ``2 * max_samples`` samples per worker, no tape).
* ``algorithm``: what an algorithm allocates beside the engine (UCFL's gradient
  matrices ``[r, P]`` and ``[r, K, P]`` in float64, FedFomo's stacked
  candidates, FedEM's and IFCA's (client, component) slots, ...).
* ``checkpoint``: ``state_dict`` clones the state and ``torch.save`` serialises
  it into a buffer that is copied once more: about 3 copies of the state.

Per-client state in client stores (``Footprint.stored``: Local's, Ditto's, pFedMe's
and APFL's per-client models, FedPer's, FedRep's and PFLEGO's heads, kept optimizer
state; ``learning/client_store.py``) counts as RAM, or with
``client_store_on_disk`` as disk (``MemoryEstimate.disk``): the live file's rows
written (at most ``rounds x participants`` per client row) and two snapshots of
them, while RAM keeps only what a round gathers and a checkpoint's chunks.

How many models an algorithm keeps and how it calls the engine depend on the
algorithm and its parameters: each algorithm declares that as its
``AlgorithmSpec.footprint`` (``wirelessfl/algorithms/specs/<name>.py``, tested
against measured peaks in ``tests/learning/test_memory.py``); :func:`footprint`
gives it the sizes. An algorithm that declares none is counted as keeping one
model per client and training its participants once a round, the common
personalised case. Sizes are bytes; float32 parameters (4 bytes), int64 labels
and indices (8 bytes).

This module imports no simpy (learning side) and allocates nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from wirelessfl.algorithms.registry import spec_of
from wirelessfl.algorithms.spec import FLOAT, Footprint, FootprintInputs
from wirelessfl.learning.data.guard import format_bytes
from wirelessfl.learning.lockstep import DATA_CACHE_BYTES, EVAL_CHUNK, GROUP_MULTIPLE, TrainConfig
from wirelessfl.learning.schedule import batch_width
from wirelessfl.learning.workers import balanced_group
from wirelessfl.learning.models import Architecture, probe_of

INDEX = 8
#: Python objects of one round's record per client (CommPlan dicts and frozensets, accuracy array), measured with tracemalloc.
RECORD_BYTES_PER_CLIENT_ROUND = 200
#: Of those, the accuracy array's float64 per client, new only in an evaluated round (a round that is not
#: evaluated shares the last one's array); the rest is the plan's, for the round's participants alone.
ACCURACY_BYTES = 8
#: One row of the tidy trace (a dict of ~30 fields; tracemalloc: ~3 kB) and one per-client final-accuracy row.
TRACE_ROW_BYTES = 3_000
CLIENT_ROW_BYTES = 1_000
#: Checkpoint: the cloned state, the serialised buffer and its copy as bytes.
CHECKPOINT_COPIES = 3


@dataclass(frozen=True)
class SplitSizes:
    """Samples per client in each split (what the data's memory and every pass depend on)."""

    train: tuple[int, ...]
    val: tuple[int, ...]
    test: tuple[int, ...]

    @property
    def clients(self) -> int:
        return len(self.train)


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated peak bytes of a run and what it is made of.

    ``parts`` are persistent parts plus the breakdown of the phase that peaks
    (``phase``); they sum to ``total``. ``phases`` gives every phase's transient
    bytes for comparison.
    """

    parts: dict[str, int]
    phase: str
    phases: dict[str, int] = field(default_factory=dict)
    #: bytes of per-client state in memory-mapped files (``client_store`` on disk), not in ``total``
    disk: int = 0

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))

    def describe(self, min_share: float = 0.0) -> str:
        """``activations 18.1 GB, parameters 12.0 GB, ...``: the parts of at least ``min_share`` of the total, largest first."""
        shown = sorted(((v, k) for k, v in self.parts.items() if v > 0 and v >= min_share * self.total), reverse=True)
        return ", ".join(f"{name} {format_bytes(value)}" for value, name in shown)


# --------------------------------------------------------------------------- the model's activations


@dataclass(frozen=True)
class Activations:
    """Per-sample floats of the stacked model (``learning.stacked``) and per-slot temporaries."""

    input: int  # one sample after layout
    tape: int  # everything the training forward keeps for the backward pass (outputs, max-pool indices, logits)
    largest: int  # the largest single activation (gradients of it live two at a time in the backward pass)
    transient: int  # largest forward-only temporary (a convolution input's channels_last copy)
    slot_temporaries: int  # per slot and step: conv weight copies and the largest layer's weight gradient (before its copy into the buffer)
    weight_copies: int  # per slot and pass: the conv weights reshaped out of the flat rows (copies)


def activations(arch: Architecture) -> Activations:
    """Walk one sample through the model (``torch.fx`` shape propagation, else hooks on its leaf modules).

    Autograd keeps about every intermediate value of the training forward (the
    inputs of convolutions and matmuls, ReLU outputs, max-pool outputs and their
    int64 arg-max indices), so the tape is their sum.
    """
    from torch import nn  # the estimate itself allocates nothing: one sample through the model on the CPU

    outputs = _node_outputs(arch)
    tape = largest = math.prod(arch.input_shape)
    transient = conv_weights = biggest_layer = 0
    for module, size, input_size in outputs:
        tape += size
        largest = max(largest, size)
        if isinstance(module, (nn.MaxPool2d, nn.AdaptiveMaxPool2d)) or module is F_MAX_POOL:
            tape += size * INDEX // FLOAT
        if isinstance(module, nn.Conv2d):
            conv_weights += module.weight.numel()
            transient = max(transient, input_size)  # the input's channels_last copy for the grouped convolution
        if isinstance(module, nn.Module):
            biggest_layer = max(biggest_layer, sum(p.numel() for p in module.parameters(recurse=False)))
    tape += 2 * arch.num_classes  # log-probabilities and their gradient
    return Activations(
        input=math.prod(arch.input_shape),
        tape=tape,
        largest=largest,
        transient=transient,
        slot_temporaries=conv_weights + biggest_layer,
        weight_copies=conv_weights,
    )


F_MAX_POOL = object()
"""Stands for a functional max-pool node in :func:`_node_outputs` (it keeps indices too)."""


def _node_outputs(arch: Architecture) -> list[tuple[object, int, int]]:
    """(module or marker, output floats, input floats) of each step of one sample's forward pass."""
    import torch
    import torch.fx
    import torch.nn.functional as F

    module = probe_of(arch.template)
    device = next(module.parameters()).device
    sample = torch.zeros(1, *arch.input_shape, device=device)
    try:
        traced = torch.fx.symbolic_trace(module)
    except Exception:  # untraceable forward: the leaf modules' outputs, by hooks
        seen: list[tuple[object, int, int]] = []
        hooks = [m.register_forward_hook(lambda m, i, o: seen.append((m, o.numel(), i[0].numel() if i else 0)))
                 for m in module.modules() if not list(m.children())]
        with torch.no_grad(), torch.device(device):  # a tensor the forward makes (torch.randn(n, k)) lands beside the sample
            module(sample)
        for hook in hooks:
            hook.remove()
        return seen
    shapes = {}

    class ShapeRecorder(torch.fx.Interpreter):
        """Each tensor-valued node's output shape: torch.fx's ``ShapeProp`` without its fake-tensor machinery, whose
        import (sympy) costs 1.7 s of CPU in every process."""

        def run_node(self, node):
            result = super().run_node(node)
            if isinstance(result, torch.Tensor):
                shapes[node] = tuple(result.shape)
            return result

    with torch.no_grad(), torch.device(device):
        ShapeRecorder(traced).run(sample)
    modules = dict(traced.named_modules())
    out = []
    for node in traced.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr") or node not in shapes:
            continue
        size = math.prod(shapes[node])
        first = node.args[0] if node.args else None
        input_size = math.prod(shapes[first]) if isinstance(first, torch.fx.Node) and first in shapes else 0
        kind = modules.get(node.target) if node.op == "call_module" else (F_MAX_POOL if node.target in (F.max_pool2d, torch.max_pool2d) else None)
        out.append((kind, size, input_size))
    return out


# --------------------------------------------------------------------------- per-algorithm footprints


def optimizer_rows(cfg: TrainConfig) -> int:
    """Optimizer-state rows per slot: momentum 1, Adam/AdamW 2 (first and second moments), plain SGD 0."""
    if cfg.optimizer in ("adam", "adamw"):
        return 2
    return 1 if cfg.momentum > 0 else 0


def footprint(
    name: str, params: Mapping, arch: Architecture, sizes: SplitSizes, participants: int, cfg: TrainConfig, groups: int = 1
) -> Footprint:
    """Algorithm ``name``'s :class:`Footprint` with parameters ``params`` (by YAML name; the rest defaults) for
    ``m`` clients of ``sizes``, ``participants`` of them training a round, and ``groups`` ground-truth groups:
    its declaration's ``footprint`` over these sizes."""
    spec = spec_of(name)

    def head() -> tuple[int, int]:
        weight = getattr(arch.template.get_submodule(arch.layers[-1]), "weight", None) if arch.layers else None
        return arch.head_size, int(weight.shape[-1]) if weight is not None else 0

    inputs = FootprintInputs(
        clients=sizes.clients, participants=participants, model_params=arch.param_count, optimizer_rows=optimizer_rows(cfg),
        train_sizes=sizes.train, val_sizes=sizes.val, test_sizes=sizes.test, epochs=float(cfg.epochs), groups=groups,
        classes=arch.num_classes, head=head,
    )
    return spec.footprint(spec.parse(params), inputs)


# --------------------------------------------------------------------------- the estimate


def _steps(sizes: Sequence[int], batch: int, epochs: float) -> list[int]:
    return [math.floor(epochs * math.ceil(s / batch) + 0.5) for s in sizes]


def estimate_memory(
    arch: Architecture,
    sizes: SplitSizes,
    train: TrainConfig,
    curves: Sequence[tuple[str, Mapping]],
    *,
    participation: float = 1.0,
    unseen_fraction: float = 0.0,
    keep_optimizer_state: bool = False,
    groups: int = 1,
    rounds: int = 1,
    units_per_curve: int = 1,
    profiles: int = 1,
    seeds: int = 1,
    workers: int = 1,
    max_samples: int = 512,
    eval_clients: int | None = None,
    eval_sample: int | None = None,
    evaluated_rounds: int | None = None,
    client_store_on_disk: bool = False,
    input_bytes: int = FLOAT,
    held_samples: int | None = None,
) -> MemoryEstimate:
    """Peak bytes of a run of ``curves`` (algorithm name, params) on clients of ``sizes``; see the module docstring.

    ``units_per_curve`` is how many trainings of a curve a seed holds at once
    (the number of profiles when a deadline makes each profile train its own);
    ``workers`` the slot groups that run at once (CPU threads; 1 on a GPU).
    ``eval_clients``: the most clients one evaluation call gathers the models of (a sampled evaluation's
    chunk, ``run.sampled_evaluation.CHUNK_CLIENTS``); it caps the evaluation of methods that gather one row per client,
    and the split copies of one evaluation call (a chunk's clients, not all m).
    ``eval_sample``: clients a sampled evaluation draws each evaluated round but the last (``evaluation.clients``);
    the engine caches their copies, while the last round's pass over everyone keeps none (``engine.uncached``).
    ``evaluated_rounds``: rounds that evaluate (each keeps an accuracy per client; default every round).
    ``client_store_on_disk``: the algorithms' per-client state is in memory-mapped files (``disk``), not RAM.
    ``input_bytes``: bytes of one stored input value (1 for uint8 pixels, which the engine normalises as it gathers them).
    ``held_samples``: the samples the federation holds where that is not the clients' total (clients that index a pool
    they are dealt several times: ``FederatedData.held_samples``).

    Persistent beside the data: the engine's cached data copies (``data cache``): one copy of the
    evaluated splits, the training split once under full participation, else each round's participants' copy,
    up to the engine's bound (``DATA_CACHE_BYTES``).
    """
    m = sizes.clients
    P = arch.param_count
    row = P * FLOAT
    held_out = min(m - 1, math.floor(unseen_fraction * m + 0.5)) if unseen_fraction > 0 else 0
    pool = m - held_out
    T = pool if participation >= 1.0 else max(1, math.floor(participation * pool + 0.5))
    act = activations(arch)
    stored_sample = act.input * input_bytes + INDEX
    feature = act.input * FLOAT + INDEX  # a sample in the engine's cached copies: normalised, float32
    dealt = sum(sizes.train) + sum(sizes.val) + sum(sizes.test)
    data = dealt * stored_sample if held_samples is None else held_samples * act.input * input_bytes + dealt * INDEX
    prints = [footprint(name, params, arch, sizes, T, train, groups) for name, params in curves]
    # a sampled evaluation's calls each take one chunk of clients, for the methods that evaluate some clients alone
    chunked = [eval_clients if eval_clients is not None and fp.eval_rows == m else None for fp in prints]
    if eval_clients is not None:  # a sampled evaluation gathers at most eval_clients rows per call (one per client)
        prints = [
            replace(fp, eval_rows=min(m, eval_clients), eval_slots=min(fp.eval_slots, eval_clients)) if fp.eval_rows == m else fp
            for fp in prints
        ]

    def stored(fp: Footprint) -> float:
        """Rows of per-client state in client stores."""
        return fp.stored + (fp.keep_rows * fp.state if keep_optimizer_state else 0)

    def persistent(fp: Footprint) -> int:
        kept_state = fp.keep_rows * fp.state * row if keep_optimizer_state else 0
        return int(fp.kept * row + fp.kept_bytes + kept_state - (stored(fp) * row if client_store_on_disk else 0))

    kept = units_per_curve * sum(persistent(fp) for fp in prints)
    written = min(1.0, rounds * T / max(m, 1))  # the share of a store's rows a run can write
    disk = units_per_curve * sum(3 * written * stored(fp) * row for fp in prints) if client_store_on_disk else 0
    evaluated = rounds if evaluated_rounds is None else evaluated_rounds
    per_participant = RECORD_BYTES_PER_CLIENT_ROUND - ACCURACY_BYTES
    records = units_per_curve * len(prints) * (T * rounds * per_participant + m * evaluated * ACCURACY_BYTES)
    trained = sum(sizes.train) * feature if T >= pool else units_per_curve * len(prints) * rounds * sum(sizes.train[:T]) * feature
    evaluated_copies = (sum(sizes.val) + sum(sizes.test)) * feature
    if eval_sample is not None and m:  # each sampled round copies its sample's splits once; the last round none
        evaluated_copies = min(evaluated_copies, max(evaluated - 1, 0) * min(eval_sample, m) * evaluated_copies / m)
    cache = min(DATA_CACHE_BYTES, evaluated_copies + trained)
    results = seeds * len(prints) * profiles * (rounds + 1) * TRACE_ROW_BYTES + seeds * len(prints) * profiles * m * CLIENT_ROW_BYTES

    best: tuple[int, str, dict[str, int]] = (-1, "", {})
    phases: dict[str, int] = {}
    for name_params, fp, chunk_clients in zip(curves, prints, chunked):
        label = name_params[0]
        candidates = {
            "train": _train_phase(fp, act, sizes, train, T, row, workers, max_samples, keep_optimizer_state),
            "evaluate": _eval_phase(fp, act, sizes, row, workers, max_samples, chunk_clients),
            "algorithm": {"algorithm extras": fp.extra_bytes} if fp.extra_bytes else {},
            "checkpoint": {"checkpoint": int(CHECKPOINT_COPIES * (fp.checkpoint_rows - (fp.stored if client_store_on_disk else 0)) * row)},
        }
        for phase, parts in candidates.items():
            size = int(sum(parts.values()))
            key = f"{label} {phase}"
            phases[key] = max(phases.get(key, 0), size)
            if size > best[0]:
                best = (size, key, parts)
    parts = {"data": int(data), "data cache": int(cache), "models kept": int(kept), "round records": int(records + results)}
    for key, value in best[2].items():
        parts[key] = parts.get(key, 0) + int(value)
    return MemoryEstimate(parts=parts, phase=best[1], phases=phases, disk=int(disk))


def _train_phase(
    fp: Footprint, act: Activations, sizes: SplitSizes, cfg: TrainConfig, T: int, row: int, workers: int, max_samples: int, keep_optimizer_state: bool
) -> dict[str, int]:
    """One ``engine.train`` call of ``fp.train_slots`` slots (see the module docstring)."""
    n = fp.train_slots
    if n <= 0:
        return {}
    member_sizes = [s for s in sizes.train[:T] for _ in range(max(1, n // max(T, 1)))][:n] or list(sizes.train[:n])
    B = batch_width(cfg.batch_size, member_sizes)
    steps = _steps(member_sizes, B, float(cfg.epochs))
    permuted = any(a < b for a, b in zip(steps, steps[1:]))
    group = balanced_group(n, max(1, max_samples // B), GROUP_MULTIPLE if workers > 1 else 1)
    running = min(workers, math.ceil(n / group))
    state = fp.state
    carried = 2 * state if keep_optimizer_state else 0  # the rows taken from the store and their device copy
    per_group = group * row * (1 + (1 if cfg.optimizer in ("adam", "adamw") else 0))  # gradient buffer (+ Adam's denominator)
    per_group_act = group * (B * FLOAT * (act.tape + 2 * act.largest + act.transient + 2 * act.input) + act.slot_temporaries * FLOAT)
    samples = sum(member_sizes)
    batch_data = fp.train_copies * sum(sizes.train[:T]) * (act.input * FLOAT + INDEX + FLOAT) + max(steps, default=0) * n * B * INDEX + samples * cfg.epochs * INDEX
    during = {"gradients": running * per_group, "activations": running * per_group_act}
    after = (1 + state) * n * row if permuted else 0
    parts = {"parameters": 2 * n * row, "optimizer state": (state + carried) * n * row, "batch data": int(batch_data)}
    return {**parts, **(during if sum(during.values()) >= after else {"reordered copies": after})}


def _eval_phase(
    fp: Footprint, act: Activations, sizes: SplitSizes, row: int, workers: int, max_samples: int, eval_clients: int | None = None
) -> dict[str, int]:
    """The largest evaluation: gathered rows, the concatenated split copies (of ``eval_clients`` clients at most: the
    largest ones, when the evaluation goes by chunks), one forward pass per worker."""
    n = max(fp.eval_slots, 1)
    longest = max(max(sizes.test, default=1), max(sizes.val, default=1), max(sizes.train, default=1), 1)
    samples = 2 * max_samples
    cap = max(1, min(1024, EVAL_CHUNK, samples))
    chunk = math.ceil(longest / math.ceil(longest / cap))
    group = balanced_group(n, max(1, samples // chunk), GROUP_MULTIPLE if workers > 1 else 1)
    running = min(workers, math.ceil(n / group))
    split = max(
        sum(sorted(part)[-eval_clients:]) if eval_clients is not None and eval_clients < len(part) else sum(part)
        for part in (sizes.test, sizes.val, sizes.train)
    )
    copied = fp.eval_copies * split * (act.input * FLOAT + INDEX)
    forward = running * group * (chunk * FLOAT * (act.input * 2 + 3 * act.largest + act.transient) + act.weight_copies * FLOAT)
    rows = running * group if fp.eval_by_row else fp.eval_rows  # by row: each running group gathers its own rows
    return {"evaluation": int(rows * row + copied + forward + fp.eval_extra_bytes)}
