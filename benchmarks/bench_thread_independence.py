"""What thread-independent results cost: the engine now vs the thread-following partition it replaced.

Before, slots were split into a multiple of ``torch.get_num_threads()`` groups
and a lone group ran with every intra-op thread, so results depended on the
thread count. Now the partition is a multiple of ``GROUP_MULTIPLE`` and every
group runs with one intra-op thread. Both variants run in this process,
interleaved, best of --repeats; the old one is restored by patching two
functions. LeNet-5 on EMNIST-shaped random data, one local epoch, then one
evaluation pass.

    python benchmarks/bench_thread_independence.py
    OMP_NUM_THREADS=1 python benchmarks/bench_thread_independence.py
"""

from __future__ import annotations

import argparse
import time

import torch

import wirelessfl.learning.lockstep as lockstep
import wirelessfl.learning.workers as workers
from bench_lockstep import CONFIG, make_clients, model

NOW = (lockstep.partition, workers._single_threaded)


def _thread_following(device: torch.device) -> int:
    return torch.get_num_threads() if device.type == "cpu" else 1


def _all_threads(task, argument: int) -> bool:
    task(argument)
    return False


def use(variant: str) -> None:
    lockstep.partition, workers._single_threaded = NOW if variant == "now" else (_thread_following, _all_threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    arch = model("lenet5")
    print(f"torch threads {torch.get_num_threads()}, GROUP_MULTIPLE {lockstep.GROUP_MULTIPLE}")
    for clients in args.clients:
        params, data = make_clients(arch, clients, args.samples)
        engine = lockstep.LockstepEngine(arch, torch.device("cpu"))
        engine.train(params[:2], data[:2], CONFIG, torch.Generator().manual_seed(1))
        best = {"before": float("inf"), "now": float("inf")}
        for _ in range(args.repeats):
            for variant in best:
                use(variant)
                start = time.perf_counter()
                trained = engine.train(params, data, CONFIG, torch.Generator().manual_seed(1))
                engine.evaluate(trained.params, data)
                best[variant] = min(best[variant], time.perf_counter() - start)
        use("now")
        print(f"clients={clients:4d}  before {best['before'] * 1e3:8.1f} ms  now {best['now'] * 1e3:8.1f} ms  now/before {best['now'] / best['before']:5.3f}")


if __name__ == "__main__":
    main()
