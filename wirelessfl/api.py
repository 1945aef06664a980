"""The Python API a notebook user expects: ``wirelessfl.simulate(...)``, ``wirelessfl.sweep(...)``, ``wirelessfl.tune(...)``.

Both take a scenario as a YAML path, a dict or a ``Scenario``; keyword
overrides set top-level fields (``rounds=5``, ``seeds=[0, 1]``) and
``settings`` dotted paths (``{"training.lr": 0.01}`` or ``["training.lr=0.01"]``),
exactly as ``--set`` does. They return pandas frames and plotly figures rather
than printing; errors are the CLI's one-line ``ValueError`` messages, and as
there a run that would not fit in memory is refused before anything big is
allocated or written (``run.prepare``: the door ``wirelessfl simulate`` goes through too).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from wirelessfl.config import Scenario, apply_settings, dump_scenario, is_dump_of, load_scenario, parse_scenario
from wirelessfl.simulate import SimulationResult
from wirelessfl.simulate import simulate as _simulate
from wirelessfl.sweep import SweepResult, check_out, make_executor, merge_grids, pending, plan_sweep, preflight, run_sweep, sweep_dir_for


def _settings_list(settings: dict[str, Any] | list[str] | None) -> list[str]:
    if settings is None:
        return []
    if isinstance(settings, dict):
        return [f"{path}={json.dumps(value) if not isinstance(value, str) else value}" for path, value in settings.items()]
    return list(settings)


def _model_override(model: Any) -> Any:
    """``model=factory`` (a function returning an ``nn.Module``) as the scenario's ``{name: "module:factory"}``."""
    if not callable(model):
        return model
    from wirelessfl.learning.models import import_path

    path = import_path(model)
    if path is None:
        raise ValueError(
            f"model: a factory passed to the Python API must be importable by name (a function defined at the top "
            f"level of a module or notebook), got {getattr(model, '__qualname__', model)!r}"
        )
    return {"name": path}


def load(scenario: str | Path | dict[str, Any] | Scenario, settings=None, **overrides: Any) -> Scenario:
    """A validated ``Scenario`` from a path, a dict or a ``Scenario``, with overrides and settings applied.

    ``model=`` also takes a model factory itself (``factory(input_shape, num_classes, **options)``).
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    if "model" in given:
        given["model"] = _model_override(given["model"])
    if isinstance(scenario, (str, Path)):
        return load_scenario(scenario, given, _settings_list(settings))
    if isinstance(scenario, Scenario):
        raw = scenario.model_dump()
    elif isinstance(scenario, dict):
        raw = dict(scenario)
    else:
        raise ValueError(f"scenario must be a YAML path, a dict or a Scenario, got {type(scenario).__name__}")
    raw = {**raw, **given}
    if settings:
        raw = apply_settings(raw, _settings_list(settings))
    return parse_scenario(raw)


@dataclass
class RunResult(SimulationResult):
    """``simulate``'s result plus where it was written and its figures."""

    dir: Path | None = None

    def figures(self, target: float | None = None, timeline_round: int | None = None) -> dict[str, Any]:
        """The run figures as plotly figures: ``fig3`` (accuracy vs time), ``fig2`` (vs round), ``worst_clients``,
        ``energy`` (accuracy vs device energy), ``timeline`` (one round per client; the middle one unless
        ``timeline_round``) and, given the ``target`` accuracy, ``energy_pareto``."""
        from wirelessfl.results.energy import fig_accuracy_vs_energy, fig_energy_time_pareto
        from wirelessfl.results.figures import fig_accuracy_vs_round, fig_accuracy_vs_time, fig_worst_client
        from wirelessfl.results.timeline import fig_timeline

        figures = {
            "fig3": fig_accuracy_vs_time(self.trace),
            "fig2": fig_accuracy_vs_round(self.trace),
            "worst_clients": fig_worst_client(self.clients),
            "energy": fig_accuracy_vs_energy(self.trace),
        }
        if self.client_rounds is not None and len(self.client_rounds):
            figures["timeline"] = fig_timeline(self.client_rounds, self.trace, timeline_round)
        if target is not None:
            figures["energy_pareto"] = fig_energy_time_pareto(self.trace, target)
        return figures


