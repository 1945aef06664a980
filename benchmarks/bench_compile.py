"""torch.compile on the stacked training step against the eager step, in one process.

One group of ``--slots`` models x ``--batch`` random 1x28x28 samples (LeNet-5 by
default, any built-in or ``package.module:factory`` with ``--model``), one
intra-op thread as each of the engine's CPU workers runs (or ``--device cuda``). It times

* eager: the engine's own step (stacked forward, closed-form loss gradient,
  ``torch.autograd.grad`` into the parameters);
* compiled: the stacked forward traced for these shapes with ``make_fx`` (the
  graph interpreter runs once, leaving plain ATen ops) and compiled with
  ``torch.compile`` (inductor), its backward by AOTAutograd; ``--mode
  reduce-overhead`` also replays each step as a CUDA graph, one launch for the
  step's hundreds of kernels, which is what a GPU waiting on the host needs;

prints the compile time, the median step of each, and the largest difference of
the two gradients. Models with dropout are not supported here (their per-slot
generators are Python objects, outside a traced graph).

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --model examples.user_models:small_resnet --slots 8
    python benchmarks/bench_compile.py --device cuda --slots 100 --mode reduce-overhead
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from wirelessfl.learning.lockstep import LockstepEngine, _weighted_cross_entropy
from wirelessfl.learning.models import get_architecture
from profile_step import median_ms  # benchmarks/ is the script's directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--mode", default="default", choices=["default", "reduce-overhead", "max-autotune"], help="torch.compile's mode")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    arch = get_architecture(args.model, (1, 28, 28), 62)
    engine = LockstepEngine(arch, device, max_samples=args.slots * args.batch)
    model = engine.model
    if model.stochastic:
        raise SystemExit(f"{args.model} draws random numbers in training; this benchmark takes models without dropout")
    g = torch.Generator().manual_seed(0)
    k, batch = args.slots, args.batch
    flat = arch.init_flat(k, g).to(device)
    x_cat = torch.rand(k * batch, *arch.input_shape, generator=g).to(device)
    y_cat = torch.randint(0, arch.num_classes, (k * batch,), generator=g).to(device)
    index = torch.arange(k * batch, device=device).view(k, batch)
    x, y, w = engine._gather(x_cat, y_cat, index, None)
    needed = [True] * len(model.slices)

    def eager() -> torch.Tensor:
        grad = torch.empty_like(flat)
        engine._step_gradient(flat, x, y, w, needed, grad, training=True)
        return grad

    def forward(rows: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        return model.forward(model.views(rows), type(x)(images, x.n, x.image), training=True)

    start = time.perf_counter()
    compiled_forward = torch.compile(make_fx(forward)(flat, x.tensor), mode=args.mode)

    def compiled() -> torch.Tensor:
        rows = flat.detach().requires_grad_()
        logits = compiled_forward(rows, x.tensor)
        _, grad_logits = _weighted_cross_entropy(logits.detach(), y, w, want_grad=True)
        (grad,) = torch.autograd.grad(logits, [rows], grad_logits)
        return grad.clone()  # a CUDA graph's output is overwritten by its next replay

    def synced(step):
        def run() -> torch.Tensor:
            out = step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return out

        return run

    compiled()  # a CUDA graph is recorded on the second call
    difference = (compiled() - eager()).abs().max().item()
    compile_s = time.perf_counter() - start
    eager_ms, compiled_ms = median_ms(synced(eager), args.steps), median_ms(synced(compiled), args.steps)
    where = "1 thread" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(
        f"torch {torch.__version__}, {args.model}, {where}, mode {args.mode}, {k} slots x {batch} samples: compile {compile_s:.0f} s; "
        f"step eager {eager_ms:.1f} ms, compiled {compiled_ms:.1f} ms ({eager_ms / compiled_ms:.2f}x); "
        f"max |gradient difference| {difference:.1e}"
    )


if __name__ == "__main__":
    main()
