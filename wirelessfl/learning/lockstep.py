"""Lockstep training: n models of one architecture trained as ONE stacked model.

Row s of a ``[n, P]`` parameter tensor is model slot s (a client, a FedEM
component of a client, a cluster model...). One optimizer step of every slot is
one forward pass of the stacked model (:mod:`wirelessfl.learning.stacked`: any
``nn.Module``, convolutions as grouped convolutions, linear layers as batched
matmuls) and one ``torch.autograd.grad`` call, whose per-parameter gradients are
copied into one ``[n, P]`` buffer so that the optimizer
(:mod:`wirelessfl.learning.optim`: SGD, momentum, Nesterov, Adam, AdamW,
clipping, each equal to ``torch.optim``) is a few fused ops on the whole buffer.
Parameters a ``trainable`` mask freezes entirely get no gradient, so autograd
skips them and every layer below the lowest trained one.

* uneven slots: slots are sorted by their number of steps, so the slots still
  training at step t are a prefix of the rows -- a finished slot is simply not
  computed (no update, no optimizer-state change). A partial last batch is
  padded and the padding gets loss weight 0, so its gradient is exactly the mean
  over the real samples;
* on a multi-core CPU the groups of slots (see ``max_samples``) train
  concurrently on worker threads with one intra-op thread each
  (:mod:`wirelessfl.learning.workers`).

The shuffles and dropout seeds come from :mod:`wirelessfl.learning.schedule`,
which the plain per-client loop (``wirelessfl.learning.reference``) uses too, so
both see identical batches and masks.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from wirelessfl.learning import optim
from wirelessfl.learning.heap import retain_freed_memory
from wirelessfl.learning.models import Architecture
from wirelessfl.learning.phases import ENTRY_LABELS, PhaseTimer, timed_entry
from wirelessfl.learning.shards import GroupJob, put_rows
from wirelessfl.learning.schedule import batch_table, batch_width, permutations, shuffle_schedule, slot_seeds, slot_steps
from wirelessfl.learning.stacked import Stacked, StackedModel, images
from wirelessfl.learning.workers import GROUP_MULTIPLE, balanced_group, group_samples, partition, run_groups

__all__ = [
    "Dataset", "EVAL_CHUNK", "ENTRY_LABELS", "EvalResult", "GROUP_MULTIPLE", "GradientCorrection", "LockstepEngine", "PhaseTimer",
    "TrainConfig", "TrainResult", "shuffle_schedule", "slot_steps",
]

Dataset = tuple[torch.Tensor, torch.Tensor]

EVAL_CHUNK = 128
"""Largest per-slot chunk of a pass over whole datasets (evaluate, logits, full_gradient)."""


@dataclass(frozen=True)
class TrainConfig:
    """Local training of one round: epochs, batch size and the ``torch.optim`` optimizer it equals.

    ``optimizer`` is ``sgd`` (``momentum``, ``nesterov``), ``adam`` or ``adamw``
    (``betas``, ``eps``); ``weight_decay`` is L2 for sgd/adam and decoupled for
    adamw; ``clip_norm`` clips each slot's gradient norm first. See
    :mod:`wirelessfl.learning.optim`.
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, int) and self.epochs >= 0):
            raise ValueError(f"train.epochs must be an int >= 0, got {self.epochs!r}")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"train.batch_size must be an int >= 1, got {self.batch_size!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"train.lr must be a finite number > 0, got {self.lr!r}")
        if not (0 <= self.momentum < 1):
            raise ValueError(f"train.momentum must be in [0, 1), got {self.momentum!r}")
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise ValueError(f"train.weight_decay must be a finite number >= 0, got {self.weight_decay!r}")
        optim.check_config(self)


@dataclass(frozen=True)
class GradientCorrection:
    """A term added to every slot's loss gradient at every local step: ``mu (theta - anchor) + offset``.

    It is the gradient of ``mu/2 ||theta - anchor||^2 + <offset, theta>`` added to
    the slot's loss: FedProx's proximal term (Li et al., MLSys 2020, eq. 2:
    ``anchor`` the round's global model), Ditto's personal objective (Li et al.,
    ICML 2021, eq. 2) and SCAFFOLD's drift correction ``c - c_i`` (Karimireddy et
    al., ICML 2020, Algorithm 1 line 10: ``offset``). ``anchor`` and ``offset``
    are ``[n, P]`` (one row per slot); the term enters before clipping, weight
    decay and the optimizer, as a term of the loss does, and never moves a
    coordinate ``trainable`` freezes.
    """

    mu: float = 0.0
    anchor: torch.Tensor | None = None
    offset: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.mu, (int, float)) and not isinstance(self.mu, bool) and self.mu >= 0 and math.isfinite(self.mu)):
            raise ValueError(f"correction mu must be a finite number >= 0, got {self.mu!r}")
        if self.mu > 0 and self.anchor is None:
            raise ValueError("correction mu > 0 needs an anchor ([n, P]: the point each slot is pulled towards)")

    @property
    def active(self) -> bool:
        """False when the term is zero (mu = 0 and no offset): training is then exactly as without it."""
        return self.mu > 0 or self.offset is not None


