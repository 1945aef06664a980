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
* ``evaluate``: the ``[m, P]`` client models gathered for evaluation, the
  concatenated split and the forward activations of one pass (about
  ``2 * max_samples`` samples per worker, no tape).
* ``algorithm``: what an algorithm allocates beside the engine (UCFL's gradient
  matrices ``[r, P]`` and ``[r, K, P]`` in float64, FedFomo's stacked
  candidates, FedEM's and IFCA's (client, component) slots, ...).
* ``checkpoint``: ``state_dict`` clones the state and ``torch.save`` serialises
  it into a buffer that is copied once more: about 3 copies of the state.

How many models an algorithm keeps and how it calls the engine depend on the
algorithm and its parameters; :func:`footprint` holds that per algorithm (a
table of the registered algorithms, documented entry by entry and tested
against measured peaks in ``tests/learning/test_memory.py``). Sizes are bytes;
float32 parameters (4 bytes), int64 labels and indices (8 bytes).

This module imports no simpy (learning side) and allocates nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from wirelessfl.learning.lockstep import EVAL_CHUNK, GROUP_MULTIPLE, TrainConfig
from wirelessfl.learning.schedule import batch_width
from wirelessfl.learning.workers import balanced_group
from wirelessfl.learning.models import Architecture

FLOAT = 4
INDEX = 8
#: Python objects of one round's record per client (CommPlan dicts and frozensets, accuracy array), measured with tracemalloc.
RECORD_BYTES_PER_CLIENT_ROUND = 200
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
class Footprint:
    """How one algorithm uses memory, in model rows (``P`` float32 each) unless the name says bytes.

    ``kept``: rows held between rounds; ``kept_bytes``: other persistent state
    (mixing matrices, per-client heads); ``train_slots``: slots of its largest
    ``engine.train`` call and ``train_copies`` how many times that call
    concatenates the training data; ``state``: optimizer rows per slot of that
    call; ``keep_rows``: clients' optimizer-state rows stored between rounds
    (times ``state``) when ``keep_optimizer_state``; ``eval_rows``: rows gathered
    for evaluation and ``eval_slots`` / ``eval_copies`` the slots and split
    copies of its largest evaluation pass; ``extra_bytes``: its own largest
    allocation beside the engine; ``checkpoint_rows``: rows in ``state_dict``;
    ``work``: training work per participant and round relative to one local
    round (1.0), and ``eval_work``: epochs of training every client (all m)
    takes at each evaluation (FedAvg+'s fine-tuning), for the time estimate.
    """

    kept: float
    train_slots: int
    state: int
    kept_bytes: int = 0
    train_copies: int = 1
    keep_rows: int = 0
    eval_rows: float = 0.0
    eval_slots: int = 0
    eval_copies: int = 1
    eval_extra_bytes: int = 0
    extra_bytes: int = 0
    checkpoint_rows: float = 0.0
    work: float = 1.0
    eval_work: float = 0.0


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

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))

    def describe(self, min_share: float = 0.0) -> str:
        """``activations 18.1 GB, parameters 12.0 GB, ...``: the parts of at least ``min_share`` of the total, largest first."""
        shown = sorted(((v, k) for k, v in self.parts.items() if v > 0 and v >= min_share * self.total), reverse=True)
        return ", ".join(f"{name} {format_bytes(value)}" for value, name in shown)


