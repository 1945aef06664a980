"""Cost in proportion to participants: FedAvg with k = 100 LeNet-5 participants a round at N = 1,000 and 10,000.

Every client holds 11 samples (EMNIST byclass's offline test split of 116,323 when its files are there, else
a pool of 110,000 generated images of the same shape and classes), so the k participants' training
is the same work at every N and only the population grows. A population larger than the pool holds
(11 x N > pool) is dealt in passes over it (``data.samples.reuse``) and its clients index the pool, so the
data held is the pool's at every N; ``--disjoint`` gives every client 11 generated samples of its own
instead (the data then grows with N, 862 MB of uint8 at N = 100,000). Evaluation is
sampled (``evaluation: {clients: 100}``), with the last round evaluating all N
clients (``--evaluation-all``: every client every round). Each N runs in its own child process (imports, the data, the run), which
reports a trained round's wall and CPU time (rounds 2 to 4: plan, network,
training, aggregation and the 100-client evaluation; round 1 warms up), the last
round apart (it also evaluates every client, which grows with N by its nature),
the whole run's phases, its CPU time, its peak RSS beside the imports' RSS and
the memory estimate, and the cost preview's estimate of the run's time
(``wirelessfl.cost.check_run``) beside the measured one. The parent prints them
as ratios to N = 1,000.

Measured 2026-11-29 on the 2-core EPYC at a load average of 6-7 (docs/results.md):
a trained round 1.04 s CPU (2.09 s wall) at N = 1,000 and 1.08 s CPU (2.20 s wall)
at N = 10,000 (x1.04 CPU, x1.05 wall); the last round 1.76 and 10.58 s CPU; peak RSS
1,494 and 1,861 MB (x1.25; the imports 829 MB). With ``OMP_WAIT_POLICY=PASSIVE`` in the
environment (OpenMP threads that sleep instead of spinning after each parallel region):
a trained round 0.25 and 0.21 s CPU (0.44 and 0.38 s wall), peak RSS x1.27.

The cost preview beside the run (preview / run, with what its probes took): before it timed real
rounds it said 0.20x at N = 1,000 and 0.40x at N = 10,000; with the timed rounds of the first unit
and the timed chunk evaluation (``cost.probe_rounds``), three runs on the same shared machine
(2026-11-29) said 0.89x, 1.43x, 1.00x at N = 1,000 and 0.62x, 1.02x, 1.10x at N = 10,000
(``OMP_WAIT_POLICY=PASSIVE``: 1.20x and 0.93x), the probes 4.5-6.2 s CPU. The spread is the run's
own: its trained round's CPU time varied 2-3x between runs.

Per-client state (``--algorithm local``, ``fedper``, ``ditto``, ..., ``--client-store memory|disk``, ``--store-path DIR``
whose files are measured every round; ``--generated --disjoint`` for every client its own generated samples, as these runs had). Measured 2026-11-29
(2-core EPYC, shared, ``OMP_NUM_THREADS=1``, generated data, Local, k = 100, 5 rounds): peak RSS with the
client store in memory 1,402 MB at N = 1,000 and 4,073 MB at N = 10,000 (100,000 not run: 24.7 GB of models);
on disk 1,401 / 1,706 / 6,341 MB at N = 1,000 / 10,000 / 100,000, store files at most 108 / 130 / 134 MB
(the 500 rows written), libraries 678-680 MB, the data 35 MB / 345 MB / 3.45 GB of float32 images. FedAvg
(no per-client state) at N = 100,000, the same way: peak RSS 6,346 MB, so what grows with N there is the data
and its evaluation copies, not the models. Ditto (personal models in a store), the same way at N = 1,000 / 10,000:
peak RSS 1,576 / 4,208 MB in memory, 1,435 / 1,799 MB on disk (store files at most 108 / 130 MB, libraries 741 MB).
With ``--evaluation-all`` at N = 10,000: FedPer (heads in memory) 4,158 MB before the evaluation made its models group
by group, 2,001 MB after; Ditto 6,546 MB before, 4,300 MB after in memory, 1,909 MB on disk (docs/engine.md).

With the samples stored as uint8, clients made when asked for and the final pass uncached (2026-11-29,
``--sizes 1000 10000 100000 --generated --disjoint --limit-gb 12``, load about 3): a trained round 0.35 / 0.37 /
0.45 s CPU at N = 1,000 / 10,000 / 100,000, peak RSS 1,307 / 1,454 / 2,785 MB (x1.11, x2.13: the 1.1
million samples and their build grow with N; docs/results.md), the preview 1.00x / 1.04x / 1.06x of the run.

Clients that index a reused pool (2026-11-29, ``--sizes 1000 10000 100000 --limit-gb 12``, EMNIST, background
jobs stopped): a trained round 0.14 / 0.18 / 0.18 s wall (x1.28, x1.23; CPU x1.18, x1.19), peak RSS 1,465 /
1,529 / 1,768 MB (x1.04, x1.21), the preview 1.30x / 1.38x / 1.12x of the run (a second run, the passes spread
evenly: rounds x0.92 / x1.16 wall, peak RSS x1.04 / x1.19, preview 1.12x / 1.28x / 1.39x); the last round's evaluation of
every client 0.9 / 9.2 / 91.8 s CPU (it grows with N by its nature). Before it (``--disjoint`` at 100,000) the
data alone held 862 MB and its build twice that: peak RSS x2.08.

The parent prints what the memory estimate says a run needs instead of running it when that is over
``--limit-gb``.

    PYTHONPATH=. python benchmarks/bench_population.py                    # N = 1,000 and 10,000
    PYTHONPATH=. python benchmarks/bench_population.py --sizes 1000 10000 100000
    PYTHONPATH=. python benchmarks/bench_population.py --child 10000      # one measurement, JSON out
    PYTHONPATH=. python benchmarks/bench_population.py --sizes 1000 10000 100000 --limit-gb 9 --generated --disjoint \
        --algorithm local --client-store disk --store-path /tmp/store                # per-client state on disk
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PARTICIPANTS = 100
SAMPLES_PER_CLIENT = 11
ROUNDS = 5
EMNIST_TEST = 116_323
GENERATED_POOL = 110_000
"""Generated samples at every N (11 for each of 10,000 clients): larger populations reuse them (``data.samples.reuse``)."""


def pool_size(clients: int, emnist: bool, disjoint: bool) -> int:
    """Samples in the pool the clients are dealt from: EMNIST's test split, the generated pool, or (``--disjoint``)
    11 generated samples for every client."""
    if disjoint:
        return clients * SAMPLES_PER_CLIENT
    return EMNIST_TEST if emnist else GENERATED_POOL


def reuse(clients: int, pool: int) -> int:
    """The passes over a pool of ``pool`` samples that deal 11 samples to each of ``clients``."""
    return -(-clients // (pool // SAMPLES_PER_CLIENT))


def generated(samples: int = GENERATED_POOL, seed: int = 0):
    """A loader (``bench_population:generated``): uint8 28x28 images and 62 classes, EMNIST's shapes."""
    rng = np.random.default_rng(seed)
    n = samples
    return rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8), rng.integers(0, 62, size=n)