@dataclass
class TrainResult:
    params: torch.Tensor  # [n, P] trained flat parameters
    loss: torch.Tensor  # [n] mean training loss over the steps each slot took (nan when none)
    steps: torch.Tensor  # [n] int64, SGD steps each slot took
    opt_state: tuple = ()  # the optimizer's state per slot after training (pass back to continue it)


@dataclass
class EvalResult:
    accuracy: torch.Tensor  # [n] (nan for an empty dataset)
    loss: torch.Tensor  # [n] mean cross-entropy (nan for an empty dataset)
    count: torch.Tensor  # [n] int64 samples evaluated


def _weighted_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, want_grad: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-slot sum of weights * cross-entropy ``[n]`` and its gradient w.r.t. the logits."""
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    loss = (nll * weights).sum(1)
    if not want_grad:
        return loss, None
    grad = log_probs.exp_().mul_(weights.unsqueeze(-1))
    grad.scatter_add_(-1, labels.unsqueeze(-1), -weights.unsqueeze(-1))
    return loss, grad


class _DataCopy:
    """One concatenated device copy of some datasets, and where each of them starts in it."""

    def __init__(self, datasets: list[Dataset], offsets: list[int], x: torch.Tensor, y: torch.Tensor):
        self.sources = datasets  # keeps the tensors alive, so their ids stay theirs
        self.where = {(id(dx), id(dy)): (offset, dx._version, dy._version) for (dx, dy), offset in zip(datasets, offsets)}
        self.x, self.y = x, y
        self.size = x.numel() * x.element_size() + y.numel() * y.element_size()

    def offsets_of(self, datasets: Sequence[Dataset]) -> list[int] | None:
        """Each dataset's offset in this copy, or None unless all of them are here unmodified."""
        offsets = []
        for x, y in datasets:
            found = self.where.get((id(x), id(y)))
            if found is None or found[1] != x._version or found[2] != y._version:
                return None
            offsets.append(found[0])
        return offsets


#: The default bound of an engine's cached data copies (``LockstepEngine._concat``): a run can hold this much beside
#: its data (rounds of partial participation each add their participants' copy until it is reached).
DATA_CACHE_BYTES = 2**30


