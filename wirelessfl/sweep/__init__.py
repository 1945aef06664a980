"""Sweeps: a grid over network, algorithm and scenario axes, run as cached, resumable units.

``plan_sweep`` expands and validates the grid (``grid``), ``run_sweep`` runs
the units still to do on an executor (``executors``: local, process, Ray) and
writes the sweep table (``run``). Network points are profiles of one unit,
replayed from one training, so a sweep costs what its learning points cost.
"""

from wirelessfl.sweep.executors import EXECUTORS, Outcome, UnitTask, make_executor, run_unit
from wirelessfl.sweep.grid import SweepError, SweepPlan, merge_grids, parse_grid_option, plan_sweep
from wirelessfl.sweep.run import SweepResult, check_out, pending, preflight, run_sweep, sweep_dir_for

__all__ = [
    "EXECUTORS", "Outcome", "check_out", "SweepError", "SweepPlan", "SweepResult", "UnitTask", "make_executor", "merge_grids",
    "parse_grid_option", "pending", "plan_sweep", "preflight", "run_sweep", "run_unit", "sweep_dir_for",
]