def scenario(
    clients: int, emnist: bool, algorithm: str = "fedavg", store: str | None = None, store_path: str | None = None, every_client: bool = False,
    disjoint: bool = False,
) -> dict:
    pool = pool_size(clients, emnist, disjoint)
    data = (
        {"dataset": "emnist", "options": {"split": "byclass", "pool": ["test"]}}
        if emnist else {"dataset": "bench_population:generated", "options": {"samples": pool}}
    )
    samples = {"per_client": SAMPLES_PER_CLIENT, **({"reuse": reuse(clients, pool)} if reuse(clients, pool) > 1 else {})}
    return {
        "name": f"population-{clients}",
        "rounds": ROUNDS,
        "device": "cpu",
        "checkpoint_every": 1000,
        "evaluation": {"clients": "all" if every_client else PARTICIPANTS},
        "data": {**data, "clients": clients, "samples": samples,
                 "partition": [{"name": "dirichlet", "alpha": 0.4}]},
        "model": {"name": "lenet5"},
        "training": {"batch_size": 32, "lr": 0.05, "participation": PARTICIPANTS / clients},
        "algorithms": [{"name": algorithm}],
        **({"client_store": {"where": store, **({"path": store_path} if store_path else {})}} if store else {}),
    }


def emnist_fits(clients: int, disjoint: bool = False) -> bool:
    """EMNIST byclass's offline test split is here (and, ``disjoint``, holds 11 samples of its own for every client)."""
    from wirelessfl.learning.data.data_files import missing_dataset

    enough = not disjoint or clients * SAMPLES_PER_CLIENT <= EMNIST_TEST
    return enough and missing_dataset("emnist", None, False, {"split": "byclass", "pool": ["test"]}) is None