class LockstepEngine:
    """Trains, evaluates and differentiates n stacked models of one architecture.

    ``max_samples`` bounds the samples of one stacked forward pass (slots x
    per-slot batch): more slots than fit are processed in consecutive groups,
    which bounds memory (1,000 clients need no more than 256) without changing
    any result. By default it is the device's (``workers.group_samples``: 512
    on a CPU, 8,192 on a GPU). ``data_cache_bytes`` bounds the device copies of datasets kept
    for the next call (least recently used dropped first; 0 = keep none).
    ``accelerators`` are plug-ins asked once whether they run a block of the
    model faster (:mod:`wirelessfl.learning.accelerators`); ``engine.model``
    says which block each one took. ``normalisation`` (``FederatedData.normalisation``) turns
    the samples a call is given (uint8 pixels as the data stores them) into the model's float32
    inputs where they are gathered; None takes them as they are.
    """

    def __init__(
        self,
        arch: Architecture,
        device: torch.device | str = "cpu",
        *,
        max_samples: int | None = None,
        profile_sync: bool = False,
        data_cache_bytes: int = DATA_CACHE_BYTES,
        accelerators: Sequence = (),
        normalisation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        if not (max_samples is None or (isinstance(max_samples, int) and max_samples >= 1)):
            raise ValueError(f"engine max_samples must be None or an int >= 1, got {max_samples!r}")
        if not (isinstance(data_cache_bytes, int) and data_cache_bytes >= 0):
            raise ValueError(f"engine data_cache_bytes must be an int >= 0, got {data_cache_bytes!r}")
        self.arch = arch
        self.device = torch.device(device)
        if self.device.type == "cpu":
            retain_freed_memory()  # no page faults on every step's activations (learning/heap.py)
        self.max_samples = group_samples(self.device) if max_samples is None else max_samples
        self.data_cache_bytes = data_cache_bytes
        self.normalisation = normalisation
        self._uncached = 0
        self._data_cache: OrderedDict[int, _DataCopy] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.model = StackedModel(arch, accelerators=accelerators, device=self.device)
        self.timer = PhaseTimer()
        #: where training groups run: None in this process (worker threads), else a backend with
        #: ``train_groups(engine, jobs)`` such as :class:`wirelessfl.learning.ray_shards.RayShards`
        self.shards = None
        self.profile_sync = profile_sync

    @property
    def profile_sync(self) -> bool:
        """Whether phase boundaries wait for the GPU (exact per-phase times on CUDA, slower runs)."""
        return self.timer.sync is not None

    @profile_sync.setter
    def profile_sync(self, on: bool) -> None:
        self.timer.sync = torch.cuda.synchronize if on and self.device.type == "cuda" else None

    def phase(self, label: str):
        """``with engine.phase("local training"):`` charges the block's wall time to ``label`` (see :class:`PhaseTimer`)."""
        return self.timer.phase(label)

    def phase_times(self, reset: bool = False) -> dict[str, float]:
        """Wall seconds per phase label so far (the engine's entry points by name when no label was open)."""
        return self.timer.times(reset)

    # ----------------------------------------------------------------- checks and data

    @contextlib.contextmanager
    def uncached(self):
        """``with engine.uncached():`` copies made inside are used once and not kept (a pass over data no later
        call repeats, such as a sampled run's final evaluation of every client, would only push out the copies
        every round reuses and hold up to ``data_cache_bytes``); copies already cached are still used."""
        with self._cache_lock:
            self._uncached += 1
        try:
            yield self
        finally:
            with self._cache_lock:
                self._uncached -= 1

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """Stored samples ``x`` as the model's float32 inputs on the engine's device (what every call trains on)."""
        x = x.to(self.device)
        return x.to(torch.float32) if self.normalisation is None else self.normalisation(x)

    def _check(self, params: torch.Tensor | None, datasets: Sequence[Dataset], rows: torch.Tensor | None = None) -> None:
        """Shapes of ``params`` (None: made per group, checked there), ``rows`` and ``datasets``."""
        n = len(datasets)
        if params is None:
            if rows is not None:
                raise ValueError("rows cannot go with params made per group of slots (a function of the slots)")
        elif rows is not None:  # slot s is row rows[s] of params
            if rows.dim() != 1 or len(rows) != n:
                raise ValueError(f"rows must have shape [len(datasets)] = [{n}], got {list(rows.shape)}")
            if params.dim() != 2 or params.shape[1] != self.arch.param_count:
                raise ValueError(f"params must have shape [k, param_count = {self.arch.param_count}], got {list(params.shape)}")
            if n and (int(rows.min()) < 0 or int(rows.max()) >= params.shape[0]):
                raise ValueError(f"rows must be in [0, {params.shape[0] - 1}] (rows of params)")
        expected = (n, self.arch.param_count)
        if params is not None and rows is None and (params.dim() != 2 or tuple(params.shape) != expected):
            raise ValueError(f"params must have shape [len(datasets), param_count] = {list(expected)}, got {list(params.shape)}")
        for slot, (x, y) in enumerate(datasets):
            if tuple(x.shape[1:]) != self.arch.input_shape or x.dim() != 4:
                raise ValueError(
                    f"datasets[{slot}] x must have shape [n_s, {', '.join(map(str, self.arch.input_shape))}], got {list(x.shape)}"
                )
            if y.dim() != 1 or len(y) != len(x):
                raise ValueError(f"datasets[{slot}] y must have shape [{len(x)}] (one label per sample), got {list(y.shape)}")

    def _concat(self, datasets: Sequence[Dataset]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """All slots' samples in one tensor on the device, and each slot's offset into it (timed as "data movement").

        A dataset given for several slots (FedEM's components, FedFomo's
        candidates) is copied once and the slots share its offset. Copies are
        cached: a call whose datasets all lie in one cached copy (the same tensor
        objects, unmodified: ``_version``; any subset, order or repetition) uses
        it, so the splits a simulation passes every round are copied once per
        run, not once per call (under load the copies took 18% of a scenario-2
        run, docs/research/notes/2026-11-25-hand-written-engine-history.md). An entry holds references to its source tensors, so
        their ``id`` cannot be reused while it lives.
        """
        with self._cache_lock:
            for key in reversed(self._data_cache):
                entry = self._data_cache[key]
                offsets = entry.offsets_of(datasets)
                if offsets is not None:
                    self._data_cache.move_to_end(key)
                    return entry.x, entry.y, offsets
        first: dict[tuple[int, int], int] = {}  # (id(x), id(y)) -> offset of its one copy
        unique: list[Dataset] = []
        offsets, total = [], 0
        for x, y in datasets:
            pair = (id(x), id(y))
            if pair not in first:
                first[pair] = total
                unique.append((x, y))
                total += len(x)
            offsets.append(first[pair])
        shape = self.arch.input_shape
        with self.timer.phase("data movement"):
            x_cat = self.inputs(torch.cat([x.reshape(-1, *shape) for x, _ in unique]))
            y_cat = torch.cat([y.reshape(-1) for _, y in unique]).to(self.device, torch.int64)
        if len(y_cat):
            low, high = int(y_cat.min()), int(y_cat.max())
            if low < 0 or high >= self.arch.num_classes:
                raise ValueError(f"labels must be in [0, {self.arch.num_classes - 1}] (num_classes), got a label {low if low < 0 else high}")
        entry = _DataCopy(unique, [first[(id(x), id(y))] for x, y in unique], x_cat, y_cat)
        with self._cache_lock:
            if entry.size <= self.data_cache_bytes and not self._uncached:
                self._data_cache[id(entry)] = entry
                while sum(e.size for e in self._data_cache.values()) > self.data_cache_bytes:
                    self._data_cache.popitem(last=False)
        return x_cat, y_cat, offsets

    def _gather(
        self, x_cat, y_cat, index: torch.Tensor, scale: torch.Tensor | None,
        w_cat: torch.Tensor | None = None, w_index: torch.Tensor | None = None,
    ):
        """Inputs, labels and loss weights of one stacked batch; ``index`` [k, B] with -1 = padding.

        A slot's weights are ``scale`` (default 1/real samples) on real samples, 0 on
        padding, times the per-sample weights ``w_cat[w_index]`` when given (the
        weights are laid out slot by slot, the data shares rows between slots).
        """
        valid = index >= 0
        safe = index.clamp(min=0)
        if scale is None:
            scale = 1.0 / valid.sum(1).clamp(min=1)
        weights = valid * scale.unsqueeze(1).to(torch.float32)
        if w_cat is not None:
            weights = weights * w_cat[w_index.clamp(min=0)]
        return self._layout(x_cat, safe), y_cat[safe], weights

    def _layout(self, x_cat: torch.Tensor, index: torch.Tensor) -> Stacked:
        """Samples ``x_cat[index]`` (``index`` [n, B]) as the stacked model's input.

        Images are gathered batch-major, ``[B, n, C, H, W]``: channels_last
        ``[B, n*C, H, W]`` is memory order (B, H, W, n, C), so each sample's
        ``(n*C, H*W)`` block is transposed once. Permuting a slot-major gather
        instead copies with a C-long inner loop: 1.7-2x slower for 3-channel images.
        """
        n, batch = index.shape
        if not self.model.image_input:
            return Stacked(x_cat[index], n)
        channels, height, width = x_cat.shape[1:]
        x = x_cat[index.t().contiguous()].reshape(batch, n * channels, height * width)
        nhwc = x.transpose(1, 2).contiguous()
        return images(nhwc.view(batch, height, width, n * channels).permute(0, 3, 1, 2), n)

    def _step_gradient(self, p: torch.Tensor, x: Stacked, y, w, needed: list[bool], out: torch.Tensor,
                       training: bool, generators=None) -> torch.Tensor:
        """Loss ``[k]`` of rows ``p`` on one stacked batch; d(loss)/d(params) written into ``out`` for the tensors ``needed``."""
        leaves = self.model.views(p, requires_grad=needed)
        logits = self.model.forward(leaves, x, training, generators)
        loss, grad_logits = _weighted_cross_entropy(logits.detach(), y, w, want_grad=True)
        wanted = [(name, leaf) for (name, leaf), need in zip(leaves.items(), needed) if need]
        if wanted and logits.requires_grad:
            grads = torch.autograd.grad(logits, [leaf for _, leaf in wanted], grad_logits, allow_unused=True)
            k = p.shape[0]
            for (name, _), grad in zip(wanted, grads):
                sl = self.model.slices[name]
                target = out[:, sl.offset : sl.stop]
                if grad is None:
                    target.zero_()
                else:
                    target.copy_(grad.reshape(k, -1))
        return loss

    # ----------------------------------------------------------------- training

    @timed_entry
    def train(
        self,
        params: torch.Tensor,
        datasets: Sequence[Dataset],
        cfg: TrainConfig,
        generator: torch.Generator,
        *,
        trainable: torch.Tensor | None = None,
        epochs: Sequence[float] | None = None,
        sample_weights: Sequence[torch.Tensor] | None = None,
        opt_state: tuple | None = None,
        correction: GradientCorrection | None = None,
    ) -> TrainResult:
        """Slot s trains a copy of ``params[s]`` on ``datasets[s]`` with the ``torch.optim`` optimizer ``cfg`` names.

        ``trainable`` (bool [P]) freezes the False coordinates (no update, no
        weight decay); ``epochs`` gives per-slot (possibly fractional) epoch counts
        instead of ``cfg.epochs``; ``sample_weights`` (one ``[n_s]`` tensor per
        slot) multiplies each sample's loss in the batch mean; ``opt_state``
        continues the optimizer from an earlier ``TrainResult.opt_state`` instead
        of a fresh one; ``correction`` adds a proximal pull and a fixed offset to
        every step's gradient (:class:`GradientCorrection`).
        """
        self._check(params, datasets)
        n, P = params.shape
        pull, offset = self._check_correction(correction, n)
        epochs = self._check_epochs(epochs, n, cfg)
        mask, needed = self._check_trainable(trainable)
        sizes = [len(y) for _, y in datasets]
        w_cat = self._check_sample_weights(sample_weights, sizes)
        perms, steps = permutations(sizes, cfg.batch_size, epochs, generator)
        seeds = slot_seeds(n, generator) if self.model.stochastic else None
        x_cat, y_cat, offsets = self._concat(datasets)

        order = sorted(range(n), key=lambda s: -steps[s])
        max_steps = steps[order[0]] if n else 0
        width = batch_width(cfg.batch_size, sizes)
        table = torch.full((max_steps, n, width), -1, dtype=torch.int64)
        w_table = None if w_cat is None else table.clone()  # indices into the slot-by-slot weights
        w_offsets = [0, *itertools.accumulate(sizes)]
        for row, slot in enumerate(order):
            slot_table = batch_table(perms[slot], steps[slot], width)
            table[: steps[slot], row] = torch.where(slot_table >= 0, slot_table + offsets[slot], -1)
            if w_table is not None:
                w_table[: steps[slot], row] = torch.where(slot_table >= 0, slot_table + w_offsets[slot], -1)
        table = table.to(self.device)
        w_table = None if w_table is None else w_table.to(self.device)
        sorted_steps = [steps[s] for s in order]

        permuted = order != list(range(n))
        order_t = torch.tensor(order, dtype=torch.int64, device=self.device)
        source = params.detach().to(self.device, torch.float32)
        work = source.index_select(0, order_t) if permuted else source.clone()
        transform = optim.build(cfg)
        state = self._initial_state(transform, work, opt_state, order_t if permuted else None)
        loss_sum = torch.zeros(n, device=self.device)
        mask_f = None if mask is None else mask.to(self.device, torch.float32)
        group = balanced_group(n, max(1, self.max_samples // width), partition(self.device))
        generators = None if seeds is None else [torch.Generator(self.device).manual_seed(seeds[s]) for s in order]
        if pull is not None:
            pull = pull.index_select(0, order_t) if permuted else pull
        if offset is not None:
            offset = offset.index_select(0, order_t) if permuted else offset
        mu = correction.mu if correction is not None else 0.0

        starts = range(0, n, group)
        if self.shards is not None:  # each group's steps on a remote shard, its rows copied back (learning/shards.py)
            stops = [min(n, start + group) for start in starts]
            jobs = [
                GroupJob.cut(start, stop, work, table, offsets, datasets, order, sorted_steps,
                             batch_width(width, [sizes[order[s]] for s in range(start, stop)]), cfg, mask, needed, mu,
                             None if opt_state is None else state, pull, offset, sample_weights,
                             None if seeds is None else [seeds[s] for s in order[start:stop]])
                for start, stop in zip(starts, stops)
            ]
            for start, stop, (own, loss, rows_state) in zip(starts, stops, self.shards.train_groups(self, jobs)):
                work[start:stop] = own
                loss_sum[start:stop] = loss
                put_rows(state, slice(start, stop), rows_state)
        else:
            def train_group(start: int) -> None:
                """Steps of slots ``start:start+group``, with this group's own parameter copy (:meth:`train_rows`).

                The copy keeps autograd's version check local: views of one shared
                tensor share its version counter, so another group's update would
                look like a change to this group's saved parameters.
                """
                stop = min(n, start + group)
                # this group's batches are no wider than its largest dataset (a full-batch step of a small client
                # next to a large one pads to the small one's own size, not the large one's)
                group_width = batch_width(width, [sizes[order[s]] for s in range(start, stop)])
                own = work[start:stop].clone()
                self.train_rows(
                    own, table[:, start:stop, :group_width], x_cat, y_cat, w_cat,
                    None if w_table is None else w_table[:, start:stop, :group_width], sorted_steps[start:stop],
                    optim.select_rows(state, slice(start, stop)), None if pull is None else pull[start:stop],
                    None if offset is None else offset[start:stop], mask_f, needed, transform, mu,
                    None if generators is None else generators[start:stop], loss_sum[start:stop],
                )
                work[start:stop] = own

            run_groups(train_group, starts, self.device)

        if permuted:
            work = torch.empty_like(work).index_copy_(0, order_t, work)
            loss_sum = torch.empty_like(loss_sum).index_copy_(0, order_t, loss_sum)
            state = optim.map_state(lambda t: torch.empty_like(t).index_copy_(0, order_t, t), state)
        steps_t = torch.tensor(steps, dtype=torch.int64, device=self.device)
        return TrainResult(params=work, loss=loss_sum / steps_t, steps=steps_t, opt_state=state)

    def train_rows(
        self, own, table, x_cat, y_cat, w_cat, w_table, steps, state, pull, offset, mask_f, needed, transform, mu,
        generators, loss_sum,
    ) -> None:
        """One group's local steps, in place on ``own`` [k, P], ``state`` and ``loss_sum`` [k]; rows sorted by steps.

        ``table`` [steps[0], k, width] holds indices into ``x_cat`` (-1 = padding).
        The one body both the in-process threads and a remote shard run
        (:mod:`wirelessfl.learning.shards`), so a group's numbers do not depend
        on where it runs.
        """
        k, P = own.shape
        grad = torch.zeros((k, P), device=self.device)  # never-computed tensors stay 0
        for t in range(steps[0] if k else 0):
            active = sum(1 for s in steps if s > t)
            index = table[t, :active]
            x, y, w = self._gather(x_cat, y_cat, index, None, w_cat, None if w_table is None else w_table[t, :active])
            p, g = own[:active], grad[:active]
            draws = None
            if generators is not None:
                draws = list(zip(generators[:active], (index >= 0).sum(1).tolist()))
            loss = self._step_gradient(p, x, y, w, needed, g, True, draws)
            loss_sum[:active] += loss
            if pull is not None:
                g.add_(p - pull[:active], alpha=mu)
            if offset is not None:
                g.add_(offset[:active])
            rows = optim.select_rows(state, slice(0, active))
            if mask_f is None:
                optim.step(p, g, rows, transform)
            else:  # frozen coordinates: no gradient in, and no update out (weight decay, Adam's state)
                update = transform.update(g.mul_(mask_f), rows, p)
                optim.apply_updates(p, update.mul_(mask_f), transform)

    def _check_correction(self, correction: GradientCorrection | None, n: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The correction's anchor (None unless mu > 0) and offset as float32 ``[n, P]`` on the device."""
        if correction is None or not correction.active:
            return None, None
        expected = (n, self.arch.param_count)
        rows = []
        for name, tensor in (("anchor", correction.anchor if correction.mu > 0 else None), ("offset", correction.offset)):
            if tensor is not None and tuple(tensor.shape) != expected:
                raise ValueError(f"correction {name} must have shape [slots, param_count] = {list(expected)}, got {list(tensor.shape)}")
            rows.append(None if tensor is None else tensor.detach().to(self.device, torch.float32))
        return rows[0], rows[1]

    def _initial_state(self, transform, work: torch.Tensor, opt_state: tuple | None, order_t: torch.Tensor | None):
        """A fresh optimizer state, or a copy of ``opt_state`` in the engine's slot order on the device."""
        fresh = transform.init(work)
        if opt_state is None:
            return fresh
        shapes = optim.map_state(lambda t: tuple(t.shape), fresh)
        given = optim.map_state(lambda t: tuple(t.shape), opt_state)
        if given != shapes:
            raise ValueError("opt_state does not match this optimizer and these slots (pass the TrainResult.opt_state of the same optimizer and slots)")
        moved = optim.map_state(lambda t: t.detach().to(self.device, torch.float32).clone(), opt_state)
        if order_t is not None:
            moved = optim.map_state(lambda t: t.index_select(0, order_t), moved)
        return moved

    def _check_sample_weights(self, sample_weights: Sequence[torch.Tensor] | None, sizes: Sequence[int]) -> torch.Tensor | None:
        """Concatenated per-sample loss weights on the device (None when not given)."""
        if sample_weights is None:
            return None
        if len(sample_weights) != len(sizes):
            raise ValueError(f"sample_weights must give one tensor per slot ({len(sizes)}), got {len(sample_weights)}")
        for slot, (w, size) in enumerate(zip(sample_weights, sizes)):
            if w.dim() != 1 or len(w) != size:
                raise ValueError(f"sample_weights[{slot}] must have shape [{size}] (one weight per sample), got {list(w.shape)}")
        if not sizes or not sum(sizes):
            return torch.zeros(0, device=self.device)
        return torch.cat([w.reshape(-1) for w in sample_weights]).to(self.device, torch.float32)

    def _check_epochs(self, epochs: Sequence[float] | None, n: int, cfg: TrainConfig) -> list[float]:
        if epochs is None:
            return [float(cfg.epochs)] * n
        epochs = [float(e) for e in epochs]
        if len(epochs) != n:
            raise ValueError(f"epochs must give one epoch count per slot ({n}), got {len(epochs)}")
        for slot, e in enumerate(epochs):
            if not (e >= 0 and math.isfinite(e)):
                raise ValueError(f"epochs[{slot}] must be a finite number >= 0, got {e}")
        return epochs

    def _check_trainable(self, trainable: torch.Tensor | None) -> tuple[torch.Tensor | None, list[bool]]:
        """(mask or None when everything trains, per parameter tensor: does any coordinate train)."""
        slices = self.arch.param_slices
        if trainable is None:
            return None, [True] * len(slices)
        if trainable.dtype != torch.bool or tuple(trainable.shape) != (self.arch.param_count,):
            raise ValueError(
                f"trainable must be a bool tensor of shape [{self.arch.param_count}] (param_count), got {trainable.dtype} {list(trainable.shape)}"
            )
        trainable = trainable.cpu()
        needed = [bool(trainable[sl.offset : sl.stop].any()) for sl in slices]
        return (None if bool(trainable.all()) else trainable), needed

    # ----------------------------------------------------------------- evaluation

    def _eval_groups(self, sizes: Sequence[int], batch_size: int, samples: int) -> tuple[int, int]:
        """(slots per group, samples per slot and pass) for passes over whole datasets.

        A pass holds about ``samples`` samples; each
        slot's data is cut into equal chunks of at most ``min(batch_size, 128, samples)`` so a
        200-sample split is two passes of 100, not 128 + 72 padded to 128. Groups
        are balanced over the worker threads, as in ``train``.
        """
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        longest = max(max(sizes, default=1), 1)
        cap = max(1, min(batch_size, EVAL_CHUNK, samples))
        chunk = math.ceil(longest / math.ceil(longest / cap))
        group = balanced_group(len(sizes), max(1, samples // chunk), partition(self.device))
        return group, chunk

    def _over_groups(self, sizes: Sequence[int], batch_size: int, task, samples: int) -> None:
        """``task(rows, local)`` for every pass: ``local`` [k, chunk] indices into each slot's data, -1 = padding.

        Groups of slots run concurrently on a multi-core CPU (each writes only its own rows).
        A forward pass without a tape can hold twice the samples of a training pass.
        """
        n = len(sizes)
        group, chunk = self._eval_groups(sizes, batch_size, samples)

        def run_group(start: int) -> None:
            rows = slice(start, min(n, start + group))
            limit = torch.tensor(sizes[rows]).unsqueeze(1)
            for first in range(0, int(limit.max()), chunk):
                index = torch.arange(first, first + chunk).expand(len(limit), chunk)
                task(rows, torch.where(index < limit, index, -1))

        run_groups(run_group, range(0, n, group), self.device)

    @timed_entry
    def evaluate(
        self,
        params: torch.Tensor | Callable[[slice], torch.Tensor],
        datasets: Sequence[Dataset],
        batch_size: int = 1024,
        rows: torch.Tensor | None = None,
    ) -> EvalResult:
        """Accuracy and mean cross-entropy of every slot on its dataset, all slots batched together.

        ``rows`` (int64 ``[len(datasets)]``): slot s evaluates ``params[rows[s]]``, so slots that share a model
        (FedAvg's clients) gather only their group's rows, not an ``[n, P]`` copy (2.5 GB of LeNet-5 rows at
        10,000 clients); the same numbers as ``evaluate(params[rows], datasets)``.

        ``params`` may instead be a function of a slice of slots that makes their ``[k, P]`` models (per-client
        models read from a client store, FedPer's body beside each stored head): each group of slots makes its
        own, once, so only the groups running at once hold rows; the same numbers as
        ``evaluate(params(slice(0, len(datasets))), datasets)``."""
        made = callable(params)
        self._check(None if made else params, datasets, rows)
        n = len(datasets)
        sizes = [len(y) for _, y in datasets]
        x_cat, y_cat, offsets = self._concat(datasets)
        work = None if made else params.detach().to(self.device, torch.float32)
        shared = None if rows is None else rows.to(self.device, torch.int64)
        latest = threading.local()  # each worker thread's group and its models (a group runs on one thread)

        def models(group: slice) -> torch.Tensor:
            if not made:
                return work[group] if shared is None else work[shared[group]]
            if getattr(latest, "group", None) != group:
                own = params(group).detach().to(self.device, torch.float32)
                if tuple(own.shape) != (group.stop - group.start, self.arch.param_count):
                    raise ValueError(f"params made for slots {group.start}..{group.stop - 1} have shape {list(own.shape)}, "
                                     f"expected {[group.stop - group.start, self.arch.param_count]}")
                latest.group, latest.models = group, own
            return latest.models

        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        correct = torch.zeros(n, device=self.device)
        loss_sum = torch.zeros(n, device=self.device)

        def task(rows: slice, local: torch.Tensor) -> None:
            with torch.inference_mode():
                index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
                x, y, w = self._gather(x_cat, y_cat, index, torch.ones(index.shape[0], device=self.device))
                logits = self.model.forward(self.model.views(models(rows)), x, training=False)
                loss, _ = _weighted_cross_entropy(logits, y, w, want_grad=False)
                loss_sum[rows] += loss
                correct[rows] += ((logits.argmax(-1) == y) * w).sum(1)

        self._over_groups(sizes, batch_size, task, 2 * self.max_samples)
        count = torch.tensor(sizes, dtype=torch.int64, device=self.device)
        return EvalResult(accuracy=correct / count, loss=loss_sum / count, count=count)

    @timed_entry
    def logits(self, params: torch.Tensor, datasets: Sequence[Dataset], batch_size: int = 1024) -> list[torch.Tensor]:
        """Per slot, the logits ``[n_s, classes]`` of its model on its dataset."""
        self._check(params, datasets)
        sizes = [len(y) for _, y in datasets]
        x_cat, y_cat, offsets = self._concat(datasets)
        work = params.detach().to(self.device, torch.float32)
        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        out = [torch.empty((size, self.arch.num_classes), device=self.device) for size in sizes]

        def task(rows: slice, local: torch.Tensor) -> None:
            with torch.inference_mode():
                index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
                x, _, _ = self._gather(x_cat, y_cat, index, None)
                logits = self.model.forward(self.model.views(work[rows]), x, training=False)
                for k, slot in enumerate(range(rows.start, rows.stop)):
                    real = local[k] >= 0
                    out[slot][local[k][real]] = logits[k][real.to(self.device)]

        self._over_groups(sizes, batch_size, task, 2 * self.max_samples)
        return out

    @timed_entry
    def train_head(self, params: torch.Tensor, datasets: Sequence[Dataset], lr: float, steps: int) -> torch.Tensor:
        """``steps`` full-batch gradient-descent steps on the head alone, body frozen.

        The body's output is computed once and cached (PFLEGO §3.3: "we pass once
        the data from the NN, store all feature vectors"), so each step costs a
        head-sized matmul instead of a pass through the network (when the model
        ends with its head, a Linear layer; otherwise every step is a pass). It equals
        ``train`` with ``trainable=arch.head_mask()``, one batch holding the whole
        dataset and plain SGD at ``lr`` (tested), up to float rounding.
        """
        self._check(params, datasets)
        if not (isinstance(steps, int) and steps >= 0):
            raise ValueError(f"steps must be an int >= 0, got {steps!r}")
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
        work = params.detach().to(self.device, torch.float32).clone()
        n, sizes = len(datasets), [len(y) for _, y in datasets]
        if steps == 0 or not n or not max(sizes):
            return work
        head = self.model.head_input_node()
        if head is None:  # the output is not a Linear head on features: full-batch steps of the whole model, body frozen
            cfg = TrainConfig(epochs=steps, batch_size=max(sizes), lr=lr, momentum=0.0)
            return self.train(work, datasets, cfg, torch.Generator(), trainable=self.arch.head_mask()).params
        x_cat, y_cat, offsets = self._concat(datasets)
        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        weight_name = f"{head.target}.weight"
        w_sl, b_sl = self.model.slices[weight_name], self.model.slices[f"{head.target}.bias"]
        fout, fin = w_sl.shape
        longest = max(sizes)
        features = torch.zeros((n, longest, fin), device=self.device)
        labels = torch.zeros((n, longest), dtype=torch.int64, device=self.device)

        def task(rows: slice, local: torch.Tensor) -> None:
            with torch.inference_mode():
                index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
                x, y, _ = self._gather(x_cat, y_cat, index, None)
                h = self.model.forward(self.model.views(work[rows]), x, training=False, stop=head.args[0])
                h = h.reshape(h.shape[0], h.shape[1], fin)
                for k, slot in enumerate(range(rows.start, rows.stop)):
                    real = local[k] >= 0
                    features[slot, local[k][real]] = h[k][real.to(self.device)]
                    labels[slot, local[k][real]] = y[k][real.to(self.device)]

        self._over_groups(sizes, 1024, task, 2 * self.max_samples)
        count = torch.tensor(sizes, dtype=torch.float32, device=self.device)
        weights = (torch.arange(longest, device=self.device)[None, :] < count[:, None]) / count.clamp(min=1)[:, None]
        weight = work[:, w_sl.offset : w_sl.stop].view(n, fout, fin)
        bias = work[:, b_sl.offset : b_sl.stop]
        for _ in range(steps):
            logits = torch.baddbmm(bias.unsqueeze(1), features, weight.transpose(1, 2))
            _, grad_logits = _weighted_cross_entropy(logits, labels, weights, want_grad=True)
            weight.sub_(torch.bmm(grad_logits.transpose(1, 2), features), alpha=lr)
            bias.sub_(grad_logits.sum(1), alpha=lr)
        return work

    # ----------------------------------------------------------------- gradients

    @timed_entry
    def full_gradient(self, params: torch.Tensor, datasets: Sequence[Dataset], batch_size: int = 1024) -> torch.Tensor:
        """``[n, P]`` gradient of the mean loss over each slot's whole dataset (nan rows for empty ones)."""
        self._check(params, datasets)
        sizes = [len(y) for _, y in datasets]
        x_cat, y_cat, offsets = self._concat(datasets)
        work = params.detach().to(self.device, torch.float32)
        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        scale = 1.0 / torch.tensor(sizes, dtype=torch.float32, device=self.device).clamp(min=1)
        total = torch.zeros_like(work)
        needed = [True] * len(self.arch.param_slices)

        def task(rows: slice, local: torch.Tensor) -> None:
            index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
            x, y, w = self._gather(x_cat, y_cat, index, scale[rows])
            part = torch.empty_like(work[rows])
            self._step_gradient(work[rows], x, y, w, needed, part, training=False)
            total[rows] += part

        self._over_groups(sizes, batch_size, task, self.max_samples)
        empty = torch.tensor([s == 0 for s in sizes], device=self.device)
        return total.masked_fill_(empty.unsqueeze(1), float("nan"))

    @timed_entry
    def batch_gradients(
        self,
        params: torch.Tensor,
        datasets: Sequence[Dataset],
        batch_size: int,
        num_batches: int | None,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """``[n, K, P]`` mean-loss gradients of K disjoint shuffled batches per slot.

        The batches are the first K of one epoch of :func:`shuffle_schedule` (the
        last batch of a slot may be partial). K is ``num_batches``, or the largest
        number of batches any slot has; a slot with fewer than K batches gets NaN
        rows for the missing ones.
        """
        self._check(params, datasets)
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if num_batches is not None and not (isinstance(num_batches, int) and num_batches >= 1):
            raise ValueError(f"num_batches must be None or an int >= 1, got {num_batches!r}")
        n, P = params.shape
        sizes = [len(y) for _, y in datasets]
        schedule = shuffle_schedule(sizes, batch_size, [1.0] * n, generator)
        K = num_batches if num_batches is not None else max((len(b) for b in schedule), default=0)
        x_cat, y_cat, offsets = self._concat(datasets)
        work = params.detach().to(self.device, torch.float32)
        out = torch.full((n, K, P), float("nan"), device=self.device)
        needed = [True] * len(self.arch.param_slices)
        passes = []  # (k, slots): one stacked pass over batch k of these slots
        for k in range(K):
            slots = [s for s in range(n) if k < len(schedule[s])]
            group = balanced_group(len(slots), max(1, self.max_samples // batch_size), partition(self.device))
            passes += [(k, slots[start : start + group]) for start in range(0, len(slots), group)]

        def run_pass(i: int) -> None:
            k, chosen = passes[i]
            index = torch.full((len(chosen), batch_size), -1, dtype=torch.int64)
            for row, slot in enumerate(chosen):
                batch = schedule[slot][k]
                index[row, : len(batch)] = batch + offsets[slot]
            chosen_t = torch.tensor(chosen, dtype=torch.int64, device=self.device)
            x, y, w = self._gather(x_cat, y_cat, index.to(self.device), None)
            p = work.index_select(0, chosen_t)
            part = torch.empty_like(p)
            self._step_gradient(p, x, y, w, needed, part, training=False)
            out[chosen_t, k] = part  # every pass writes its own (slot, k) rows

        run_groups(run_pass, range(len(passes)), self.device)
        return out
