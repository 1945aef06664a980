"""Estimated against measured peak memory of whole runs (``wirelessfl.cost`` / ``learning.memory``).

Every scenario runs in its own child process: imports, the data, and a warm-up
run (one round of the same scenario on 4 clients: code pages, oneDNN kernels,
thread pools) come first; then freed memory is handed back (``malloc_trim``),
the peak-RSS mark is reset (``/proc/self/clear_refs``) and the full scenario
is simulated with checkpoints into a temporary run directory. The measured
growth is ``VmHWM`` (peak RSS) minus the RSS just before the run; the estimate
is ``check_run``'s. ``tests/learning/test_memory.py`` runs the child mode on
small scenarios.

    PYTHONPATH=. python benchmarks/bench_memory.py            # 1,000 clients and two smaller runs
    PYTHONPATH=. python benchmarks/bench_memory.py --child '{...scenario...}'   # one measurement, JSON out
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(raws: list[dict]) -> list[dict]:
    """Measure each scenario in this process, one after the other (see the module docstring)."""
    import copy
    import ctypes
    import gc
    import tempfile
    import time

    from wirelessfl.config import parse_scenario
    from wirelessfl.cost import check_run
    from wirelessfl.learning.data.federated import build_federated_data
    from wirelessfl.simulate import simulate

    for raw in raws:
        small = copy.deepcopy(raw)
        small["rounds"] = 1
        small["data"] = {**small["data"], "clients": 4}
        with tempfile.TemporaryDirectory() as tmp:
            simulate(parse_scenario(small), Path(tmp))
    results = []
    for raw in raws:
        scenario = parse_scenario(raw)
        data = build_federated_data(scenario.data_spec(), scenario.seeds[0])
        cost = check_run(scenario, data=data, probe=False)
        del data
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")
        baseline = _status("VmRSS")
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            simulate(scenario, Path(tmp))
        wall = time.perf_counter() - began
        results.append(
            {
                "name": scenario.name,
                "estimate": cost.memory.total,
                "measured": _status("VmHWM") - baseline,
                "baseline": baseline,
                "phase": cost.memory.phase,
                "parts": cost.memory.parts,
                "wall_s": wall,
            }
        )
    return results


def measure(raws: list[dict]) -> list[dict]:
    """``child(raws)`` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(raws)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def scenario(name: str, clients: int, per_client: int, model: dict, algorithms: list[dict], rounds: int = 2, dataset: dict | None = None) -> dict:
    """A small CPU scenario on digits (or ``dataset``), checkpointing every round."""
    return {
        "name": name,
        "rounds": rounds,
        "checkpoint_every": 1,
        "device": "cpu",
        "data": {**(dataset or {"dataset": "digits"}), "clients": clients, "samples": {"per_client": per_client}},
        "model": model,
        "training": {"batch_size": 32, "lr": 0.05},
        "algorithms": algorithms,
        "networks": [{"preset": "wired"}],
    }


SYNTHETIC = {"dataset": "synthetic", "options": {"num_samples": 12000, "dim": 64}}
SCENARIOS = [
    scenario("mlp-1000-clients-fedavg", 1000, 10, {"name": "mlp", "options": {"hidden": [200]}}, [{"name": "fedavg"}], dataset=SYNTHETIC),
    scenario("lenet5-100-clients-fedem", 100, 16, {"name": "lenet5"}, [{"name": "fedem", "params": {"components": 2}}]),
    scenario("mlp-30-clients-ucfl", 30, 50, {"name": "mlp", "options": {"hidden": [1000]}}, [{"name": "ucfl", "params": {"streams": 3, "sigma_batches": 5}}]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help="measure this scenario (JSON) in this process and print JSON")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    print(f"{'scenario':<28} {'estimate':>10} {'measured':>10} {'ratio':>6}  peak phase (estimate)           wall")
    for result in measure(SCENARIOS):
        ratio = result["estimate"] / result["measured"]
        print(
            f"{result['name']:<28} {result['estimate'] / 1e6:>7.1f} MB {result['measured'] / 1e6:>7.1f} MB {ratio:>6.2f}  "
            f"{result['phase']:<30} {result['wall_s']:.1f} s"
        )


if __name__ == "__main__":
    main()
