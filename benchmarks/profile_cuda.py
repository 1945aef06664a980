"""Where the lockstep engine's time goes on a CUDA device: is the GPU busy, or waiting for the host?

Trains ``--clients`` EMNIST-shaped random clients (1x28x28, 62 classes, 320
samples each, one epoch, batch 32, SGD momentum) once to warm up, then once
under ``torch.profiler`` and once without it. It prints the unprofiled wall
time, the GPU busy fraction (the summed time of the kernels in the profiled
epoch over that epoch's wall time: far below 1 means the host's kernel launches
and Python set the pace, not the GPU), the kernel count per training step, and
the kernels that take the most GPU time. ``--model`` takes a built-in name or
``package.module:factory``.

    python benchmarks/profile_cuda.py
    python benchmarks/profile_cuda.py --clients 1000 --model examples.user_models:two_conv_dropout
    python benchmarks/profile_cuda.py --max-samples 512      # the CPU's group size, as before GPUs had their own
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/ without PYTHONPATH
from bench_lockstep import CONFIG, make_clients, model  # noqa: E402  (benchmarks/ is the script's directory)

from wirelessfl.learning.lockstep import LockstepEngine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--samples", type=int, default=320)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--max-samples", type=int, default=None, help="samples of one stacked pass (default: the device's)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("torch sees no CUDA device")
    arch = model(args.model)
    params, data = make_clients(arch, args.clients, args.samples)
    engine = LockstepEngine(arch, "cuda", max_samples=args.max_samples)

    def epoch() -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = engine.train(params, data, CONFIG, torch.Generator().manual_seed(1))
        torch.cuda.synchronize()
        epoch.steps = int(result.steps.max())
        return time.perf_counter() - start

    epoch()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        profiled = epoch()
    wall = epoch()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernel_s = sum(e.self_device_time_total for e in events) / 1e6
    launches = sum(e.count for e in events)
    print(f"{args.model}, {args.clients} clients x {args.samples} samples, {epoch.steps} steps, "
          f"at most {engine.max_samples} samples a stacked pass: epoch {wall:.3f} s "
          f"({args.clients * args.samples / wall:.0f} samples/s) unprofiled, {profiled:.3f} s profiled; "
          f"GPU busy {kernel_s:.3f} s = {100 * kernel_s / profiled:.0f}% of the profiled epoch; "
          f"{launches / epoch.steps:.0f} kernels per step, {1e6 * kernel_s / launches:.1f} us per kernel on average")
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=args.top, max_name_column_width=60))


if __name__ == "__main__":
    main()