def format_bytes(value: float) -> str:
    """``1.2 GB`` / ``340 MB`` / ``12 kB`` (decimal units)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            number = value / size
            return f"{number:.1f} {unit}" if number < 100 else f"{number:,.0f} {unit}"
    return f"{int(value)} B"


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
    from torch.fx.passes.shape_prop import ShapeProp

    module = arch.template
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
    with torch.no_grad(), torch.device(device):
        ShapeProp(traced).propagate(sample)
    modules = dict(traced.named_modules())
    out = []
    for node in traced.graph.nodes:
        meta = node.meta.get("tensor_meta")
        if node.op in ("placeholder", "output", "get_attr") or meta is None or not hasattr(meta, "shape"):
            continue
        size = math.prod(meta.shape)
        first = node.args[0] if node.args else None
        first_meta = first.meta.get("tensor_meta") if hasattr(first, "meta") else None
        input_size = math.prod(first_meta.shape) if first_meta is not None and hasattr(first_meta, "shape") else 0
        kind = modules.get(node.target) if node.op == "call_module" else (F_MAX_POOL if node.target in (F.max_pool2d, torch.max_pool2d) else None)
        out.append((kind, size, input_size))
    return out


# --------------------------------------------------------------------------- per-algorithm footprints


def optimizer_rows(cfg: TrainConfig) -> int:
    """Optimizer-state rows per slot: momentum 1, Adam/AdamW 2 (first and second moments), plain SGD 0."""
    if cfg.optimizer in ("adam", "adamw"):
        return 2
    return 1 if cfg.momentum > 0 else 0


def _int(params: Mapping, key: str, default: int) -> int:
    value = params.get(key, default)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


KNOWN_ALGORITHMS = ("cfl", "fedavg", "fedavg_ft", "fedem", "fedfomo", "fedmoe", "fedper", "ifca", "local", "oracle", "pflego", "ucfl")
"""The algorithms :func:`footprint` describes one by one."""


def footprint(
    name: str, params: Mapping, arch: Architecture, sizes: SplitSizes, participants: int, cfg: TrainConfig, groups: int = 1
) -> Footprint:
    """One algorithm's :class:`Footprint` (``m`` clients, ``T`` participants, ``P`` parameters).

    The entries follow each file in ``wirelessfl/algorithms``:

    * ``fedavg``, ``oracle``, ``fedper``: the stream models (1, the ground-truth
      groups; FedPer 1 body plus ``m`` heads); one train call over T slots.
    * ``local``: ``m`` models (no mixing matrix: it never aggregates).
    * ``cfl``: 1 model growing by splits; counted as up to twice the ground-truth
      groups (at most ``m``); a step also holds the starts and the T updates.
    * ``ucfl``: k stream models (``m`` for ``streams: m``), the ``[m, m]``
      weights and the ``[k, m]`` mixing rows (float64); its estimation round holds the full gradients ``[T, P]`` in
      float32 and twice in float64, then per (n_k, K) group of clients the batch
      gradients ``[r, K, P]`` in float32 and three float64 temporaries (the
      cast, the column selection, the difference: 28 bytes an entry, as measured).
    * ``fedfomo``: ``base``, ``current`` and ``server`` (3m rows); a round stacks
      the (2 + M) candidates of every participant and evaluates them on
      (2 + M) copies of the validation splits.
    * ``fedem``: M components; training runs T x M slots over M copies of the
      training data; evaluation runs m x M slots (logits, padded, log-softmax in
      float64 and the mixture's temporaries).
    * ``ifca``: J cluster models; the cluster choice evaluates T x J slots over J
      copies of the training data. ``fedmoe`` adds the local experts with their
      AdamW moments (3m rows) and trains them with AdamW.
    * ``pflego``: 1 body and ``m`` heads; a step holds the joint parameters, the
      head-step copy, the cached features and the full gradients (float32 and float64).
    * ``fedavg_ft``: FedAvg plus the cached fine-tuned models (m rows) and a
      train call over all m clients.

    An algorithm not in this table (``KNOWN_ALGORITHMS``) is counted as keeping
    one model per client and training its participants once a round, the
    common personalised case.
    """
    m, T, P = sizes.clients, participants, arch.param_count
    state = optimizer_rows(cfg)
    train_n, val_n = sum(sizes.train), sum(sizes.val)
    longest = max(max(sizes.train, default=0), max(sizes.val, default=0), max(sizes.test, default=0))
    classes = arch.num_classes
    if name in ("fedavg", "oracle"):
        kept = 1 if name == "fedavg" else max(1, groups)
        return Footprint(kept=kept, train_slots=T, state=state, eval_rows=m, eval_slots=m, checkpoint_rows=kept)
    if name == "local":
        return Footprint(kept=m, train_slots=T, state=state, eval_rows=m, eval_slots=m, checkpoint_rows=m, keep_rows=m)
    if name == "fedper":
        heads = m * arch.head_size * FLOAT
        return Footprint(kept=1, kept_bytes=heads, train_slots=T, state=state, eval_rows=m, eval_slots=m, checkpoint_rows=1 + m * arch.head_size / P)
    if name == "cfl":
        kept = min(m, 2 * max(1, groups))
        return Footprint(kept=kept, train_slots=T, state=state, eval_rows=m, eval_slots=m, extra_bytes=(m + 2 * T) * P * FLOAT, checkpoint_rows=kept)
    if name == "ucfl":
        streams = params.get("streams", "m")
        if streams in ("m", "all"):
            kept = m
        elif streams == "auto":
            kept = min(m, _int(dict(zip(("low", "high"), params.get("auto_range", (2, 10)))), "high", 10))
        else:
            kept = min(m, _int(params, "streams", m))
        gradients = T * P * (FLOAT + 8 + 8)
        sigma = max((rows * k for rows, k in _sigma_groups(params, sizes.train[:T])), default=0) * P * (FLOAT + 3 * 8)
        weights = 4 * m * m * 8  # W, distances, k-means copies
        extra = max(gradients, T * P * 8 + sigma) + weights
        mixing = (m + kept) * m * 8  # W [m, m] and the streams' mixing rows [k, m], float64
        return Footprint(kept=kept, kept_bytes=mixing, train_slots=T, state=state, eval_rows=m, eval_slots=m, extra_bytes=extra, checkpoint_rows=kept)
    if name == "fedfomo":
        downloads = min(_int(params, "models_per_client", 5), max(m - 1, 0))
        stacked = T * (2 + downloads)
        return Footprint(
            kept=3 * m, kept_bytes=m * m * 8, train_slots=T, state=state, eval_rows=0, eval_slots=stacked, eval_copies=2 + downloads,
            extra_bytes=stacked * P * FLOAT, checkpoint_rows=3 * m,
            work=1.0 + (2 + downloads) * val_n / max(3 * train_n * max(cfg.epochs, 1), 1),
        )
    if name == "fedem":
        M = _int(params, "components", 3)
        mixture = m * M * longest * classes * (FLOAT + FLOAT + 8 + 8 + 8)
        return Footprint(
            kept=M, train_slots=T * M, train_copies=M, state=state, keep_rows=m * M, eval_rows=m * M, eval_slots=m * M, eval_copies=M,
            eval_extra_bytes=mixture, checkpoint_rows=M, work=M * (1.0 + 1.0 / (3 * max(cfg.epochs, 1))),
        )
    if name in ("ifca", "fedmoe"):
        J = _int(params, "clusters", 3)
        choice = T * J
        if name == "ifca":
            return Footprint(
                kept=J, train_slots=T, state=state, eval_rows=m, eval_slots=max(m, choice), eval_copies=J,
                extra_bytes=choice * P * FLOAT, checkpoint_rows=J, work=1.0 + J / (3 * max(cfg.epochs, 1)),
            )
        local_epochs = _int(params, "local_epochs", 1)
        return Footprint(
            kept=J + 3 * m, train_slots=T, state=2, eval_rows=m, eval_slots=max(m, choice), eval_copies=J,
            extra_bytes=choice * P * FLOAT + T * P * FLOAT * 6, checkpoint_rows=J + 3 * m,
            work=1.0 + (J + 1) / (3 * max(cfg.epochs, 1)) + local_epochs / max(cfg.epochs, 1),
        )
    if name == "pflego":
        heads = m * arch.head_size * FLOAT
        fin = arch.template.get_submodule(arch.layers[-1]).weight.shape[-1] if arch.layers else 0
        features = T * max(sizes.train[:T], default=0) * (fin + 1) * FLOAT
        return Footprint(
            kept=1, kept_bytes=heads, train_slots=0, state=0, eval_rows=m, eval_slots=m,
            extra_bytes=T * P * (FLOAT * 3 + 8) + features, checkpoint_rows=1 + m * arch.head_size / P,
        )
    if name == "fedavg_ft":
        # fine-tuning runs at evaluation, for every client, not in every round's training
        return Footprint(kept=1 + m, train_slots=m, state=state, eval_rows=m, eval_slots=m, checkpoint_rows=1,
                         eval_work=float(params.get("finetune_epochs", 1.0) or 0.0))
    return Footprint(kept=m, train_slots=T, state=state, eval_rows=m, eval_slots=m, checkpoint_rows=m)


def _sigma_groups(params: Mapping, train_sizes: Sequence[int]) -> list[tuple[int, int]]:
    """UCFL eq. 7's batches: (clients, K) per group of equal (n_k, K), as ``ucfl.sigma_batches_for``."""
    size = params.get("sigma_batch_size", 0.1)
    count_cap = _int(params, "sigma_batches", 10)
    groups: dict[tuple[int, int], int] = {}
    for n in train_sizes:
        batch = max(1, math.floor(size * n)) if isinstance(size, float) else min(int(size), n)
        count = max(1, min(count_cap, n // max(batch, 1)))
        groups[(batch, count)] = groups.get((batch, count), 0) + 1
    return [(rows, key[1]) for key, rows in groups.items()]


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
) -> MemoryEstimate:
    """Peak bytes of a run of ``curves`` (algorithm name, params) on clients of ``sizes``; see the module docstring.

    ``units_per_curve`` is how many trainings of a curve a seed holds at once
    (the number of profiles when a deadline makes each profile train its own);
    ``workers`` the slot groups that run at once (CPU threads; 1 on a GPU).
    ``eval_clients``: the most clients one evaluation call gathers the models of (a sampled evaluation's
    chunk, ``sampled_evaluation.CHUNK_CLIENTS``); it caps the evaluation of methods that gather one row per client.
    """
    m = sizes.clients
    P = arch.param_count
    row = P * FLOAT
    held_out = min(m - 1, math.floor(unseen_fraction * m + 0.5)) if unseen_fraction > 0 else 0
    pool = m - held_out
    T = pool if participation >= 1.0 else max(1, math.floor(participation * pool + 0.5))
    act = activations(arch)
    feature = act.input * FLOAT + INDEX
    data = (sum(sizes.train) + sum(sizes.val) + sum(sizes.test)) * feature
    prints = [footprint(name, params, arch, sizes, T, train, groups) for name, params in curves]
    if eval_clients is not None:  # a sampled evaluation gathers at most eval_clients rows per call (one per client)
        prints = [
            replace(fp, eval_rows=min(m, eval_clients), eval_slots=min(fp.eval_slots, eval_clients)) if fp.eval_rows == m else fp
            for fp in prints
        ]

    def persistent(fp: Footprint) -> int:
        kept_state = fp.keep_rows * fp.state * row if keep_optimizer_state else 0
        return int(fp.kept * row + fp.kept_bytes + kept_state)

    kept = units_per_curve * sum(persistent(fp) for fp in prints)
    records = units_per_curve * len(prints) * m * rounds * RECORD_BYTES_PER_CLIENT_ROUND
    results = seeds * len(prints) * profiles * (rounds + 1) * TRACE_ROW_BYTES + seeds * len(prints) * profiles * m * CLIENT_ROW_BYTES

    best: tuple[int, str, dict[str, int]] = (-1, "", {})
    phases: dict[str, int] = {}
    for name_params, fp in zip(curves, prints):
        label = name_params[0]
        candidates = {
            "train": _train_phase(fp, act, sizes, train, T, row, workers, max_samples, keep_optimizer_state),
            "evaluate": _eval_phase(fp, act, sizes, row, workers, max_samples),
            "algorithm": {"algorithm extras": fp.extra_bytes} if fp.extra_bytes else {},
            "checkpoint": {"checkpoint": int(CHECKPOINT_COPIES * fp.checkpoint_rows * row)},
        }
        for phase, parts in candidates.items():
            size = int(sum(parts.values()))
            key = f"{label} {phase}"
            phases[key] = max(phases.get(key, 0), size)
            if size > best[0]:
                best = (size, key, parts)
    parts = {"data": int(data), "models kept": int(kept), "round records": int(records + results)}
    for key, value in best[2].items():
        parts[key] = parts.get(key, 0) + int(value)
    return MemoryEstimate(parts=parts, phase=best[1], phases=phases)


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


def _eval_phase(fp: Footprint, act: Activations, sizes: SplitSizes, row: int, workers: int, max_samples: int) -> dict[str, int]:
    """The largest evaluation: gathered rows, the concatenated split copies, one forward pass per worker."""
    n = max(fp.eval_slots, 1)
    longest = max(max(sizes.test, default=1), max(sizes.val, default=1), max(sizes.train, default=1), 1)
    samples = 2 * max_samples
    cap = max(1, min(1024, EVAL_CHUNK, samples))
    chunk = math.ceil(longest / math.ceil(longest / cap))
    group = balanced_group(n, max(1, samples // chunk), GROUP_MULTIPLE if workers > 1 else 1)
    running = min(workers, math.ceil(n / group))
    split = max(sum(sizes.test), sum(sizes.val), sum(sizes.train))
    copied = fp.eval_copies * split * (act.input * FLOAT + INDEX)
    forward = running * group * (chunk * FLOAT * (act.input * 2 + 3 * act.largest + act.transient) + act.weight_copies * FLOAT)
    return {"evaluation": int(fp.eval_rows * row + copied + forward + fp.eval_extra_bytes)}
