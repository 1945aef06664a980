"""The one door into a run, for the command line and the Python API alike.

Before a run allocates or writes anything: the dataset is there, the run fits in
memory (``cost.check_run``: refused above 80% of the available memory), and the
first seed's data, model and algorithms build (``preflight``). Then the run
directory, by one rule: a new run goes into a new or empty directory (the CLI
without ``--out``: a new timestamped one under ``output:``; the Python API without
``out``: none, nothing is written), and a directory that holds anything is
refused; a run already in a directory continues only when asked to (``--resume
DIR``, ``resume=True``), with its own scenario.yaml, once every checkpoint has
been read and vouched for it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wirelessfl.config import Scenario, load_scenario, resolved
from wirelessfl.learning.data import guard
from wirelessfl.learning.data.data_files import missing_dataset
from wirelessfl.results.io import atomic_write_text, new_run_dir

if TYPE_CHECKING:
    from wirelessfl.cost import RunCost


class RunRefused(ValueError):
    """A run refused before it starts (a missing dataset, a run too big here, an unusable directory)."""


@dataclass(frozen=True)
class PreparedRun:
    """A run that passed every check: its scenario, its directory (None: nothing is written), its cost, and for
    a resumed run the rounds each unit has done and whether its finished units keep their models."""

    scenario: Scenario
    run_dir: Path | None
    cost: RunCost
    done: dict[str, int] = field(default_factory=dict)
    keep_models: bool = False


def check_new_run(scenario: Scenario, source: str | None = None, probe: bool = True) -> RunCost:
    """The dataset, the memory guard (nothing big allocated yet), then the data, model and every curve's
    algorithm built once. Each failure is one line prefixed with ``source`` (the memory guard's unprefixed
    without one). Returns the run's cost estimate; ``probe`` times a few training steps for it."""
    where = source or "scenario"
    missing = missing_dataset(scenario.data.dataset, scenario.data.root, scenario.data.download, scenario.data.options)
    if missing is not None:  # before torch is imported: the answer in a second, not after the whole stack loads
        raise RunRefused(f"{where}: {missing}")
    check_store_path(scenario, where)
    check_data(scenario, source)  # so is data too big to build
    from wirelessfl.run.preflight import check_links, preflight  # torch loads here, once the torch-free checks have passed

    check_links(scenario, where)  # before the cost preview, whose compute-floor note times a round on these links
    run_cost = check_cost(scenario, source, probe=probe)
    preflight(scenario, where, run_cost.client_store)
    return run_cost


def check_store_path(scenario: Scenario, where: str) -> None:
    """``client_store.path`` must be a folder this process can write into (or one it can create), before
    anything is written."""
    store = scenario.client_store
    if store is None or store.path is None:
        return
    path = Path(store.path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        why = "not a folder" if existing is not None else "nothing of it exists"
    elif not os.access(existing, os.W_OK | os.X_OK):
        why = f"{existing} is not writable"
    else:
        return
    raise RunRefused(f"{where}: client_store.path {store.path}: {why}; give a folder this user can write, or leave path out (the run directory's store/)")


def check_data(scenario: Scenario, source: str | None = None) -> None:
    """The data guard's refusal (torch-free: from the spec's sizes) as one line, prefixed with ``source`` when given."""
    try:
        guard.check_data(scenario)
    except ValueError as err:
        raise RunRefused(f"{source}: {err}" if source is not None else str(err)) from None


def check_cost(scenario: Scenario, source: str | None = None, done: dict[str, int] | None = None, probe: bool = True) -> RunCost:
    """``cost.check_run``'s refusal as one line, prefixed with ``source`` when given."""
    from wirelessfl.cost import check_run

    try:
        return check_run(scenario, done=done, probe=probe)
    except ValueError as err:
        raise RunRefused(f"{source}: {err}" if source is not None else str(err)) from None


def prepare_run(
    scenario: Scenario, out: Path | None, resolved_text: str, *, source: str | None = None, probe: bool = True,
    write: bool = True, flag: str = "--out", continues: str = "--resume {out}",
) -> PreparedRun:
    """A new run checked (:func:`check_new_run`), then its directory made with ``resolved_text`` as its
    scenario.yaml: ``out`` (new or empty), or without it a new timestamped one (``write``) or none."""
    run_cost = check_new_run(scenario, source, probe)
    if out is None and not write:
        return PreparedRun(scenario, None, run_cost)
    run_dir = make_run_dir(scenario, out, resolved_text, flag=flag, continues=continues)
    return PreparedRun(scenario, run_dir, run_cost)


def make_run_dir(
    scenario: Scenario, out: Path | None, resolved_text: str, kind: str = "run", file: str = "scenario.yaml",
    resumed: str = "an interrupted run", flag: str = "--out", continues: str = "--resume {out}",
) -> Path:
    """Create the run (or tuning) directory and write the resolved scenario into it as ``file``; on failure
    leave nothing behind. ``out`` must be new or empty; ``resumed`` says what continues (``continues``)."""
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunRefused(
            f"{flag} {out}: already exists and is not an empty directory; choose a new one "
            f"({resumed} continues with {continues.format(out=out)})"
        )
    where = f"{flag} {out}" if out is not None else f"output: {scenario.output}"
    created = out is None or not out.exists()
    try:
        run_dir = new_run_dir(Path(scenario.output), scenario.name if kind == "run" else f"{scenario.name}-{kind}") if out is None else out
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunRefused(f"{where}: cannot create the {kind} directory: {err.strerror or err}") from None
    try:
        atomic_write_text(run_dir / file, resolved_text)
    except OSError as err:
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise RunRefused(f"{where}: cannot write into the {kind} directory: {err.strerror or err}") from None
    return run_dir


def resumable(
    run_dir: Path, given: Scenario | None = None, flag: str = "--resume", given_name: str = "SCENARIO", option: str = "SCENARIO"
) -> Scenario:
    """The run's own scenario, its model not imported yet (:func:`prepare_resume` imports it once the checkpoints
    vouch for it); a scenario ``given`` beside it (shown as ``given_name``, passed as ``option``) must be the same one."""
    source = Path(run_dir) / "scenario.yaml"
    if not source.is_file():
        raise RunRefused(f"{flag} {run_dir}: no scenario.yaml there (not a wirelessfl run directory)")
    saved = load_scenario(source, import_models=False)
    if given is not None:
        before, after = resolved(saved), resolved(given)
        differing = [name for name in before if before[name] != after[name]]
        if differing:
            raise RunRefused(
                f"{flag} {run_dir}: {given_name} differs from the run's scenario.yaml in {', '.join(differing)}; "
                f"leave {option} out to continue the run as it was started"
            )
    return saved


def prepare_resume(run_dir: Path, saved: Scenario, rounds: int | None = None, probe: bool = True) -> PreparedRun:
    """A run directory continued: extended to ``rounds`` first when that is more (the longer run must fit
    before its checkpoints are restamped), every checkpoint read, the model imported, then the memory guard
    for what is left."""
    from wirelessfl.run.extend import extend_run
    from wirelessfl.run.folder import check_checkpoints, import_run_model

    keep_models = False
    scenario = saved
    if rounds is not None and rounds != saved.rounds:
        if rounds > saved.rounds:
            check_cost(load_scenario(Path(run_dir) / "scenario.yaml", {"rounds": rounds}), None, None, False)
        scenario = extend_run(run_dir, rounds)
        keep_models = True  # so that the longer run can be extended again
    done = check_checkpoints(scenario, run_dir)
    import_run_model(scenario, run_dir, done)
    return PreparedRun(scenario, Path(run_dir), check_cost(scenario, None, done, probe), done, keep_models)
