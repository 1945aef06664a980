"""Results do not depend on the thread count or the sweep executor (same machine, same seed: the same bytes).

The quickstart's 20-client federation is the smallest case found where a
partition of slots that followed the thread count changed the trace (mean_loss
in the last digits at round 1, then everything), so these tests use it, on its
wired network alone (every client takes part in every round; with
``workers.partition`` made to return the thread count, the 1- and 2-thread
traces of this scenario differ).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
import yaml
from threadpoolctl import threadpool_limits

import wirelessfl

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


def _quickstart(rounds: int) -> dict:
    doc = yaml.safe_load(QUICKSTART.read_text())
    return {**doc, "rounds": rounds, "seeds": [0], "device": "cpu", "algorithms": doc["algorithms"][:4], "networks": [{"preset": "wired"}]}


def test_the_same_run_under_one_and_two_threads_writes_identical_tables(tmp_path):
    """In process: torch's intra-op threads (what ``OMP_NUM_THREADS`` sets at start) and the BLAS/OpenMP pools
    set to 1, then 2; the Python API is the CLI's writer without its PNGs."""
    outputs = {}
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            out = tmp_path / f"threads{count}"
            torch.set_num_threads(count)
            with threadpool_limits(count):
                wirelessfl.simulate(_quickstart(2), out=out)
            outputs[count] = [(out / name).read_bytes() for name in ("trace.csv", "clients.csv")]
    finally:
        torch.set_num_threads(threads)
    assert outputs[1] == outputs[2]


def test_a_sweep_gives_the_same_table_in_process_and_in_a_process_pool(tmp_path):
    """In process with one thread; one pool worker takes every core (``cpu_count // workers`` threads). FedAvg and
    Local on the quickstart's federation (the worker's cost is mostly its imports)."""
    grid = {"training.lr": [0.05, 0.1]}
    scenario = {**_quickstart(2), "algorithms": [{"name": "fedavg"}, {"name": "local"}]}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = wirelessfl.sweep(scenario, grid, out=tmp_path / "local", executor="local")
    finally:
        torch.set_num_threads(threads)
    pooled = wirelessfl.sweep(scenario, grid, out=tmp_path / "pool", executor="process", workers=1)
    pd.testing.assert_frame_equal(local.table, pooled.table)
    assert (tmp_path / "local" / "sweep.csv").read_bytes() == (tmp_path / "pool" / "sweep.csv").read_bytes()
    traces = {where: sorted((tmp_path / where / "units").glob("*/trace.csv")) for where in ("local", "pool")}
    assert len(traces["local"]) == 2
    assert [t.read_bytes() for t in traces["local"]] == [t.read_bytes() for t in traces["pool"]]
