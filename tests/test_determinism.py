"""Results do not depend on the thread count or the sweep executor (same machine, same seed: the same bytes).

The quickstart's 20-client federation is the smallest case found where a
partition of slots that followed the thread count changed the trace (mean_loss
in the last digits at round 1, then everything), so these tests use it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch
import yaml

import wirelessfl

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


def _quickstart(rounds: int) -> dict:
    doc = yaml.safe_load(QUICKSTART.read_text())
    return {**doc, "rounds": rounds, "seeds": [0], "device": "cpu", "algorithms": doc["algorithms"][:4]}


def test_the_same_run_under_one_and_two_threads_writes_identical_tables(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_quickstart(2)))
    outputs = {}
    for threads in (1, 2):
        out = tmp_path / f"threads{threads}"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        subprocess.run(  # the Python API: the CLI's writer without its PNGs, which would double the test's CPU
            [sys.executable, "-c", "import sys, wirelessfl; wirelessfl.simulate(sys.argv[1], out=sys.argv[2])", str(scenario), str(out)],
            env=env, check=True, capture_output=True,
        )
        outputs[threads] = [(out / name).read_bytes() for name in ("trace.csv", "clients.csv")]
    assert outputs[1] == outputs[2]


def test_a_sweep_gives_the_same_table_in_process_and_in_a_process_pool(tmp_path):
    """In process with one thread; one pool worker takes every core (``cpu_count // workers`` threads)."""
    grid = {"training.lr": [0.05, 0.1]}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = wirelessfl.sweep(_quickstart(2), grid, out=tmp_path / "local", executor="local")
    finally:
        torch.set_num_threads(threads)
    pooled = wirelessfl.sweep(_quickstart(2), grid, out=tmp_path / "pool", executor="process", workers=1)
    pd.testing.assert_frame_equal(local.table, pooled.table)
    assert (tmp_path / "local" / "sweep.csv").read_bytes() == (tmp_path / "pool" / "sweep.csv").read_bytes()
    traces = {where: sorted((tmp_path / where / "units").glob("*/trace.csv")) for where in ("local", "pool")}
    assert len(traces["local"]) == 2
    assert [t.read_bytes() for t in traces["local"]] == [t.read_bytes() for t in traces["pool"]]
