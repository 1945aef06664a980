"""``--resume RUN_DIR --rounds N``: a longer budget turned into the resumption that already exists.

Rather than a second way to continue training, each checkpoint becomes a
``partial`` one stamped for the N-round scenario, and an ordinary resume runs on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wirelessfl.checkpoint import CheckpointError, fingerprint_of
from wirelessfl.config import Scenario, ScenarioError, dump_scenario, load_scenario
from wirelessfl.results.io import atomic_write_text
from wirelessfl.run.checkpoints import checkpoint_dir, checkpoint_path, read_unit, save_unit
from wirelessfl.run.keys import unit_stamps


def extend_run(run_dir: Path, rounds: int) -> Scenario:
    """Make a run directory (finished or interrupted) continue to ``rounds``; returns the longer scenario.

    Every unit continues from where it stopped, so the longer run's training equals a run started with
    ``rounds`` (randomness derives from seed, round and purpose; the evaluated rounds of the first run stay
    in its trace). A finished unit can only go on from its models, which its ``done`` checkpoint holds when
    the run was started with ``keep_models``; a unit without them is refused in one line before anything
    changes. Then each checkpoint becomes a ``partial`` one stamped for the longer scenario, and
    ``scenario.yaml`` is rewritten last. Checkpoints already stamped for it are accepted, so the same call
    completes an extension that was interrupted half-way.
    """
    run_dir = Path(run_dir)
    source = run_dir / "scenario.yaml"
    started = load_scenario(source, import_models=False)  # its model is imported after the checkpoints vouch for it
    if rounds <= started.rounds:
        if rounds == started.rounds:
            return started
        raise ScenarioError(
            f"--rounds {rounds}: {run_dir} runs {started.rounds} rounds; a run can be extended, not shortened "
            f"(fewer rounds are a new run: `wirelessfl simulate {source} --rounds {rounds} --out NEW_DIR`)"
        )
    longer = load_scenario(source, {"rounds": rounds}, import_models=False)
    ckpt_dir = checkpoint_dir(run_dir)
    before, after = unit_stamps(started), unit_stamps(longer)
    states: dict[str, tuple[str, dict[str, Any]]] = {}
    lean = []
    for key in after:
        for kind in ("done", "partial"):
            path = checkpoint_path(ckpt_dir, key, kind)
            if os.path.lexists(path):
                if fingerprint_of(path) in after[key]:
                    continue  # converted by an earlier, interrupted extension
                state = read_unit(path, before[key], kind, started.rounds)
                if "algorithm" not in state:
                    lean.append(key)
                states[key] = (kind, state)
    if lean:
        raise CheckpointError(
            f"--rounds {rounds}: {run_dir} cannot be extended: {len(lean)} finished units kept no models "
            f"({', '.join(lean[:3])}{', ...' if len(lean) > 3 else ''}); a run keeps them to be extended when "
            "started with --keep-models"
        )
    for key, (kind, state) in states.items():
        save_unit(ckpt_dir, key, "partial", state, after[key][0])
        if kind == "done":
            checkpoint_path(ckpt_dir, key, "done").unlink()
    atomic_write_text(source, dump_scenario(longer))
    return longer