def simulate(
    scenario, out: str | Path | None = None, *, resume: bool = False, settings=None, executor: str = "local",
    address: str | None = None, workers: int | None = None, **overrides: Any,
) -> RunResult:
    """Run every curve and seed of ``scenario``; with ``out``, write a run directory.

    The same door as ``wirelessfl simulate`` (``run.prepare``): the dataset, the
    memory guard and the build checks first, then ``out`` must be new or empty
    (a directory that holds anything is refused). ``resume=True`` continues the
    run in ``out`` from its own scenario.yaml and checkpoints, as ``--resume``
    (``scenario`` None or the same one; ``rounds=N`` extends it). The directory
    gets what ``wirelessfl simulate`` writes, with HTML figures only
    (``wirelessfl plot DIR`` adds the PNGs). ``executor="ray"`` trains on Ray
    actors (``address``, ``workers``: as ``--executor ray``), to the same trace.
    """
    from wirelessfl.results.run_outputs import write_run_outputs
    from wirelessfl.run.executor import open_shards
    from wirelessfl.run.prepare import prepare_resume, prepare_run, resumable

    run_dir = Path(out) if out is not None else None
    shards = None  # opened before anything is written, closed whatever happens
    try:
        if resume:
            rounds = overrides.pop("rounds", None)
            clashing = [name for name, value in {"settings": settings, **overrides}.items() if value is not None]
            if run_dir is None or clashing:
                raise ValueError(
                    f"resume: continues the run in out with the settings in its scenario.yaml; "
                    f"{'give out' if run_dir is None else 'leave out ' + ', '.join(clashing)}"
                )
            given = load(scenario) if scenario is not None else None
            saved = resumable(run_dir, given, "out", "scenario", "scenario")
            shards = open_shards(executor, address, workers, saved.device)
            prepared = prepare_resume(run_dir, saved, rounds, probe=False)
        else:
            sc = load(scenario, settings, **overrides)
            shards = open_shards(executor, address, workers, sc.device)
            prepared = prepare_run(
                sc, run_dir, dump_scenario(sc), probe=False, write=False, flag="out", continues="resume=True"
            )
        began = time.perf_counter()
        result = _simulate(
            prepared.scenario, prepared.run_dir, keep_models=prepared.keep_models, shards=shards,
            client_store=prepared.cost.client_store,
        )
    finally:
        if shards is not None:
            shards.__exit__(None, None, None)
    if prepared.run_dir is not None:
        write_run_outputs(prepared.run_dir, prepared.scenario, result, time.perf_counter() - began, figures="html")
    return RunResult(**{f.name: getattr(result, f.name) for f in fields(SimulationResult)}, dir=prepared.run_dir)


def sweep(
    scenario,
    grid: dict[str, Any] | list[str] | None = None,
    out: str | Path | None = None,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    *,
    settings=None,
    png: bool = False,
    **overrides: Any,
) -> SweepResult:
    """Run ``scenario`` over ``grid`` (added to its ``sweep:`` block): ``{"rho": [1, 2], "algorithms.ucfl.streams": [1, "m"]}``.

    ``out``: the sweep directory (an earlier sweep's reuses its finished
    units); default ``<output>/<name>-sweep-<time>``. Returns ``.table`` (the
    sweep.csv frame), ``.trace``, ``.dir`` and ``.figures()``.
    """
    sc = load(scenario, settings, **overrides)
    if isinstance(grid, dict):
        axes = {**sc.sweep, **{key: list(v) if isinstance(v, (list, tuple)) else [v] for key, v in grid.items()}}
    else:
        axes = merge_grids(sc.sweep, grid)
    plan = plan_sweep(sc, axes)
    target = Path(out) if out is not None else None
    check_out(target, plan)
    preflight(plan, target if target is not None and target.exists() else None)
    todo = len(pending(plan, target)) if target is not None else len(plan.units)
    runner = make_executor(executor, workers, address, todo)
    return run_sweep(plan, sweep_dir_for(sc, target), runner, png=png)



def tune(
    scenario,
    out: str | Path,
    *,
    trials: int | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    settings=None,
    **overrides: Any,
):
    """Search each curve's hyper-parameters on the validation split into ``out`` (``wirelessfl tune``).

    ``out`` is a new or empty directory, or one an earlier call with the same scenario left (its
    study is resumed). ``trials`` sets ``tune.trials``. Returns a ``TuneResult``: ``.table`` (the
    study.csv frame), ``.best`` (per curve: trial, objective, values) and ``.dir`` (with tuned.yaml).
    """
    from wirelessfl.cost import check_run
    from wirelessfl.results.io import atomic_write_text
    from wirelessfl.run.preflight import preflight as build_check
    from wirelessfl.tune.study import check_tunable, endpoint_scenario, run_tune

    sc = load(scenario, [*_settings_list(settings), *([f"tune.trials={trials}"] if trials is not None else [])], **overrides)
    check_tunable(sc)
    ends = endpoint_scenario(sc)
    check_run(ends, probe=False)
    build_check(ends, "tune (the ends of a search space)")
    run_dir = Path(out)
    resolved = dump_scenario(sc)
    saved = run_dir / "tune.yaml"
    if saved.is_file() and not is_dump_of(saved.read_text(encoding="utf-8"), sc):
        raise ValueError(f"out {run_dir}: holds a tuning of a different scenario; choose a new directory")
    if run_dir.exists() and not saved.is_file() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise ValueError(f"out {run_dir}: already exists and is not an empty directory; choose a new one")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(saved, resolved)
    return run_tune(sc, run_dir, make_executor(executor, workers, address, 1))
