"""A unit's checkpoint files: where they live, what they may hold, and the checks a loaded one must pass.

``wirelessfl.checkpoint`` stores and verifies bytes (safetensors, checksums,
no pickle); this module knows what a *unit's* checkpoint is: its name, its kind
(``done``/``partial``) inside the checksummed state, records of rounds 0, 1, 2, ...,
and the run's seeding, so a file copied over another or written under another
seeding is refused in one line rather than resumed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wirelessfl.algorithms.base import display_name
from wirelessfl.checkpoint import (
    SEAM_TYPES, SUFFIX, CheckpointError, FingerprintMismatch, ProvenanceMismatch, dumps, load_checkpoint, save_checkpoint,
)
from wirelessfl.config import first_line
from wirelessfl.results.io import SEEDING, resumable_writes
from wirelessfl.run.evaluation import RoundRecord
from wirelessfl.seam import CommPlan, RoundTiming

CHECKPOINT_TYPES = (*SEAM_TYPES, RoundRecord)
"""The dataclasses a checkpoint may rebuild (wirelessfl.checkpoint refuses every other object)."""

PROVENANCE = {"seeding": SEEDING}
"""How a run derives its draws from its seed (:data:`wirelessfl.results.io.SEEDING`), recorded in every checkpoint
and in the finished run's ``provenance.json``.

A run resumed under another scheme would continue its curves from draws the
scheme that started them never made, and mix two seedings in one trace; so
``--resume`` refuses a checkpoint written with another scheme, or before the
scheme was recorded (then each algorithm was seeded apart, ``derive_seed(seed,
algorithm)``).
"""

STATE_CONTENTS = (
    "tensors, NumPy arrays and scalars of numbers or booleans, None, bool, int, float, str, "
    "and lists, tuples, sets and dicts of these"
)
"""What an algorithm's ``state_dict()`` may hold: what a checkpoint stores without carrying code."""


def checkpoint_path(ckpt_dir: Path, key: str, kind: str) -> Path:
    return ckpt_dir / f"{key}.{kind}{SUFFIX}"


def checkpoint_dir(run_dir: Path) -> Path:
    """``run_dir/checkpoints``, refused in one line when something other than a folder (or nothing) is there."""
    path = Path(run_dir) / "checkpoints"
    if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
        what = "a symbolic link" if path.is_symlink() else "a file"
        raise CheckpointError(
            f"{path}: {what}, not the run's checkpoint folder; move it away (the run then retrains from round 0)"
        )
    return path


def check_checkpointable(unit) -> None:
    """One line naming the algorithm when its state (``Unit.state``) holds something a checkpoint cannot
    store, before anything is written (asked of algorithms by import path; the registered ones are tested)."""
    try:
        dumps(unit.state(), CHECKPOINT_TYPES)
    except TypeError as err:
        raise CheckpointError(
            f"algorithm {display_name(type(unit.algorithm))!r}: {first_line(str(err))}; "
            f"an algorithm's state_dict() may hold {STATE_CONTENTS}"
        ) from None


def save_unit(ckpt_dir: Path, key: str, kind: str, state: dict[str, Any], stamp: str) -> None:
    """Atomically, with ``kind`` ("done" or "partial") inside the checksummed state, so that a file renamed to the
    other kind is caught on load (:func:`_check_state`); a full disk is one line saying to free space and resume
    (the last checkpoint is intact)."""
    with resumable_writes(ckpt_dir.parent):
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        state = {**state, "kind": kind}
        try:
            save_checkpoint(checkpoint_path(ckpt_dir, key, kind), state, CHECKPOINT_TYPES, stamp, PROVENANCE)
        except TypeError as err:
            raise CheckpointError(
                f"{key}: {first_line(str(err))}; an algorithm's state_dict() may hold {STATE_CONTENTS}"
            ) from None


def load_unit(ckpt_dir: Path | None, key: str, kind: str, stamp: tuple[str, ...], rounds: int) -> dict[str, Any] | None:
    """The unit's checkpoint; a pickle ``.pt`` left by an older wirelessfl is refused, never unpickled."""
    if ckpt_dir is None:
        return None
    for path in (checkpoint_path(ckpt_dir, key, kind), ckpt_dir / f"{key}.{kind}.pt"):
        if os.path.lexists(path):
            return read_unit(path, stamp, kind, rounds)
    return None


