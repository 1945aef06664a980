"""Where one lockstep training step spends its time, op by op (one slot group, one thread).

Runs the engine's own step -- gather, stacked forward, loss, autograd backward
(with the copy of each parameter's gradient into the flat buffer), SGD-momentum
update -- on one group of ``--slots`` models x ``--batch`` EMNIST-shaped random
samples with one intra-op thread (as each of the engine's CPU worker threads
runs), then

1. times the five parts of the step (median of ``--steps`` steps), and
2. records every ATen op of one step (a ``TorchDispatchMode``) and every call
   of the Halide first block's kernels (``--halide``: the accelerator plug-in,
   ``learning/first_block.py``), and replays each alone on copies of its
   arguments (same shapes and strides), median of ``--steps`` runs, with the
   GFLOP/s of convolutions, the kernels and batched matmuls.

The replay is used instead of ``torch.profiler`` because under the profiler
this step takes ~1,500 page faults (none without it) and its large memory ops
run 5-30x slower. The sum of the replayed ops is printed beside the step time
as a check. ``--arch`` takes a built-in name or ``package.module:factory``.

    python benchmarks/profile_step.py                      # 13 slots x 32, as scenario 2's groups
    python benchmarks/profile_step.py --slots 8 --batch 128 --arch cifar_cnn --input 3 32 32 --classes 10
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_map

from wirelessfl.learning import optim
from wirelessfl.learning.first_block import HalideFirstBlock
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig, _weighted_cross_entropy
from wirelessfl.learning.models import get_architecture

CONFIG = TrainConfig(epochs=1, batch_size=32, lr=0.1, momentum=0.9)
PARTS = ("gather", "forward", "loss", "backward", "optimizer")


class OpRecorder(TorchDispatchMode):
    """Every ATen op run under it, with copies of its arguments taken before the op (it may write them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object, tuple, dict]] = []
        self.part = ""  # the step part the next ops belong to, set by the caller

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((self.part, func, tree_map(_copy, args), tree_map(_copy, kwargs)))
        return func(*args, **kwargs)


class KernelRecorder:
    """Stands in for a first-block ``CompiledPipeline`` and records its calls (ctypes calls are no ATen ops)."""

    def __init__(self, pipeline, name: str, recorder: OpRecorder, macs: int):
        self.pipeline, self.name, self.recorder, self.macs_per_sample = pipeline, name, recorder, macs

    def __call__(self, *tensors):
        with _disable_current_modes():  # the argument copies are not ops of the step
            copies = tuple(_copy(t) for t in tensors)
        self.recorder.calls.append((self.recorder.part, self, copies, {}))
        return self.pipeline(*tensors)

    def replay(self, *tensors):
        self.pipeline(*tensors)


def _copy(value):
    """The same view (shape, strides, offset) of a copy of the tensor's storage: expanded inputs stay expanded."""
    if not isinstance(value, torch.Tensor):
        return value
    storage = value.untyped_storage().clone()
    return torch.empty(0, dtype=value.dtype).set_(storage, value.storage_offset(), value.shape, value.stride())


def macs(func, args, out) -> int:
    """Multiply-adds of a convolution (forward or its requested gradients) or a batched matmul; 0 for other ops."""
    name = func.__name__.split(".")[0]
    if name in ("conv2d", "convolution", "_convolution", "mkldnn_convolution"):
        return out.numel() * args[1][0].numel()  # each output element: one filter's multiply-adds
    if name == "convolution_backward":
        grad_out, weight, mask = args[0], args[2], args[10]
        return grad_out.numel() * weight[0].numel() * (int(mask[0]) + int(mask[1]))
    if name in ("bmm", "baddbmm"):
        a, b = args[-2], args[-1]
        return a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return 0


def kernel_macs(call: KernelRecorder, args) -> int:
    """A kernel's multiply-adds per sample and slot, over batch x slots."""
    batch, n = args[0].shape[:2]
    return call.macs_per_sample * batch * n


