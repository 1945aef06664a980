"""Lockstep engine vs the plain per-client loop, measured in the same process.

LeNet-5 and a user model the engine has no special case for
(``examples/user_models.py:two_conv_dropout``: two convolutions, functional
dropout, a reshape by ``x.size(0)``) on EMNIST-shaped random data (1x28x28, 62
classes), one local epoch, batch 32, SGD lr 0.1 momentum 0.9. For each model and
client count it prints samples/s of the per-client loop (``ReferenceLoop``: one
module and one ``torch.optim`` optimizer per client, at its best thread count:
on a loaded 2-core machine two intra-op threads can make its tiny ops 10x
slower) and of the engine (default threads), best of --repeats with the two
interleaved so that load from other processes hits both alike, their ratio, and
the fraction of this machine's float32 matmul peak (measured here) that the
engine reaches (``benchmarks/bench_compile.py`` times ``torch.compile`` on the
stacked step). With --memory-clients it reports, per model, the peak
resident memory of a fresh process training that many clients and the training
memory per client.

    python benchmarks/bench_lockstep.py                       # 20 and 100 clients + 1,000-client memory
    python benchmarks/bench_lockstep.py --clients 20 --repeats 1 --memory-clients 0
    python benchmarks/bench_lockstep.py --models mlp --clients 20 --samples 700 --batch 6000 --epochs 5 --memory-clients 0
                                                              # full-batch steps, as PFLEGO's protocol takes them
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace

import torch

from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import Architecture, get_architecture
from wirelessfl.learning.reference import ReferenceLoop
from wirelessfl.learning.workers import group_samples

CONFIG = TrainConfig(epochs=1, batch_size=32, lr=0.1, momentum=0.9)
"""The default workload; ``--batch`` and ``--epochs`` replace its batch size and epochs."""
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/ without PYTHONPATH
MODELS = {"lenet5": "LeNet-5", "examples.user_models:two_conv_dropout": "user model (two convs + dropout)"}


def model(name: str) -> Architecture:
    return get_architecture(name, (1, 28, 28), 62)


def make_clients(arch: Architecture, clients: int, samples: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    data = [
        (torch.rand((samples, *arch.input_shape), generator=g), torch.randint(0, arch.num_classes, (samples,), generator=g))
        for _ in range(clients)
    ]
    return arch.init_flat(clients, g), data


def training_flops_per_sample(arch: Architecture) -> float:
    """Multiply-adds x 2 of forward, weight gradient and input gradient (none below the first layer) of convs and linears."""
    macs: list[int] = []

    def count(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            macs.append(output[0].numel() * module.weight[0].numel())
        elif isinstance(module, torch.nn.Linear):
            macs.append(module.weight.numel())

    module = arch.build_module().eval()
    hooks = [m.register_forward_hook(count) for m in module.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        module(torch.zeros(1, *arch.input_shape))
    for hook in hooks:
        hook.remove()
    return 2.0 * (3 * sum(macs) - macs[0])


def matmul_peak_flops(device: torch.device, size: int = 2048, repeats: int = 5) -> float:
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def fastest_reference(reference, params, data, repeats: int, config: TrainConfig = CONFIG) -> tuple[float, int]:
    """Fastest time of the per-client loop over thread counts 1..torch's default, and that count."""
    default = torch.get_num_threads()
    best = (float("inf"), default)
    try:
        for threads in sorted({1, default}):
            torch.set_num_threads(threads)
            for _ in range(repeats):
                elapsed = timed(lambda: reference.train(params, data, config, torch.Generator().manual_seed(1)))
                best = min(best, (elapsed, threads))
    finally:
        torch.set_num_threads(default)
    return best