def read_unit(path: Path, stamp: tuple[str, ...], kind: str, rounds: int) -> dict[str, Any]:
    """The ``kind`` checkpoint at ``path`` of a unit of a ``rounds``-round scenario, whole and consistent."""
    try:
        return _check_state(path, load_checkpoint(path, CHECKPOINT_TYPES, stamp, PROVENANCE), kind, rounds)
    except ProvenanceMismatch as other:
        run = path.parent.parent
        made = (
            "before its seeding was recorded (each algorithm seeded apart)"
            if other.found is None
            else f"with the seeding {other.found!r}"
        )
        raise CheckpointError(
            f"{run}: refused to resume: {path.name} was written {made}, and this wirelessfl seeds with {SEEDING!r} "
            f"(one run would mix two seedings); start a new run: `wirelessfl simulate {run / 'scenario.yaml'} --out NEW_DIR`"
        ) from None
    except FingerprintMismatch:
        raise other_settings(path) from None


def _check_state(path: Path, state: Any, kind: str, rounds: int) -> dict[str, Any]:
    """``state`` when it is what a ``kind`` checkpoint of a ``rounds``-round unit holds: records of rounds 0, 1, ...
    in order (a plan in every round but 0), a timing per round or none, the kind it was saved as (files written
    before the kind was recorded carry none) and, for ``done``, every round; for ``partial``, fewer and the models.

    A checksum proves the bytes are the ones written, not that they belong under this name: an older
    ``partial`` copied over a ``done`` file would otherwise finish the unit short of its rounds."""
    run = path.parent.parent
    retrain = f"delete it and run `wirelessfl simulate --resume {run}` to retrain that unit"
    problem = _state_problem(state, kind)
    if problem is not None:
        raise CheckpointError(f"{path}: damaged checkpoint ({problem}); {retrain}")
    last = state["records"][-1].round
    saved_as = state.get("kind", kind)
    if saved_as != kind:
        raise CheckpointError(
            f"{path}: holds a {saved_as} checkpoint (rounds 0 to {last} of {rounds}) under the name of a {kind} one; {retrain}"
        )
    if kind == "done" and last != rounds:
        raise CheckpointError(
            f"{path}: a finished unit's checkpoint must hold all {rounds} rounds, this one ends at round {last}; {retrain}"
        )
    if kind == "partial" and last >= rounds:
        raise CheckpointError(f"{path}: damaged checkpoint (a partial checkpoint at round {last} of {rounds}); {retrain}")
    return state


def _state_problem(state: Any, kind: str) -> str | None:
    """What makes ``state`` not a unit's checkpoint state (None when nothing does)."""
    if type(state) is not dict or type(state.get("records")) is not list or not state["records"]:
        return "no list of round records"
    records = state["records"]
    if not all(isinstance(rec, RoundRecord) and type(rec.round) is int and type(rec.metrics) is dict for rec in records):
        return "a round record of the wrong form"
    found = [rec.round for rec in records]
    if found != list(range(len(records))):
        shown = found if len(found) <= 8 else [*found[:4], "...", *found[-3:]]
        return f"its records hold rounds {shown}, not 0, 1, 2, ... in order"
    if records[0].plan is not None or not all(isinstance(rec.plan, CommPlan) for rec in records[1:]):
        return "a round without its plan"
    timings = state.get("timings")
    if type(timings) is not list:
        return "no list of round timings"
    if len(timings) not in (0, len(records) - 1):
        return f"timings for {len(timings)} rounds, records for {len(records) - 1}"
    if not all(isinstance(t, RoundTiming) for t in timings):
        return "a round timing of the wrong form"
    if not isinstance(state.get("clock"), float):
        return "no clock"
    if kind == "partial" and "algorithm" not in state:
        return "a partial checkpoint without the models to continue from"
    return None


def other_settings(path: Path) -> CheckpointError:
    run = path.parent.parent
    return CheckpointError(
        f"{path}: written for other settings than {run / 'scenario.yaml'} (was that file edited after the run "
        "started?); put back the scenario the run started with, or run the edited file as a new run"
    )
