"""Page faults and speed of simulation rounds with glibc's default malloc settings and with the engine's.

A round is what ``wirelessfl simulate`` does per round for one curve of
scenario 2: local training of 100 LeNet-5 clients on 600 EMNIST-shaped samples
each (one epoch, batch 32, SGD lr 0.03 momentum 0.9), then evaluation on a
200-sample test and a 200-sample validation split. ``retain_freed_memory``
(wirelessfl/learning/heap.py) is a process-wide setting, so the two modes run in
child processes, alternating, and the table compares their best rounds.

    python benchmarks/bench_heap.py                 # 2 pairs of runs, 4 rounds each
    python benchmarks/bench_heap.py --pairs 3 --rounds 6
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch


def child(mode: str, rounds: int, clients: int) -> dict:
    import wirelessfl.learning.heap as heap

    if mode == "default":
        heap._applied = False  # the engine then leaves glibc's settings as they are
    from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
    from wirelessfl.learning.models import get_architecture

    arch = get_architecture("lenet5", (1, 28, 28), 62)
    g = torch.Generator().manual_seed(0)

    def split(size: int):
        return [(torch.rand(size, 1, 28, 28, generator=g), torch.randint(0, 62, (size,), generator=g)) for _ in range(clients)]

    train, test, val = split(600), split(200), split(200)
    params = arch.init_flat(clients, g)
    engine = LockstepEngine(arch)
    cfg = TrainConfig(lr=0.03, momentum=0.9)
    train_s, eval_s, faults = [], [], []
    for r in range(rounds):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        params = engine.train(params, train, cfg, torch.Generator().manual_seed(r)).params
        middle = time.perf_counter()
        engine.evaluate(params, test)
        engine.evaluate(params, val)
        train_s.append(middle - start)
        eval_s.append(time.perf_counter() - middle)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return {
        "mode": mode,
        "train_samples_per_s": 600 * clients / min(train_s),
        "eval_samples_per_s": 400 * clients / min(eval_s),
        "faults_per_round": faults,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2, help="runs of each mode, alternating")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--child", choices=["default", "retain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rounds, args.clients)))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clients} clients, {args.rounds} rounds a run")
    results: dict[str, list[dict]] = {"default": [], "retain": []}
    for _ in range(args.pairs):
        for mode in results:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--rounds", str(args.rounds), "--clients", str(args.clients)],
                capture_output=True, text=True, check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results[mode].append(result)
            print(
                f"{mode:8s} training {result['train_samples_per_s']:8.0f} samples/s  evaluation {result['eval_samples_per_s']:8.0f} samples/s"
                f"  minor faults per round {result['faults_per_round']}"
            )
    best = {mode: {key: max(r[key] for r in runs) for key in ("train_samples_per_s", "eval_samples_per_s")} for mode, runs in results.items()}
    print(
        f"retain / default (best runs): training {best['retain']['train_samples_per_s'] / best['default']['train_samples_per_s']:.3f}x, "
        f"evaluation {best['retain']['eval_samples_per_s'] / best['default']['eval_samples_per_s']:.3f}x"
    )


if __name__ == "__main__":
    main()