def compare(
    name: str, clients: int, samples: int, repeats: int, device: torch.device, peak: float, config: TrainConfig = CONFIG,
    max_samples: int | None = None,
) -> None:
    arch = model(name)
    params, data = make_clients(arch, clients, samples)
    engine, reference = LockstepEngine(arch, device, max_samples=max_samples), ReferenceLoop(arch, device)
    run_engine = lambda: engine.train(params, data, config, torch.Generator().manual_seed(1))  # noqa: E731
    warm = max(2, clients // 10)
    engine.train(params[:warm], data[:warm], config, torch.Generator().manual_seed(1))
    reference.train(params[:warm], data[:warm], config, torch.Generator().manual_seed(1))
    run_engine()
    best_engine = best_reference = float("inf")
    threads = torch.get_num_threads()
    for _ in range(repeats):
        elapsed, count = fastest_reference(reference, params, data, 1, config)
        if elapsed < best_reference:
            best_reference, threads = elapsed, count
        best_engine = min(best_engine, timed(run_engine))
    total = clients * samples * config.epochs
    engine_rate, reference_rate = total / best_engine, total / best_reference
    flops = training_flops_per_sample(arch) * engine_rate
    line = (
        f"{MODELS.get(name, name):34s} clients={clients:4d}  per-client loop {reference_rate:7.0f} samples/s ({threads} thr)  "
        f"lockstep {engine_rate:7.0f} samples/s  ratio {engine_rate / reference_rate:5.2f}x  "
        f"{flops / 1e9:5.1f} GFLOP/s = {100 * flops / peak:4.1f}% of matmul peak"
    )
    print(line, flush=True)


def peak_rss_mib() -> float:
    """Peak resident memory of this process (VmHWM; ru_maxrss would include the parent's before exec)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_run(name: str, clients: int, samples: int, device: torch.device) -> None:
    """Body of the child process: train once, print peak RSS before and after (MiB) and the training memory per client."""
    arch = model(name)
    baseline = peak_rss_mib()
    params, data = make_clients(arch, clients, samples)
    before = peak_rss_mib()
    start = time.perf_counter()
    LockstepEngine(arch, device).train(params, data, CONFIG, torch.Generator().manual_seed(1))
    elapsed = time.perf_counter() - start
    after = peak_rss_mib()
    gpu = f", GPU peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if device.type == "cuda" else ""
    data_mib = clients * samples * (28 * 28 + 2) * 4 / 2**20
    print(
        f"{MODELS.get(name, name)}: clients={clients} x {samples} samples: peak RSS {after:.0f} MiB = python+torch {baseline:.0f} MiB "
        f"+ data {data_mib:.0f} MiB and {clients} initial models {params.numel() * 4 / 2**20:.0f} MiB "
        f"(before training {before:.0f} MiB) + training {after - before:.0f} MiB = {1024 * (after - before) / clients:.0f} kiB per client "
        f"(a model is {arch.param_count * 4 / 1024:.0f} kiB){gpu}; one epoch took {elapsed:.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="built-in names or package.module:factory (1x28x28 inputs, 62 classes)")
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--samples", type=int, default=320, help="training samples per client (320 = 10 batches)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch", type=int, default=CONFIG.batch_size, help="batch size (larger than --samples: full-batch steps)")
    parser.add_argument("--epochs", type=int, default=CONFIG.epochs)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-samples", type=int, default=None, help="samples of one stacked pass (default: the device's, 512 on a CPU)")
    parser.add_argument("--memory-clients", type=int, default=1000, help="0 = skip the memory run")
    parser.add_argument("--memory-samples", type=int, default=64)
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.memory_child:
        memory_run(args.memory_child, args.memory_clients, args.memory_samples, device)
        return
    peak = matmul_peak_flops(device)
    config = replace(CONFIG, batch_size=args.batch, epochs=args.epochs)
    print(
        f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}, "
        f"float32 matmul peak {peak / 1e9:.1f} GFLOP/s; 1x28x28/62 classes, {args.samples} samples/client, "
        f"{config.epochs} epoch(s), batch {config.batch_size}, SGD lr 0.1 momentum 0.9, "
        f"at most {args.max_samples or group_samples(device)} samples a stacked pass",
        flush=True,
    )
    for name in args.models:
        for clients in args.clients:
            compare(name, clients, args.samples, args.repeats, device, peak, config, args.max_samples)
    if args.memory_clients:
        for name in args.models:
            command = [sys.executable, __file__, "--memory-child", name, "--memory-clients", str(args.memory_clients),
                       "--memory-samples", str(args.memory_samples), "--device", args.device]
            if args.threads:
                command += ["--threads", str(args.threads)]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
