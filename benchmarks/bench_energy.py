"""What device-energy accounting costs a run, as ratios measured in this process.

Run: python benchmarks/bench_energy.py [--quick]

Part 1 runs the quickstart scenario (one seed, its 6 curves x 3 profiles) and
prints the share of the run spent inside what energy adds (the per-client
activities of each ``RoundTiming``, the energy of every round, the per-client
round table), timed inside the same run; then, as a cross-check, the best wall
time with those parts and with them replaced by no-ops, alternately. Part 2 does the same for writing the run directory (HTML figures:
the energy figures, the timeline and client_rounds.parquet, against the
same run without them). Part 3 times one round's network timing, its activities and its
energy accounting at 100, 1,000 and 10,000 clients (slow-ul-unreliable, 4
multicast streams), as ratios to the timing without activities.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np
import yaml

import wirelessfl.network.model as network_model
import wirelessfl.run.rows as run_rows
import wirelessfl.simulate as simulate_module
from wirelessfl.accounting import Accounting
from wirelessfl.config import parse_scenario
from wirelessfl.network import PRESETS, EnergyProfile, NetworkModel
from wirelessfl.network.energy import round_activity
from wirelessfl.seam import CommPlan, Stream

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


def no_activities(*args, **kwargs) -> dict:
    return {}


def no_accounting(records, timings, ledger, network, per_client_rounds=True) -> Accounting:
    n = len(ledger.device.budget_j)
    zeros = [0.0] * len(records)
    trace = {name: zeros for name in ("energy_j", "energy_mean_j", "energy_max_j", "energy_compute_j", "energy_tx_j",
                                      "energy_rx_j", "energy_idle_j", "cum_energy_j", "cum_energy_max_j", "depleted")}
    clients = {name: np.zeros(n) for name in ("energy_j", "energy_compute_j", "energy_tx_j", "energy_rx_j",
                                              "energy_idle_j", "rounds_taken_part", "depleted_round")}
    return Accounting(trace, clients, None)


def whole_run(rounds: int, repeats: int) -> None:
    """Time inside the energy parts of a run, as a share of the run, measured in the same run (robust to the
    load of a shared machine); and, as a cross-check, the best run time with and without them."""
    doc = yaml.safe_load(QUICKSTART.read_text())
    scenario = parse_scenario({**doc, "rounds": rounds, "seeds": [0], "device": "cpu"})
    spent = [0.0]

    def timed(fn):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - began
        return wrapper

    shares, best = [], {"with energy": float("inf"), "without": float("inf")}
    for _ in range(repeats):
        spent[0] = 0.0
        began = time.perf_counter()
        with mock.patch.object(network_model, "activities", timed(network_model.activities)), \
                mock.patch.object(run_rows, "account", timed(run_rows.account)):
            simulate_module.simulate(scenario)
        total = time.perf_counter() - began
        shares.append(spent[0] / total)
        best["with energy"] = min(best["with energy"], total)
        began = time.perf_counter()
        with mock.patch.object(network_model, "activities", no_activities), \
                mock.patch.object(run_rows, "account", no_accounting):
            simulate_module.simulate(scenario, client_rounds=False)
        best["without"] = min(best["without"], time.perf_counter() - began)
    print(f"quickstart, 1 seed, {rounds} rounds, 6 curves x 3 profiles ({repeats} runs each)")
    print(f"  share of the run inside energy accounting (activities + account): "
          f"{min(shares):.3%} to {max(shares):.3%}")
    for label, seconds in best.items():
        print(f"  best run {label:<12} {seconds:8.3f} s")
    print(f"  ratio of the best runs with / without energy: {best['with energy'] / best['without']:.3f}")


def outputs(rounds: int, repeats: int, directory: Path) -> None:
    """Writing the run directory (HTML figures, no PNG) with the energy outputs and without them."""
    from wirelessfl.accounting import TRACE_ENERGY_COLUMNS
    from wirelessfl.results.run_outputs import write_run_outputs

    doc = yaml.safe_load(QUICKSTART.read_text())
    scenario = parse_scenario({**doc, "rounds": rounds, "seeds": [0], "device": "cpu"})
    result = simulate_module.simulate(scenario)
    bare = simulate_module.SimulationResult(
        result.trace.drop(columns=list(TRACE_ENERGY_COLUMNS)), result.clients, result.trained_units, result.replayed,
        result.diagnostics, result.runtime, None,
    )
    best = {"with energy": float("inf"), "without": float("inf")}
    for _ in range(repeats):
        for label, chosen in (("with energy", result), ("without", bare)):
            target = directory / label.replace(" ", "_")
            target.mkdir(parents=True, exist_ok=True)
            began = time.perf_counter()
            write_run_outputs(target, scenario, chosen, 0.0, figures="html")
            best[label] = min(best[label], time.perf_counter() - began)
    print(f"writing the run directory (HTML figures, no PNG; best of {repeats})")
    for label, seconds in best.items():
        print(f"  {label:<12} {seconds:8.3f} s")
    print(f"  ratio with / without energy outputs: {best['with energy'] / best['without']:.3f}")


def per_round(quick: bool) -> None:
    print("one round at scale (slow-ul-unreliable, 4 streams): seconds per round, ratio to the timing without activities")
    print(f"{'clients':>8} {'timing, no activities':>22} {'+ activities':>14} {'+ energy':>10} {'ratio':>7}")
    for clients in (100, 1_000, 10_000):
        groups = np.array_split(np.arange(clients), 4)
        plan = CommPlan(tuple(Stream(1.0, g.tolist()) for g in groups), dict.fromkeys(range(clients), 1.0),
                        dict.fromkeys(range(clients), 1.0))
        model = NetworkModel(PRESETS["slow-ul-unreliable"], clients, np.random.default_rng(0))
        device = EnergyProfile().per_device(clients)
        samples = dict.fromkeys(range(clients), 100.0)
        repeats = max(3, (2_000 if quick else 20_000) // clients)

        def timed(fn) -> float:
            fn()
            began = time.perf_counter()
            for _ in range(repeats):
                fn()
            return (time.perf_counter() - began) / repeats

        with mock.patch.object(network_model, "activities", no_activities):
            bare = timed(lambda: model.time_round(plan, np.random.default_rng(1)))
        full = timed(lambda: model.time_round(plan, np.random.default_rng(1)))
        timing = model.time_round(plan, np.random.default_rng(1))
        energy = timed(lambda: round_activity(timing, samples, device))
        print(f"{clients:>8} {bare:>22.5f} {full:>14.5f} {energy:>10.5f} {(full + energy) / bare:>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    args = parser.parse_args()
    whole_run(rounds=5 if args.quick else 30, repeats=2 if args.quick else 3)
    with tempfile.TemporaryDirectory() as directory:
        outputs(rounds=5 if args.quick else 30, repeats=2 if args.quick else 3, directory=Path(directory))
    per_round(args.quick)


if __name__ == "__main__":
    main()
