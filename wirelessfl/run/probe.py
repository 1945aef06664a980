"""Timing real rounds of a unit: every per-round cost (network, data gathering, aggregation, evaluation, records)
at once, which a model of the training throughput alone misses at thousands of clients of a few samples each.
The tuning's cost preview (``tune.study.probe_seconds``) and the run's (``cost.check_run``) both take it."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from wirelessfl.run.unit import Unit

#: Rounds a probe runs: the first (the set-up, UCFL's estimation round; round 0's evaluation before it) untimed,
#: then the timed ones.
PROBE_ROUNDS = 3


@contextmanager
def kept_random_states() -> Iterator[None]:
    """Python's, NumPy's and torch's (CPU) global random states put back on leaving: a probe before a run
    (building a unit draws its models) leaves the run's draws as they were."""
    states = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])


def round_seconds(unit: Unit, eval_every: int = 1, test_split: bool = False, rounds: int = PROBE_ROUNDS) -> float:
    """Wall seconds of one of ``unit``'s rounds: the mean of rounds 2..``rounds`` (round 0's evaluation and
    round 1, the set-up and warm-up, untimed), run as a run runs them (global random states kept)."""
    stamps: list[float] = []
    with kept_random_states():
        unit.run(rounds, eval_every, lambda progress: stamps.append(time.perf_counter()), None, test_split=test_split)
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1)