def disk_bytes(folder: str | None) -> int:
    """Bytes allocated on disk under ``folder`` (sparse files count what they hold)."""
    if not folder or not Path(folder).is_dir():
        return 0
    return sum(p.stat().st_blocks * 512 for p in Path(folder).rglob("*") if p.is_file())


def child(
    clients: int, algorithm: str = "fedavg", store: str | None = None, store_path: str | None = None, generated_only: bool = False,
    every_client: bool = False, disjoint: bool = False,
) -> dict:
    """One run in this process (see the module docstring)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from wirelessfl.config import parse_scenario
    from wirelessfl.cost import check_run
    from wirelessfl.learning.data.federated import build_federated_data
    from wirelessfl.simulate import simulate

    emnist = emnist_fits(clients, disjoint) and not generated_only
    parsed = parse_scenario(scenario(clients, emnist, algorithm, store, store_path, every_client, disjoint))
    libraries_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the imports, before any data
    cpu = time.process_time()
    began = time.perf_counter()
    data = build_federated_data(parsed.data_spec(), parsed.seeds[0])
    build_s = time.perf_counter() - began
    preview_cpu = time.process_time()
    preview = check_run(parsed, data=data)
    preview_cpu = time.process_time() - preview_cpu
    del data
    marks: dict[int, tuple[float, float]] = {}
    disk = [0]

    def on_round(progress: dict) -> None:
        marks.setdefault(progress["round"], (time.perf_counter(), time.process_time()))
        disk[0] = max(disk[0], disk_bytes(store_path))

    result = simulate(parsed, on_round=on_round, client_store=preview.client_store)
    runtime = next(iter(result.runtime.values()))
    phases = runtime["phases"]
    timed = range(2, ROUNDS)  # round 1 warms up; the last round also evaluates every client
    return {
        "clients": clients,
        "data": ("emnist" if emnist else "generated") + ("" if disjoint else f", pool {pool_size(clients, emnist, disjoint):,}"),
        "build_s": build_s,
        "round_s": sum(marks[r][0] - marks[r - 1][0] for r in timed) / len(timed),
        "round_cpu_s": sum(marks[r][1] - marks[r - 1][1] for r in timed) / len(timed),
        "last_round_s": marks[ROUNDS][0] - marks[ROUNDS - 1][0],
        "last_round_cpu_s": marks[ROUNDS][1] - marks[ROUNDS - 1][1],
        "run_s": sum(phases.values()),
        "preview_s": preview.seconds,
        "preview_probe_s": preview.probe_s,
        "preview_cpu_s": preview_cpu,
        "estimate_gb": preview.memory.total / 1e9,
        "algorithm": algorithm,
        "client_store": preview.client_store,
        "estimate_disk_gb": preview.memory.disk / 1e9,
        "store_disk_mb": disk[0] / 1e6,
        "libraries_mb": libraries_mb,
        "phases": phases,
        "cpu_s": time.process_time() - cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def needs(clients: int, algorithm: str = "fedavg", on_disk: bool = False, every_client: bool = False, disjoint: bool = False) -> float:
    """GB the memory estimate gives a run at ``clients`` (data of the scenario's sizes, nothing allocated)."""
    from wirelessfl.config import parse_scenario
    from wirelessfl.cost import _workers
    from wirelessfl.learning.data.federated import split_counts
    from wirelessfl.learning.memory import SplitSizes, estimate_memory
    from wirelessfl.learning.models import get_architecture
    from wirelessfl.run.sampled_evaluation import CHUNK_CLIENTS

    parsed = parse_scenario(scenario(1000, True))
    dealt, pool = clients * SAMPLES_PER_CLIENT, pool_size(clients, False, disjoint)
    train, val, test = split_counts(SAMPLES_PER_CLIENT, tuple(parsed.data.split))
    sizes = SplitSizes(train=(train,) * clients, val=(val,) * clients, test=(test,) * clients)
    t = parsed.training
    arch = get_architecture("lenet5", (1, 28, 28), 62)
    import torch

    estimate = estimate_memory(arch, sizes, t.train_config(), [(algorithm, {})], participation=PARTICIPANTS / clients,
                               rounds=ROUNDS, workers=_workers(torch.device("cpu")), eval_clients=None if every_client else CHUNK_CLIENTS,
                               client_store_on_disk=on_disk, input_bytes=1, held_samples=min(dealt, pool))
    built = (pool + (dealt if dealt <= pool else 0)) * 28 * 28  # while the data is built: the uint8 pool and a dealt copy
    return (estimate.total + built) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--limit-gb", type=float, default=3.0)
    parser.add_argument("--child", type=int)
    parser.add_argument("--algorithm", default="fedavg", help="fedavg (default), or a method with per-client state (local, fedper, fedrep, ditto, pfedme, apfl, pflego)")
    parser.add_argument("--client-store", choices=["memory", "disk"], help="the scenario's client_store.where (default: none, automatic)")
    parser.add_argument("--store-path", help="client_store.path for disk (its files are measured every round)")
    parser.add_argument("--generated", action="store_true", help="generated data at every N (not EMNIST)")
    parser.add_argument("--evaluation-all", action="store_true", help="evaluation: {clients: all} (every client every round)")
    parser.add_argument("--disjoint", action="store_true", help="every client its own 11 samples (the data grows with N; no reuse)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.algorithm, args.client_store, args.store_path, args.generated, args.evaluation_all, args.disjoint)))
        return
    options = ["--algorithm", args.algorithm] + (["--client-store", args.client_store] if args.client_store else [])
    options += (["--store-path", args.store_path] if args.store_path else []) + (["--generated"] if args.generated else [])
    options += (["--evaluation-all"] if args.evaluation_all else []) + (["--disjoint"] if args.disjoint else [])
    runs = []
    for clients in args.sizes:
        need = needs(clients, args.algorithm, args.client_store == "disk", args.evaluation_all, args.disjoint)
        if need > args.limit_gb:
            print(f"N = {clients:,}: not run; the memory estimate says about {need:.1f} GB (limit {args.limit_gb} GB)")
            continue
        out = subprocess.run([sys.executable, __file__, "--child", str(clients), *options], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = runs[-1]
        print(f"N = {clients:,} ({r['data']}): round {r['round_s']:.2f} s ({r['round_cpu_s']:.2f} s CPU), last round with the full "
              f"evaluation {r['last_round_s']:.2f} s ({r['last_round_cpu_s']:.2f} s CPU), run {r['run_s']:.1f} s (preview {r['preview_s']:.1f} s, "
              f"{r['preview_s'] / r['run_s']:.2f}x; its probes {r['preview_probe_s']:.1f} s, {r['preview_cpu_s']:.1f} s CPU), data {r['build_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB "
              f"(libraries {r['libraries_mb']:.0f} MB; estimate {1000 * r['estimate_gb']:.0f} MB beyond them), "
              f"{r['algorithm']} with its client store in {r['client_store']} (store files at most {r['store_disk_mb']:.1f} MB on disk; "
              f"estimate {1000 * r['estimate_disk_gb']:.0f} MB), "
              f"phases {', '.join(f'{k} {v:.1f}' for k, v in r['phases'].items())}", flush=True)
    base = runs[0]
    for r in runs[1:]:
        print(f"N = {r['clients']:,} / N = {base['clients']:,}: round time x{r['round_s'] / base['round_s']:.2f} "
              f"(CPU x{r['round_cpu_s'] / base['round_cpu_s']:.2f}), last round x{r['last_round_cpu_s'] / base['last_round_cpu_s']:.2f} CPU, "
              f"run x{r['run_s'] / base['run_s']:.2f}, CPU x{r['cpu_s'] / base['cpu_s']:.2f}, peak RSS x{r['peak_rss_mb'] / base['peak_rss_mb']:.2f} "
              f"(clients x{r['clients'] / base['clients']:.0f})")

if __name__ == "__main__":
    main()
