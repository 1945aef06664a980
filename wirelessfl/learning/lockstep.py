"""Lockstep training: n models of one architecture trained as ONE stacked model.

Row s of a ``[n, P]`` parameter tensor is model slot s (a client, a FedEM
component of a client, a cluster model...). One SGD step of every slot is one
forward and one backward pass of the stacked model:

* convolutions are one grouped convolution: the batch of slot s sits in channels
  ``s*C:(s+1)*C`` of an input ``[B, n*C, H, W]`` kept in channels_last memory
  format (max-pooling NCHW is far slower on CPU), ``groups=n``;
* linear layers are batched matmuls over ``[n, B, features]``;
* the backward pass is written by hand from ATen's own backward kernels
  (``convolution_backward``, ``max_pool2d_with_indices_backward``,
  ``threshold_backward``, ``bmm``). That skips autograd's bookkeeping, writes each
  gradient straight into one flat ``[n, P]`` buffer, skips the layers a
  ``trainable`` mask freezes, and lets the optimizer (``wirelessfl.learning.optim``:
  SGD, momentum, Nesterov, Adam, AdamW, clipping) be a few fused ops on the whole
  ``[n, P]`` buffer; a conv's bias gradient is summed from its max-pool's output
  gradient (a quarter of the values) instead of the conv's;
* uneven slots: slots are sorted by their number of steps, so the slots still
  training at step t are a prefix of the rows -- a finished slot is simply not
  computed (no update, no optimizer-state change). A partial last batch is padded and the
  padding gets loss weight 0, so its gradient is exactly the mean over the real
  samples;
* on a multi-core CPU the groups of slots (see ``max_samples``) train
  concurrently on worker threads with one intra-op thread each: tiny ops scale
  poorly over intra-op threads, independent groups scale well.

The shuffles come from :func:`shuffle_schedule`, which the plain per-client loop
(``wirelessfl.learning.reference``) uses too, so both see identical batches.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from wirelessfl.learning import optim
from wirelessfl.learning.first_block import FirstBlock, block_shape
from wirelessfl.learning.halide_aot import KernelUnavailable
from wirelessfl.learning.heap import retain_freed_memory
from wirelessfl.learning.models import Architecture, Op

Dataset = tuple[torch.Tensor, torch.Tensor]


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


# --------------------------------------------------------------------------- shuffles


def slot_steps(sizes: Sequence[int], batch_size: int, epochs: Sequence[float]) -> list[int]:
    """SGD steps of each slot: round(epochs * batches per epoch), halves rounded up."""
    return [math.floor(e * math.ceil(size / batch_size) + 0.5) for size, e in zip(sizes, epochs)]


def _permutations(
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
    perms, steps = _permutations(sizes, batch_size, epochs, generator)
    return [[b for p in slot_perms for b in p.split(batch_size)][:n_steps] for slot_perms, n_steps in zip(perms, steps)]


def _batch_table(perms: list[torch.Tensor], n_steps: int, batch_size: int) -> torch.Tensor:
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


# --------------------------------------------------------------------------- the stacked model


class _StackedProgram:
    """Forward and hand-written backward of an architecture's layer program for n stacked models.

    Activations are ``[B, n*C, H, W]`` (channels_last) before ``flatten`` and
    ``[n, B, F]`` after it.
    """

    def __init__(self, arch: Architecture, fused: bool = False):
        self.arch = arch
        self.ops: tuple[Op, ...] = _pool_before_relu(arch.ops)
        self.block, self.block_status = _first_block(self.ops, arch, fused)
        slices = iter(arch.param_slices)
        self.op_slices = [(next(slices), next(slices)) if op.kind in ("conv", "linear") else None for op in self.ops]
        self.image_input = any(op.kind == "conv" for op in self.ops)
        # index (in arch.param_slices) of each op's weight; its bias is the next one
        self.tensor_index, count = [], 0
        for sl in self.op_slices:
            self.tensor_index.append(count)
            count += 2 if sl is not None else 0

    def gather_input(self, x_cat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Samples ``x_cat[index]`` (``index`` [n, B]) in the program's input layout.

        Images are gathered batch-major, ``[B, n, C, H, W]``: channels_last
        ``[B, n*C, H, W]`` is memory order (B, H, W, n, C), so each sample's
        ``(n*C, H*W)`` block is transposed once. Permuting a slot-major gather
        instead copies with a C-long inner loop: 1.7-2x slower for 3-channel
        images (docs/engine.md). With the fused first block the batch-major
        gather stays ``[B, n, C, H, W]``, zero-padded for its kernel.
        """
        n, batch = index.shape
        if not self.image_input:
            return x_cat[index].reshape(n, batch, -1)
        channels, height, width = x_cat.shape[1:]
        if self.block is not None:
            return self.block.layout(x_cat[index.t().contiguous()])
        x = x_cat[index.t().contiguous()].reshape(batch, n * channels, height * width)
        nhwc = x.transpose(1, 2).contiguous()
        return nhwc.view(batch, height, width, n * channels).permute(0, 3, 1, 2)

    def forward(self, flat: torch.Tensor, h: torch.Tensor, keep: bool, stop: int | None = None) -> tuple[torch.Tensor, list]:
        """Logits ``[n, B, classes]``; with ``keep`` also the tape the backward pass needs.

        ``stop`` runs only ``ops[:stop]`` (``-1``: the head's input features ``[n, B, F]``).
        """
        n = flat.shape[0]
        tape: list = []
        first = 0
        if self.block is not None:
            if stop is not None and range(len(self.ops))[stop] < 3:
                raise ValueError(f"stop={stop} ends inside the fused first block (ops 0-2)")
            (w_sl, b_sl), first, x = self.op_slices[0], 3, h
            out, phase = self.block.forward(x, flat[:, w_sl.offset : w_sl.stop], flat[:, b_sl.offset : b_sl.stop])
            h = self.block.channels_last(out).contiguous(memory_format=torch.channels_last)
            if keep:  # the block's backward runs where the ReLU's would: tape[2]
                tape += [None, None, (x, out, phase)]
        for op, sl in zip(self.ops[first:stop], self.op_slices[first:stop]):
            saved = None
            if op.kind == "resize":
                h = F.interpolate(h, size=op.args, mode="bilinear", align_corners=False)
                h = h.contiguous(memory_format=torch.channels_last)
            elif op.kind == "conv":
                cin, cout, k, padding = op.args
                w_sl, b_sl = sl
                weight = flat[:, w_sl.offset : w_sl.stop].reshape(n * cout, cin, k, k)
                bias = flat[:, b_sl.offset : b_sl.stop].reshape(n * cout)
                saved = (h, weight)
                if cin == 1:
                    h = F.conv2d(_repeat_channels(h, cout), weight, bias, padding=padding, groups=n * cout)
                else:
                    h = F.conv2d(h, weight, bias, padding=padding, groups=n)
            elif op.kind == "relu":
                h = torch.relu_(h)
                saved = h
            elif op.kind == "maxpool":
                kernel, stride, padding = op.args
                out, indices = torch.ops.aten.max_pool2d_with_indices(
                    h, [kernel, kernel], [stride, stride], [padding, padding]
                )
                saved = (h, indices)
                h = out
            elif op.kind == "flatten":
                if h.dim() == 4:
                    batch, nc, height, width = h.shape
                    saved = h.shape
                    nhwc = h.permute(0, 2, 3, 1).reshape(batch, height, width, n, nc // n)
                    h = nhwc.permute(3, 0, 4, 1, 2).reshape(n, batch, -1)
            else:
                fin, fout = op.args
                w_sl, b_sl = sl
                weight = flat[:, w_sl.offset : w_sl.stop].view(n, fout, fin)
                bias = flat[:, b_sl.offset : b_sl.stop]
                saved = h
                h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
            if keep:
                tape.append(saved)
        return h, tape

    def backward(
        self, flat: torch.Tensor, tape: list, grad_logits: torch.Tensor, grad: torch.Tensor, needed: Sequence[bool]
    ) -> None:
        """Write d(loss)/d(params) into ``grad`` ``[n, P]`` for the parameter tensors ``needed``.

        Tensors not needed are not written; layers below the lowest needed one are
        not visited.
        """
        n = flat.shape[0]
        wanted = [sl is not None and (needed[j] or needed[j + 1]) for sl, j in zip(self.op_slices, self.tensor_index)]
        if not any(wanted):
            return
        lowest = wanted.index(True)
        g = grad_logits
        bias_done = False  # a conv's bias gradient already taken from its max-pool's output gradient
        for i in range(len(self.ops) - 1, lowest - 1, -1):
            op, saved, j = self.ops[i], tape[i], self.tensor_index[i]
            if self.block is not None and i == 2:
                w_sl, b_sl = self.op_slices[0]
                d_weight, d_bias = self.block.backward(g, *saved)
                if needed[0]:
                    grad[:, w_sl.offset : w_sl.stop].copy_(d_weight)
                if needed[1]:
                    grad[:, b_sl.offset : b_sl.stop].copy_(d_bias)
                return
            need_w, need_b = (needed[j], needed[j + 1]) if self.op_slices[i] else (False, False)
            need_input = i > lowest
            if op.kind == "conv" and bias_done:
                need_b, bias_done = False, False
            if op.kind == "linear":
                fin, fout = op.args
                w_sl, b_sl = self.op_slices[i]
                if need_w:  # written in place: a copy of the MLP's [n, 200, 784] took as long as the bmm
                    torch.bmm(g.transpose(1, 2), saved, out=grad[:, w_sl.offset : w_sl.stop].view(n, fout, fin))
                if need_b:
                    grad[:, b_sl.offset : b_sl.stop].copy_(g.sum(1))
                if need_input:
                    g = torch.bmm(g, flat[:, w_sl.offset : w_sl.stop].view(n, fout, fin))
            elif op.kind == "relu":
                g = torch.ops.aten.threshold_backward(g, saved, 0)
            elif op.kind == "flatten":
                if saved is not None:
                    batch, nc, height, width = saved
                    nhwc = g.view(n, batch, nc // n, height, width).permute(1, 3, 4, 0, 2).contiguous()
                    g = nhwc.view(batch, height, width, nc).permute(0, 3, 1, 2)
            elif op.kind == "maxpool":
                kernel, stride, padding = op.args
                h_in, indices = saved
                below = self.ops[i - 1] if i > lowest else None
                if below is not None and below.kind == "conv" and needed[self.tensor_index[i - 1] + 1]:
                    # the pool's backward scatters (adds) each output gradient into one input
                    # position, so per channel its sum is the conv's bias gradient: summing the
                    # pooled gradient reads 1/stride^2 of the values (conv1: 0.07 ms, not 1 ms)
                    b_sl = self.op_slices[i - 1][1]
                    grad[:, b_sl.offset : b_sl.stop].copy_(g.sum((0, 2, 3)).view(n, -1))
                    bias_done = True
                g = torch.ops.aten.max_pool2d_with_indices_backward(
                    g, h_in, [kernel, kernel], [stride, stride], [padding, padding], [1, 1], False, indices
                )
            elif op.kind == "conv":
                _, cout, _, padding = op.args
                w_sl, b_sl = self.op_slices[i]
                h_in, weight = saved
                if not (need_input or need_w or need_b):
                    continue
                # the conv after the fused block: its input gradient from the block's kernel, slot-major
                kernel_input = need_input and i == 3 and self.block is not None and self.block.has_next_input_grad
                mask = [need_input and not kernel_input, need_w, need_b]
                g_in, g_w, g_b = torch.ops.aten.convolution_backward(
                    g, h_in, weight, [n * cout], [1, 1], [padding, padding], [1, 1], False, [0, 0], n, mask
                ) if any(mask) else (None, None, None)
                if need_w:
                    grad[:, w_sl.offset : w_sl.stop].copy_(g_w.reshape(n, -1))
                if need_b:
                    grad[:, b_sl.offset : b_sl.stop].copy_(g_b.view(n, -1))
                g = self.block.next_input_grad(g, flat[:, w_sl.offset : w_sl.stop]) if kernel_input else g_in


def _repeat_channels(h: torch.Tensor, times: int) -> torch.Tensor:
    """``[B, n, H, W]`` -> ``[B, n*times, H, W]`` (channels_last), each channel repeated ``times`` times.

    A grouped convolution with one input channel per group is then a depthwise
    convolution, which oneDNN runs about 1.5x faster, with identical results.
    """
    batch, n, height, width = h.shape
    nhwc = h.permute(0, 2, 3, 1).unsqueeze(-1).expand(batch, height, width, n, times)
    return nhwc.reshape(batch, height, width, n * times).permute(0, 3, 1, 2)


def _first_block(ops: tuple[Op, ...], arch: Architecture, fused: bool) -> tuple[FirstBlock | None, str]:
    """The fused first block when ``fused`` and the architecture starts with one, and why not otherwise."""
    if not fused:
        return None, "off"
    shape = block_shape(ops, arch.input_shape)
    if shape is None:
        return None, "not applicable: the model does not start with a small conv, 2x2 max-pool, ReLU"
    try:
        return FirstBlock(shape), "fused"
    except KernelUnavailable as err:
        warnings.warn(f"wirelessfl: fused first-block kernels unavailable ({err}); the first layer runs on oneDNN", stacklevel=3)
        return None, f"unavailable: {err}"


EVAL_CHUNK = 128
"""Largest per-slot chunk of a pass over whole datasets (evaluate, logits, full_gradient)."""


GROUP_MULTIPLE = 2
"""On a CPU, slots are split into a multiple of this many groups, whatever the thread count.

The partition decides the shapes of the batched kernels, and kernels of other
shapes round differently (1e-8, then amplified by training), so a partition
that followed the thread count made results depend on it: ``OMP_NUM_THREADS=1``
vs 2, or a sweep's process pool vs in-process. Each group also always runs with
one intra-op thread (:func:`_run_groups`). Threads now only decide how many
groups run at once; 2 keeps both cores of the 2-core machines busy, and a CPU
with more cores than groups leaves the rest idle (see docs/engine.md).
"""


def _balanced_group(n: int, largest: int, multiple: int = 1) -> int:
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


def _partition(device: torch.device) -> int:
    """``multiple`` of :func:`_balanced_group` on this device: fixed on a CPU, one group at a time elsewhere."""
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


def _run_groups(task, starts: Sequence[int], device: torch.device) -> None:
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


def _pool_before_relu(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """Rewrite ``relu, maxpool`` as ``maxpool, relu``: the same numbers, a 4x smaller ReLU.

    ReLU is monotone, so max(relu(v)) = relu(max(v)); the gradient reaches the
    same arg-max position and is zeroed under the same condition (value <= 0).
    """
    ops = list(ops)
    for i in range(len(ops) - 1):
        if ops[i].kind == "relu" and ops[i + 1].kind == "maxpool":
            ops[i], ops[i + 1] = ops[i + 1], ops[i]
    return tuple(ops)


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


# --------------------------------------------------------------------------- where the time goes


class PhaseTimer:
    """Wall seconds per label, nesting-aware: time is charged to the innermost open label.

    Entering or leaving a label charges the time since the previous event to the
    label open until then, so an inner label's time is never counted twice and
    the labels' sum is the time some label was open. ``sync`` (called at every
    event, e.g. ``torch.cuda.synchronize``) makes asynchronous device work land
    in the label that queued it; it is only set when profiling, so default runs
    do not wait for the device. ``clock`` is injectable for tests.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] | None = None):
        self.clock = clock
        self.sync = sync
        self._open: list[str] = []
        self._since = 0.0
        self._times: dict[str, float] = {}

    @property
    def active(self) -> bool:
        """Whether any label is open."""
        return bool(self._open)

    def _charge(self) -> None:
        if self.sync is not None:
            self.sync()
        now = self.clock()
        if self._open:
            label = self._open[-1]
            self._times[label] = self._times.get(label, 0.0) + (now - self._since)
        self._since = now

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Charge the time inside the block (less that of nested labels) to ``label``."""
        self._charge()
        self._open.append(label)
        try:
            yield
        finally:
            self._charge()
            self._open.pop()

    def times(self, reset: bool = False) -> dict[str, float]:
        """Accumulated seconds per label up to the last label boundary; ``reset`` starts over from zero."""
        times = dict(self._times)
        if reset:
            self._times.clear()
        return times


ENTRY_LABELS = {"train": "local training"}
"""Label of an engine entry point timed with no label open (default: the method's name)."""


def _timed_entry(method):
    """Time an engine entry point under its own label, unless the caller has a label open.

    So an algorithm's ``with engine.phase("ucfl estimation"):`` takes the
    ``full_gradient`` calls inside it, and a bare call still shows up by name.
    """
    label = ENTRY_LABELS.get(method.__name__, method.__name__)

    @functools.wraps(method)
    def timed(self, *args, **kwargs):
        if self.timer.active:
            return method(self, *args, **kwargs)
        with self.timer.phase(label):
            return method(self, *args, **kwargs)

    return timed


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


# --------------------------------------------------------------------------- the engine


class LockstepEngine:
    """Trains, evaluates and differentiates n stacked models of one architecture.

    ``max_samples`` bounds the samples of one stacked forward pass (slots x
    per-slot batch): more slots than fit are processed in consecutive groups,
    which bounds memory (1,000 clients need no more than 256) without changing
    any result. ``data_cache_bytes`` bounds the device copies of datasets kept
    for the next call (least recently used dropped first; 0 = keep none).
    ``fused_first_block`` runs a small first conv + 2x2 max-pool + ReLU
    (LeNet-5's) as two Halide kernels on a CPU (``wirelessfl.learning.first_block``);
    ``engine.program.block_status`` says whether it does and why not.
    """

    def __init__(
        self,
        arch: Architecture,
        device: torch.device | str = "cpu",
        *,
        max_samples: int = 512,
        profile_sync: bool = False,
        data_cache_bytes: int = 2**30,
        fused_first_block: bool = True,
    ):
        if not (isinstance(max_samples, int) and max_samples >= 1):
            raise ValueError(f"engine max_samples must be an int >= 1, got {max_samples!r}")
        if not (isinstance(data_cache_bytes, int) and data_cache_bytes >= 0):
            raise ValueError(f"engine data_cache_bytes must be an int >= 0, got {data_cache_bytes!r}")
        self.arch = arch
        self.device = torch.device(device)
        if self.device.type == "cpu":
            retain_freed_memory()  # no page faults on every step's activations (learning/heap.py)
        self.max_samples = max_samples
        self.data_cache_bytes = data_cache_bytes
        self._data_cache: OrderedDict[int, _DataCopy] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.program = _StackedProgram(arch, fused=fused_first_block and self.device.type == "cpu")
        self.timer = PhaseTimer()
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

    def _check(self, params: torch.Tensor, datasets: Sequence[Dataset]) -> None:
        n = len(datasets)
        expected = (n, self.arch.param_count)
        if params.dim() != 2 or tuple(params.shape) != expected:
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
        run, docs/engine.md). An entry holds references to its source tensors, so
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
            x_cat = torch.cat([x.reshape(-1, *shape) for x, _ in unique]).to(self.device, torch.float32)
            y_cat = torch.cat([y.reshape(-1) for _, y in unique]).to(self.device, torch.int64)
        if len(y_cat):
            low, high = int(y_cat.min()), int(y_cat.max())
            if low < 0 or high >= self.arch.num_classes:
                raise ValueError(f"labels must be in [0, {self.arch.num_classes - 1}] (num_classes), got a label {low if low < 0 else high}")
        entry = _DataCopy(unique, [first[(id(x), id(y))] for x, y in unique], x_cat, y_cat)
        with self._cache_lock:
            if entry.size <= self.data_cache_bytes:
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
        return self.program.gather_input(x_cat, safe), y_cat[safe], weights

    # ----------------------------------------------------------------- training

    @_timed_entry
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
    ) -> TrainResult:
        """Slot s trains a copy of ``params[s]`` on ``datasets[s]`` with the ``torch.optim`` optimizer ``cfg`` names.

        ``trainable`` (bool [P]) freezes the False coordinates (no update, no
        weight decay); ``epochs`` gives per-slot (possibly fractional) epoch counts
        instead of ``cfg.epochs``; ``sample_weights`` (one ``[n_s]`` tensor per
        slot) multiplies each sample's loss in the batch mean; ``opt_state``
        continues the optimizer from an earlier ``TrainResult.opt_state`` instead
        of a fresh one.
        """
        self._check(params, datasets)
        n, P = params.shape
        epochs = self._check_epochs(epochs, n, cfg)
        mask, needed = self._check_trainable(trainable)
        sizes = [len(y) for _, y in datasets]
        w_cat = self._check_sample_weights(sample_weights, sizes)
        perms, steps = _permutations(sizes, cfg.batch_size, epochs, generator)
        x_cat, y_cat, offsets = self._concat(datasets)

        order = sorted(range(n), key=lambda s: -steps[s])
        max_steps = steps[order[0]] if n else 0
        table = torch.full((max_steps, n, cfg.batch_size), -1, dtype=torch.int64)
        w_table = None if w_cat is None else table.clone()  # indices into the slot-by-slot weights
        w_offsets = [0, *itertools.accumulate(sizes)]
        for row, slot in enumerate(order):
            slot_table = _batch_table(perms[slot], steps[slot], cfg.batch_size)
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
        group = _balanced_group(n, max(1, self.max_samples // cfg.batch_size), _partition(self.device))

        def train_group(start: int) -> None:
            """Steps of slots ``start:start+group``, with this group's own gradient buffer."""
            stop = min(n, start + group)
            grad = torch.zeros((stop - start, P), device=self.device)  # never-computed tensors stay 0
            for t in range(sorted_steps[start]):
                active = start + sum(1 for s in sorted_steps[start:stop] if s > t)
                rows = slice(start, active)
                x, y, w = self._gather(x_cat, y_cat, table[t, rows], None, w_cat, None if w_table is None else w_table[t, rows])
                p, g = work[rows], grad[: active - start]
                logits, tape = self.program.forward(p, x, keep=True)
                loss, grad_logits = _weighted_cross_entropy(logits, y, w, want_grad=True)
                loss_sum[rows] += loss
                self.program.backward(p, tape, grad_logits, g, needed)
                if mask_f is None:
                    optim.step(p, g, optim.select_rows(state, rows), transform)
                else:  # frozen coordinates: no gradient in, and no update out (weight decay, Adam's state)
                    update = transform.update(g.mul_(mask_f), optim.select_rows(state, rows), p)
                    optim.apply_updates(p, update.mul_(mask_f), transform)

        _run_groups(train_group, range(0, n, group), self.device)

        if permuted:
            work = torch.empty_like(work).index_copy_(0, order_t, work)
            loss_sum = torch.empty_like(loss_sum).index_copy_(0, order_t, loss_sum)
            state = optim.map_state(lambda t: torch.empty_like(t).index_copy_(0, order_t, t), state)
        steps_t = torch.tensor(steps, dtype=torch.int64, device=self.device)
        return TrainResult(params=work, loss=loss_sum / steps_t, steps=steps_t, opt_state=state)

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
        group = _balanced_group(len(sizes), max(1, samples // chunk), _partition(self.device))
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

        _run_groups(run_group, range(0, n, group), self.device)

    @_timed_entry
    def evaluate(self, params: torch.Tensor, datasets: Sequence[Dataset], batch_size: int = 1024) -> EvalResult:
        """Accuracy and mean cross-entropy of every slot on its dataset, all slots batched together."""
        self._check(params, datasets)
        n = len(datasets)
        sizes = [len(y) for _, y in datasets]
        x_cat, y_cat, offsets = self._concat(datasets)
        work = params.detach().to(self.device, torch.float32)
        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        correct = torch.zeros(n, device=self.device)
        loss_sum = torch.zeros(n, device=self.device)

        def task(rows: slice, local: torch.Tensor) -> None:
            with torch.inference_mode():
                index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
                x, y, w = self._gather(x_cat, y_cat, index, torch.ones(index.shape[0], device=self.device))
                logits, _ = self.program.forward(work[rows], x, keep=False)
                loss, _ = _weighted_cross_entropy(logits, y, w, want_grad=False)
                loss_sum[rows] += loss
                correct[rows] += ((logits.argmax(-1) == y) * w).sum(1)

        self._over_groups(sizes, batch_size, task, 2 * self.max_samples)
        count = torch.tensor(sizes, dtype=torch.int64, device=self.device)
        return EvalResult(accuracy=correct / count, loss=loss_sum / count, count=count)

    @_timed_entry
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
                logits, _ = self.program.forward(work[rows], x, keep=False)
                for k, slot in enumerate(range(rows.start, rows.stop)):
                    real = local[k] >= 0
                    out[slot][local[k][real]] = logits[k][real.to(self.device)]

        self._over_groups(sizes, batch_size, task, 2 * self.max_samples)
        return out

    @_timed_entry
    def train_head(self, params: torch.Tensor, datasets: Sequence[Dataset], lr: float, steps: int) -> torch.Tensor:
        """``steps`` full-batch gradient-descent steps on the head (last linear layer) alone, body frozen.

        The body's output is computed once and cached (PFLEGO §3.3: "we pass once
        the data from the NN, store all feature vectors"), so each step costs a
        head-sized matmul instead of a pass through the network. It equals
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
        x_cat, y_cat, offsets = self._concat(datasets)
        offsets_t = torch.tensor(offsets, dtype=torch.int64)
        fin, fout = self.program.ops[-1].args
        longest = max(sizes)
        features = torch.zeros((n, longest, fin), device=self.device)
        labels = torch.zeros((n, longest), dtype=torch.int64, device=self.device)

        def task(rows: slice, local: torch.Tensor) -> None:
            with torch.inference_mode():
                index = torch.where(local >= 0, local + offsets_t[rows].unsqueeze(1), -1).to(self.device)
                x, y, _ = self._gather(x_cat, y_cat, index, None)
                h, _ = self.program.forward(work[rows], x, keep=False, stop=-1)
                for k, slot in enumerate(range(rows.start, rows.stop)):
                    real = local[k] >= 0
                    features[slot, local[k][real]] = h[k][real.to(self.device)]
                    labels[slot, local[k][real]] = y[k][real.to(self.device)]

        self._over_groups(sizes, 1024, task, 2 * self.max_samples)
        count = torch.tensor(sizes, dtype=torch.float32, device=self.device)
        weights = (torch.arange(longest, device=self.device)[None, :] < count[:, None]) / count.clamp(min=1)[:, None]
        w_sl, b_sl = self.program.op_slices[-1]
        weight = work[:, w_sl.offset : w_sl.stop].view(n, fout, fin)
        bias = work[:, b_sl.offset : b_sl.stop]
        for _ in range(steps):
            logits = torch.baddbmm(bias.unsqueeze(1), features, weight.transpose(1, 2))
            _, grad_logits = _weighted_cross_entropy(logits, labels, weights, want_grad=True)
            weight.sub_(torch.bmm(grad_logits.transpose(1, 2), features), alpha=lr)
            bias.sub_(grad_logits.sum(1), alpha=lr)
        return work

    # ----------------------------------------------------------------- gradients

    @_timed_entry
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
            logits, tape = self.program.forward(work[rows], x, keep=True)
            _, grad_logits = _weighted_cross_entropy(logits, y, w, want_grad=True)
            part = torch.empty_like(work[rows])
            self.program.backward(work[rows], tape, grad_logits, part, needed)
            total[rows] += part

        self._over_groups(sizes, batch_size, task, self.max_samples)
        empty = torch.tensor([s == 0 for s in sizes], device=self.device)
        return total.masked_fill_(empty.unsqueeze(1), float("nan"))

    @_timed_entry
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
            group = _balanced_group(len(slots), max(1, self.max_samples // batch_size), _partition(self.device))
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
            logits, tape = self.program.forward(p, x, keep=True)
            _, grad_logits = _weighted_cross_entropy(logits, y, w, want_grad=True)
            part = torch.empty_like(p)
            self.program.backward(p, tape, grad_logits, part, needed)
            out[chosen_t, k] = part  # every pass writes its own (slot, k) rows

        _run_groups(run_pass, range(len(passes)), self.device)
        return out
