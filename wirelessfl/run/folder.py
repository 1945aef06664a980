"""A run folder's checkpoints read as a whole before a resume prints, trains or imports anything.

``--resume`` and ``validate`` of a run's own scenario.yaml check every
checkpoint's stamp first, and only then import the model module the scenario
names, so an edited scenario.yaml never runs its code under an old run's name.
"""

from __future__ import annotations

from pathlib import Path

from wirelessfl.checkpoint import SUFFIX, CheckpointError, fingerprint_of
from wirelessfl.config import Scenario, import_model, names_user_dataset, names_user_model
from wirelessfl.results.io import atomic_write_text, resumable_writes
from wirelessfl.run.checkpoints import checkpoint_dir, other_settings, read_unit
from wirelessfl.run.keys import unit_stamps

KEEP_MODELS_MARK = "KEEP_MODELS"


def remember_keep_models(ckpt_dir: Path, keep_models: bool) -> bool:
    """True when this call or the one that started the run asked to keep models; marks the run for its resumes."""
    mark = ckpt_dir / KEEP_MODELS_MARK
    if keep_models and not mark.is_file():
        with resumable_writes(ckpt_dir.parent):
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(mark, "done checkpoints of this run keep their models (wirelessfl simulate --keep-models)\n")
    return keep_models or mark.is_file()


def check_checkpoints(scenario: Scenario, run_dir: Path) -> dict[str, int]:
    """Read every checkpoint of ``run_dir`` once, before a resume prints or trains anything; returns the
    rounds each unit has done (``{unit key: round}``, units without a checkpoint left out), from which
    the cost preview and the progress bar count only what is left.

    Raises the first problem as one line: a damaged or foreign file, a symlink,
    or checkpoints written for other settings than ``scenario``.
    """
    stamps = unit_stamps(scenario)
    done: dict[str, int] = {}
    for path, key, kind in unit_checkpoints(checkpoint_dir(run_dir), stamps):
        state = read_unit(path, stamps[key], kind, scenario.rounds)
        done[key] = max(done.get(key, 0), state["records"][-1].round)
    return done


def unit_checkpoints(ckpt_dir: Path, stamps: dict[str, tuple[str, ...]]) -> list[tuple[Path, str, str]]:
    """``(path, unit key, kind)`` of every checkpoint in ``ckpt_dir`` of a unit in ``stamps``; a unit no longer in
    the scenario keeps its files, unread."""
    if not ckpt_dir.is_dir():
        return []
    found = []
    for path in sorted(ckpt_dir.iterdir()):
        for kind in ("done", "partial"):
            for suffix in (SUFFIX, ".pt"):
                key = path.name.removesuffix(f".{kind}{suffix}")
                if path.name.endswith(f".{kind}{suffix}") and key in stamps:
                    found.append((path, key, kind))
    return found


def check_run_scenario(scenario: Scenario, run_dir: Path) -> dict[str, int]:
    """What ``validate`` checks of a run folder's ``scenario.yaml`` before its model is imported: every checkpoint of
    a unit of ``scenario`` carries its stamp (the headers only: nothing is decoded, and a run under an older seeding
    still validates). Returns ``{unit key: 0}`` for the units found, the answer :func:`import_run_model` takes."""
    ckpt_dir = checkpoint_dir(run_dir)
    stamps = unit_stamps(scenario)
    found: dict[str, int] = {}
    for path, key, _ in unit_checkpoints(ckpt_dir, stamps):
        if fingerprint_of(path) not in stamps[key]:
            raise other_settings(path)
        found[key] = 0
    return found


def import_run_model(scenario: Scenario, run_dir: Path, checked: dict[str, int]) -> None:
    """Import the model module of a run folder's own ``scenario.yaml`` (read with ``import_models=False``) once its
    checkpoints have vouched for it; ``checked`` is :func:`check_checkpoints`' (or :func:`check_run_scenario`'s) answer.

    A scenario naming a ``package.module:factory`` beside checkpoints none of which belongs to one of its units
    (every curve renamed, say) is not the scenario the run was started with, and is refused before its module runs.
    The stamps are hashes of the scenario, not signatures: a run folder made to pass them still runs its scenario's
    module when resumed (docs/results.md, "What a run folder may contain")."""
    source = Path(run_dir) / "scenario.yaml"
    ckpt_dir = checkpoint_dir(run_dir)
    if (names_user_model(scenario) or names_user_dataset(scenario)) and not checked and ckpt_dir.is_dir():
        what = f"model {scenario.model.name!r}" if names_user_model(scenario) else f"dataset loader {scenario.data.dataset!r}"
        if any(path.name.endswith((SUFFIX, ".pt")) for path in ckpt_dir.iterdir()):
            raise CheckpointError(
                f"{source}: none of the checkpoints in {ckpt_dir} was written for this scenario (was the file edited "
                f"after the run started?), so its {what} is not imported; put back the scenario "
                "the run started with, or run the edited file as a new run"
            )
    import_model(scenario, str(source))