def describe(func, args) -> str:
    """The op's name and its tensor arguments' shapes (the conv backward's output mask too)."""
    tensors = [t for a in args for t in (a if isinstance(a, (list, tuple)) else [a])]  # fused ops take tensor lists
    shapes = [list(t.shape) for t in tensors if isinstance(t, torch.Tensor)]
    name = func.__name__.split(".")[0]
    extra = f" mask {list(args[10])}" if name == "convolution_backward" else ""
    return f"{name} {shapes}{extra}"


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=13)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--arch", default="lenet5")
    parser.add_argument("--input", type=int, nargs=3, default=[1, 28, 28], metavar=("C", "H", "W"))
    parser.add_argument("--classes", type=int, default=62)
    parser.add_argument("--eval", action="store_true", help="an evaluation pass (gather, forward without tape, loss) instead")
    parser.add_argument("--halide", action="store_true", help="the first block as the Halide accelerator plug-in's kernels")
    args = parser.parse_args()
    torch.set_num_threads(1)
    arch = get_architecture(args.arch, tuple(args.input), args.classes)
    engine = LockstepEngine(arch, accelerators=[HalideFirstBlock()] if args.halide else ())  # also applies the heap setting
    model = engine.model
    g = torch.Generator().manual_seed(0)
    per_slot = 10 * args.batch
    x_cat = torch.rand((args.slots * per_slot, *arch.input_shape), generator=g)
    y_cat = torch.randint(0, arch.num_classes, (args.slots * per_slot,), generator=g)
    table = torch.stack(
        [torch.stack([torch.randperm(per_slot, generator=g)[: args.batch] + s * per_slot for s in range(args.slots)]) for _ in range(10)]
    )
    work = arch.init_flat(args.slots, g)
    grad = torch.zeros_like(work)
    transform = optim.build(CONFIG)
    state = transform.init(work)
    needed = [True] * len(arch.param_slices)
    names = list(model.slices)

    parts = PARTS[:3] if args.eval else PARTS
    draws = [(torch.Generator().manual_seed(s), args.batch) for s in range(args.slots)] if model.stochastic else None
    mode = torch.inference_mode if args.eval else contextlib.nullcontext

    def step(t: int, marks: list[float] | None = None, recorder: OpRecorder | None = None) -> None:
        def part(name: str) -> None:
            if recorder is not None:
                recorder.part = name
            if marks is not None:
                marks.append(time.perf_counter())

        if args.eval:
            with torch.inference_mode():
                part("gather")
                x, y, w = engine._gather(x_cat, y_cat, table[t % len(table)], torch.ones(args.slots))
                part("forward")
                logits = model.forward(model.views(work), x, training=False)
                part("loss")
                _weighted_cross_entropy(logits, y, w, want_grad=False)
                part("end")
            return
        part("gather")
        x, y, w = engine._gather(x_cat, y_cat, table[t % len(table)], None)
        part("forward")
        leaves = model.views(work, requires_grad=needed)
        logits = model.forward(leaves, x, training=True, generators=draws)
        part("loss")
        _, grad_logits = _weighted_cross_entropy(logits.detach(), y, w, want_grad=True)
        part("backward")
        grads = torch.autograd.grad(logits, list(leaves.values()), grad_logits)
        for name, g_param in zip(names, grads):
            sl = model.slices[name]
            grad[:, sl.offset : sl.stop].copy_(g_param.reshape(args.slots, -1))
        part("optimizer")
        optim.step(work, grad, state, transform)
        part("end")

    for t in range(3):
        step(t)
    times: dict[str, list[float]] = {p: [] for p in parts}
    for t in range(args.steps):
        marks: list[float] = []
        step(t, marks)
        for p, a, b in zip(parts, marks, marks[1:]):
            times[p].append(1e3 * (b - a))
    medians = {p: statistics.median(v) for p, v in times.items()}
    total = sum(medians.values())
    samples = args.slots * args.batch
    kind = "evaluation pass" if args.eval else "training step"
    print(f"torch {torch.__version__}, {arch.name} {args.input}, {kind}, 1 thread, {args.slots} slots x {args.batch} samples, median of {args.steps}")
    for p in parts:
        print(f"  {p:<10} {medians[p]:7.2f} ms {100 * medians[p] / total:5.1f}%")
    print(f"  {'step':<10} {total:7.2f} ms  = {samples / total * 1e3:,.0f} samples/s on one thread")

    print(f"  accelerated: {', '.join(model.accelerated) or 'nothing'}")

    blocks = _halide_blocks(model)
    with OpRecorder() as recorder:
        saved = [(block, block._forward, block._backward) for block in blocks]
        for block in blocks:
            shape = block.shape
            per_sample = shape.outputs * shape.channels * shape.kernel**2 * shape.conv_height * shape.conv_width
            block._forward = KernelRecorder(block._forward, "halide first-block forward (conv+bias+pool+ReLU)", recorder, per_sample)
            block._backward = KernelRecorder(block._backward, "halide first-block weight+bias gradient", recorder, per_sample)
        try:
            step(0, recorder=recorder)
        finally:
            for block, forward, backward in saved:
                block._forward, block._backward = forward, backward
    rows = []
    for part, func, op_args, op_kwargs in recorder.calls:
        if isinstance(func, KernelRecorder):
            ms = median_ms(lambda: func.replay(*op_args), args.steps)
            rows.append((part, ms, kernel_macs(func, op_args), f"{func.name} {[list(a.shape) for a in op_args]}"))
            continue
        with mode():
            out = func(*op_args, **op_kwargs)
            ms = median_ms(lambda: func(*op_args, **op_kwargs), args.steps)
        rows.append((part, ms, macs(func, op_args, out), describe(func, op_args)))
    replayed = sum(r[1] for r in rows)
    print(f"\nATen ops and kernels of one {kind}, each replayed alone (median of {args.steps}); sum {replayed:.2f} ms against {total:.2f} ms run together")
    print(f"  {'part':<10} {'ms':>6} {'GFLOP/s':>8}  op [tensor shapes]")
    for part, ms, mac, text in rows:
        if ms >= 0.02:
            rate = f"{2 * mac / ms / 1e6:8.0f}" if mac else " " * 8
            print(f"  {part:<10} {ms:6.2f} {rate}  {text}")
    print(f"  ({sum(1 for r in rows if r[1] < 0.02)} ops under 0.02 ms not listed, {sum(r[1] for r in rows if r[1] < 0.02):.2f} ms in all)")


def _halide_blocks(model) -> list:
    """The FirstBlock objects inside the plug-in's claims (their closures hold them)."""
    from wirelessfl.learning.first_block import FirstBlock

    found = []
    for claim in {id(c): c for claims in model.claims.values() for c in claims.values()}.values():
        for cell in claim.run.__closure__ or ():
            if isinstance(cell.cell_contents, FirstBlock) and cell.cell_contents not in found:
                found.append(cell.cell_contents)
    return found


if __name__ == "__main__":
    main()
