"""``wirelessfl`` command line: simulate, sweep, tune, validate, list, plot, report.

User errors (bad scenario, missing dataset, impossible value, an output folder
that cannot be made) end with exit code 2 and one line on stderr naming the
problem, before anything is written; so do usage errors (an unknown option, a
bad option value), which ``run``, the console entry point, prints in one line
instead of typer's box. ``--debug`` shows the traceback for bug reports.
Ctrl-C ends a run with exit code 130 and the ``--resume`` command.
"""

from __future__ import annotations

import sys
import time
import warnings
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.segment import Segments
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Co-simulate personalized federated learning over wireless networks.")
# emoji off: rich would turn a ":name:" inside a file name, a model path or a curve into an emoji; user text is printed as given
err_console = Console(stderr=True, emoji=False)
console = Console(emoji=False)
_state = {"debug": False}
#: the width a table is measured in when no terminal limits it
_UNBOUNDED = 10_000


class UserError(Exception):
    """Raised for problems the user can fix; printed as one line."""


class RunExecutor(str, Enum):
    """Where one simulation's local training runs: ``local`` (this process) or ``ray`` (actors on a cluster)."""

    local = "local"
    ray = "ray"


class Device(str, Enum):
    """Where to train: ``auto`` picks CUDA when torch sees it."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def _one_line(message: str) -> str:
    """``message`` with every character that is not printable (a tab, a line break of any kind, e.g. U+0085
    in a key a YAML file gave) written as its escape, so one error, note or warning stays one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in message)


def _print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(_one_line(message))}", highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    _print_error(message)
    raise typer.Exit(code=code)


def _note(message: str) -> None:
    err_console.print(f"[yellow]note:[/] {escape(_one_line(message))}", highlight=False, soft_wrap=True)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python's warnings as one ``warning:`` line, without the source line it quotes. numpy's floating-point
    warnings ("divide by zero encountered in divide") are left out: what they flag (a link rate of 0, a NaN
    loss) is said in words by the checks and summary.md."""
    text = str(message)
    if issubclass(category, RuntimeWarning) and " encountered in " in text:
        return
    _warn(f"{category.__name__}: {text}")


def _guard(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (ValueError, OSError, UserError) as err:
        if _state["debug"]:
            raise
        from wirelessfl.config import first_line

        _fail(first_line(str(err), type(err).__name__))


def _show_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console.print(f"wirelessfl {version('wirelessfl')}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    debug: bool = typer.Option(False, "--debug", help="show tracebacks for errors"),
    show_version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True, help="print the version and exit"),
) -> None:
    _state["debug"] = debug
    if not debug:
        warnings.showwarning = _one_line_warning


@app.command()
def validate(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    settings: list[str] | None = typer.Option(None, "--set", help="override a field: PATH=VALUE (repeatable)"),
    build: bool = typer.Option(
        False, "--build", help="also build the data, the model and every algorithm once and estimate the run's memory and time here"
    ),
) -> None:
    """Check a scenario file without training: the schema and the dataset's files (in a second, torch not loaded);
    with --build also the data, model and every algorithm built once, the memory guard and the cost preview."""
    from wirelessfl.config import load_scenario

    _guard(_check_run_scenario, scenario)
    sc = _guard(load_scenario, scenario, None, settings)
    if build:
        run_cost = _guard(_preflight, sc, scenario)
    else:
        _guard(_check_data, sc, scenario)
    curves = [curve for algo in sc.algorithms for _, curve, _ in algo.expand()]
    profiles = [p.name for p in sc.profiles()]
    console.print(
        escape(
            f"ok {sc.name}: {sc.data.dataset}, {sc.data.clients} clients, {sc.rounds} rounds, "
            f"{len(curves)} curves ({', '.join(curves)}), profiles: {', '.join(profiles)}, seeds {sc.seeds}"
        ),
        highlight=False,
        soft_wrap=True,
    )
    if build:
        console.print(escape(run_cost.line()), highlight=False, soft_wrap=True)
        for line in run_cost.notes:
            _note(line)
    else:
        console.print("schema, dataset files and data size checked; --build also builds the data, model and algorithms once", highlight=False, soft_wrap=True)


@app.command()
def simulate(
    scenario: Path | None = typer.Argument(None, help="scenario YAML file (leave out with --resume)"),
    out: Path | None = typer.Option(None, "--out", help="new run directory (default: <output>/<name>-<timestamp>)"),
    rounds: int | None = typer.Option(
        None, "--rounds", min=1, help="override the number of rounds; with --resume, train the run on to this many rounds"
    ),
    seed: int | None = typer.Option(None, "--seed", min=0, help="run this single seed instead of the scenario's seeds"),
    device: Device | None = typer.Option(None, "--device", help="where to train (default: the scenario's device)"),
    resume: Path | None = typer.Option(None, "--resume", help="continue an interrupted run directory with its own scenario.yaml"),
    settings: list[str] | None = typer.Option(
        None, "--set", help="override a field: PATH=VALUE, e.g. --set training.lr=0.01 (repeatable)"
    ),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar (nor, without a terminal, progress lines)"),
    keep_models: bool = typer.Option(
        False, "--keep-models", help="keep each finished unit's models and optimizer state in checkpoints/ (for analysis scripts)"
    ),
    executor: RunExecutor | None = typer.Option(
        None, "--executor", help="where local training runs: local (this process, the default) or ray (actors on a Ray cluster)"
    ),
    address: str | None = typer.Option(None, "--address", help="with --executor ray: join this Ray cluster (default: a local Ray)"),
    workers: int | None = typer.Option(None, "--workers", help="with --executor ray: actors that train (default: one per CPU of the cluster)"),
) -> None:
    """Run a scenario: train every algorithm, time every round, write results."""
    from wirelessfl.config import dump_scenario, load_scenario

    if resume is not None:
        from wirelessfl.run.prepare import prepare_resume

        given = {"--out": out, "--seed": seed, "--device": device, "--set": settings or None}
        _refuse_beside_resume(resume, "the settings in its scenario.yaml", given)
        saved = _guard(_resumable, resume, scenario)
        shards = _guard(_open_shards, executor, address, workers, saved.device)
        prepared = _guard(prepare_resume, resume, saved, rounds)
        keep_models = keep_models or prepared.keep_models
    else:
        from wirelessfl.run.prepare import prepare_run

        if scenario is None:
            _fail("give a SCENARIO file to run, or --resume RUN_DIR to continue an interrupted run")
        overrides: dict[str, Any] = {"rounds": rounds, "device": device.value if device is not None else None}
        if seed is not None:
            overrides["seeds"] = [seed]
        sc = _guard(load_scenario, scenario, overrides, settings)
        shards = _guard(_open_shards, executor, address, workers, sc.device)
        prepared = _guard(prepare_run, sc, out, dump_scenario(sc), source=str(scenario))
    for line in (prepared.cost.line(), *prepared.cost.notes):
        _note(line)
    sc, run_dir, done = prepared.scenario, prepared.run_dir, prepared.done
    started = time.perf_counter()
    try:
        result = _guard(
            _run_with_progress, sc, run_dir, quiet, prepared.cost.seconds, keep_models, done, shards, prepared.cost.client_store
        )
    except KeyboardInterrupt:
        _fail(f"interrupted; `wirelessfl simulate --resume {run_dir}` continues from the last checkpoint", code=130)
    finally:
        if shards is not None:
            shards.__exit__(None, None, None)
    if shards is not None:
        _note(shards.summary())
    elapsed = time.perf_counter() - started
    _guard(_write_outputs, sc, run_dir, result, elapsed)


def _open_shards(executor, address: str | None, workers: int | None, device: str):
    from wirelessfl.run.executor import open_shards

    return open_shards(None if executor is None else executor.value, address, workers, device)


def _refuse_beside_resume(resume: Path, settings: str, given: dict[str, Any]) -> None:
    """``--resume`` continues with what the folder holds (``settings``); a flag that would change it is refused."""
    clashing = [flag for flag, value in given.items() if value is not None]
    if clashing:
        _fail(f"--resume continues {resume} with {settings}; leave out {', '.join(clashing)}")


def _resumable(run_dir: Path, scenario: Path | None):
    """The run's own scenario, its model not imported yet; a SCENARIO given beside --resume must be the same one."""
    from wirelessfl.config import load_scenario
    from wirelessfl.run.prepare import resumable

    given = None
    if scenario is not None and (run_dir / "scenario.yaml").is_file():
        given = load_scenario(scenario, import_models=False)
    return resumable(run_dir, given, given_name=str(scenario))


def _check_run_scenario(scenario: Path) -> None:
    """A run folder's scenario.yaml (one beside a ``checkpoints/`` folder) is checked against the stamps of its
    checkpoints before anything imports its model: an edited one is refused as ``--resume`` refuses it."""
    if scenario.name != "scenario.yaml" or not (scenario.parent / "checkpoints").exists():
        return
    from wirelessfl.config import load_scenario
    from wirelessfl.run.folder import check_run_scenario, import_run_model

    sc = load_scenario(scenario, import_models=False)
    import_run_model(sc, scenario.parent, check_run_scenario(sc, scenario.parent))


def _preflight(sc, source: Path):
    """Fail before anything is written (``run.prepare.check_new_run``); returns the run's cost estimate."""
    from wirelessfl.run.prepare import check_new_run

    return check_new_run(sc, str(source))


def _check_data(sc, source: Path) -> None:
    """The dataset's files are where the scenario says, and the data alone fits in memory (both from the spec,
    before torch is imported: the answer in a second)."""
    from wirelessfl.learning.data.data_files import missing_dataset
    from wirelessfl.learning.data.guard import check_data

    missing = missing_dataset(sc.data.dataset, sc.data.root, sc.data.download, sc.data.options)
    if missing is not None:
        raise UserError(f"{source}: {missing}")
    try:
        check_data(sc)
    except ValueError as err:
        raise UserError(f"{source}: {err}") from None


def _progress() -> Progress:
    """The progress bar of simulate and sweep: what runs, how far, the current status line."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", markup=False),  # plain text: curve names and file paths as they are
        TimeElapsedColumn(),
    )
    return Progress(*columns, console=err_console, transient=False)


def _run_with_progress(
    sc, run_dir: Path, quiet: bool, preview_s: float, keep_models: bool = False, done: dict[str, int] | None = None,
    shards=None, client_store: str | None = None,
):
    """The run under a progress bar of the trained units' rounds (a resumed run's bar starts at the rounds
    its checkpoints hold, ``done``); without a terminal, under progress lines whose time left starts from the
    cost preview's ``preview_s``."""
    from wirelessfl.run.followers import following_curves
    from wirelessfl.run.keys import unit_keys
    from wirelessfl.simulate import simulate

    followers = following_curves(sc)
    trained = [key for i, units in enumerate(unit_keys(sc)) if i not in followers for _, key in units]
    total = len(trained) * sc.rounds
    if quiet:
        return simulate(sc, run_dir, keep_models=keep_models, shards=shards, client_store=client_store)
    if not sys.stderr.isatty():
        from wirelessfl.progress_lines import ProgressLines

        lines = ProgressLines(_plain, trained, sc.rounds, done or {}, preview_s)

        def on_unit(event: str, key: str) -> None:
            (lines.unit_started if event == "start" else lines.unit_done)(key)

        return simulate(
            sc, run_dir, on_round=lines.round_done, keep_models=keep_models, on_unit=on_unit, shards=shards, client_store=client_store
        )
    with _progress() as progress:
        task = progress.add_task(sc.name, total=total, status="", completed=sum(min((done or {}).get(key, 0), sc.rounds) for key in trained))

        def on_round(info: dict[str, Any]) -> None:
            status = f"{info['unit']} round {info['round']} t={info['time']:.1f} {info['time_unit']} ({info['profile']})"
            if info.get("avg_acc") == info.get("avg_acc"):
                status += f" acc={info['avg_acc']:.3f}"
            progress.update(task, advance=1, status=status)

        return simulate(sc, run_dir, on_round=on_round, keep_models=keep_models, shards=shards, client_store=client_store)


def _plain(line: str) -> None:
    """A progress line on stderr beside the notes, as given: one line, never read as markup."""
    err_console.print(escape(_one_line(line)), highlight=False, soft_wrap=True)


def _write_outputs(sc, run_dir: Path, result, elapsed: float) -> None:
    """Every result file; a full disk says to free space and resume (the checkpoints re-write them without training)."""
    from wirelessfl.results.io import resumable_writes

    with resumable_writes(run_dir):
        _write_results(sc, run_dir, result, elapsed)


def _write_results(sc, run_dir: Path, result, elapsed: float) -> None:
    from wirelessfl.results.run_outputs import write_run_outputs

    figure_notes = write_run_outputs(run_dir, sc, result, elapsed)
    _print_final(result, sc.target_accuracy)
    for warning in _warnings(result):
        _warn(warning)
    for note in figure_notes:
        _note(note)
    console.print(escape(f"results: {run_dir}"), highlight=False, soft_wrap=True)


def _warn(message: str) -> None:
    err_console.print(f"[bold yellow]warning:[/] {escape(_one_line(message))}", highlight=False, soft_wrap=True)


def _warnings(result) -> list[str]:
    """What summary.md flags, said on the console too: links that leave most clients in outage, a NaN loss,
    dropped uploads, curves that have not settled and streams that miss the true groups."""
    import json

    from wirelessfl.network.physical import OUTAGE_S
    from wirelessfl.results.io import jsonable
    from wirelessfl.results.links import outage_warnings
    from wirelessfl.results.streams import stream_report, stream_warnings
    from wirelessfl.results.tables import aggregation_warnings, convergence_warnings, loss_warnings

    diagnostics = json.loads(json.dumps(result.diagnostics, default=jsonable))  # as diagnostics.json has them
    return (
        outage_warnings(getattr(result, "client_rounds", None), OUTAGE_S)
        + loss_warnings(result.trace)
        + aggregation_warnings(result.trace)
        + convergence_warnings(result.trace)
        + stream_warnings(stream_report(diagnostics, result.clients))
    )


def _print_final(result, target: float) -> None:
    """A digest in summary.md's units: percent (mean over seeds ± its 95% interval), times with their unit;
    terminal-sized on a terminal, else at full width (a log is not 80 columns wide)."""
    from wirelessfl.results.tables import percent, summary_table

    table = summary_table(result.trace, result.clients, target)
    shown = Table(show_header=True, header_style="bold", title=f"final round; time to {target:.0%} average accuracy")
    for column in ("curve", "profile", "avg acc %", "worst acc %", "aggregated %", "time", "time to target"):
        shown.add_column(column, no_wrap=column in ("curve", "profile"))
    for r in table.itertuples():
        when = "not reached" if r.time_to_target != r.time_to_target else f"{r.time_to_target:.1f} {r.time_unit}"
        shown.add_row(
            escape(r.curve), escape(r.profile), percent(r.avg_acc, r.avg_acc_ci), percent(r.worst_acc, r.worst_acc_ci),
            percent(r.aggregated_fraction), f"{r.final_time:.1f} {r.time_unit}", when,
        )
    _print_full_width(shown)


def _print_full_width(renderable) -> None:
    """On a terminal, fitted to it; elsewhere (a log, a pipe, CliRunner) drawn at its natural width, which
    rich would otherwise squeeze into 80 columns with cells cut to "…"."""
    if console.is_terminal:
        console.print(renderable)
        return
    natural = Measurement.get(console, console.options.update_width(_UNBOUNDED), renderable).maximum
    lines = console.render_lines(renderable, console.options.update_width(natural), pad=False, new_lines=True)
    console.print(Segments([segment for line in lines for segment in line]), soft_wrap=True)


class Executor(str, Enum):
    """Where sweep units run: ``local`` (in process), ``process`` (a pool), ``ray`` (a cluster)."""

    local = "local"
    process = "process"
    ray = "ray"


@app.command()
def sweep(
    scenario: Path | None = typer.Argument(None, help="scenario YAML file (leave out with --resume)"),
    grids: list[str] | None = typer.Option(
        None, "--grid", help="an axis and its values KEY=V1,V2,... (repeatable), e.g. rho=1,2,4 or algorithms.ucfl.streams=1,2,m"
    ),
    out: Path | None = typer.Option(None, "--out", help="sweep directory: new, empty, or an earlier sweep's (its finished units are reused)"),
    executor: Executor | None = typer.Option(
        None, "--executor", help="local, process (the default when more than one unit is to run) or ray"
    ),
    address: str | None = typer.Option(None, "--address", help="with --executor ray: join this Ray cluster (default: a local Ray)"),
    workers: int | None = typer.Option(None, "--workers", min=1, help="units run at once (default: one per CPU, at most the units)"),
    resume: Path | None = typer.Option(None, "--resume", help="continue a sweep directory with its own sweep.yaml"),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="override the number of rounds (recorded in sweep.yaml)"),
    seed: int | None = typer.Option(None, "--seed", min=0, help="run this single seed instead of the scenario's seeds (recorded in sweep.yaml)"),
    settings: list[str] | None = typer.Option(None, "--set", help="override a field of the scenario: PATH=VALUE (repeatable)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar; a line per finished unit"),
) -> None:
    """Run a scenario over a grid of network, algorithm and scenario values; write sweep.csv and trade-off maps."""
    from wirelessfl.config import load_scenario
    from wirelessfl.sweep import check_out, make_executor, merge_grids, pending, plan_sweep, preflight, sweep_dir_for

    if resume is not None:
        given = {"SCENARIO": scenario, "--grid": grids or None, "--out": out, "--rounds": rounds, "--seed": seed, "--set": settings or None}
        _refuse_beside_resume(resume, "the scenario and grid in its sweep.yaml", given)
        if not (resume / "sweep.yaml").is_file():
            _fail(f"--resume {resume}: no sweep.yaml there (not a wirelessfl sweep directory)")
        sc = _guard(load_scenario, resume / "sweep.yaml")
        out = resume
    else:
        if scenario is None:
            _fail("give a SCENARIO file to sweep, or --resume SWEEP_DIR to continue an interrupted sweep")
        overrides: dict[str, Any] = {"rounds": rounds, "seeds": [seed] if seed is not None else None}
        sc = _guard(load_scenario, scenario, overrides, settings)
    grid = _guard(merge_grids, sc.sweep, grids)
    if not grid:
        _fail(f"{scenario or resume}: nothing to sweep; give --grid KEY=V1,V2,... or a sweep: block in the scenario")
    if executor is Executor.ray:
        from wirelessfl.sweep.executors import import_ray

        _guard(import_ray)
    plan = _guard(plan_sweep, sc, grid)
    _guard(check_out, out, plan)
    _guard(preflight, plan, out if out is not None and out.exists() else None)
    todo = len(pending(plan, out)) if out is not None else len(plan.units)
    kind = executor.value if executor is not None else ("process" if todo > 1 else "local")
    runner = _guard(make_executor, kind, workers, address, todo)
    sweep_dir = _guard(sweep_dir_for, sc, out)
    try:
        result = _guard(_sweep_with_progress, plan, sweep_dir, runner, quiet or not sys.stderr.isatty())
    except KeyboardInterrupt:
        _fail(f"interrupted; `wirelessfl sweep --resume {sweep_dir}` continues (finished units are kept)", code=130)
    _report_sweep(result)


def _sweep_with_progress(plan, sweep_dir: Path, runner, quiet: bool):
    """A progress bar on a terminal; otherwise (a log, a CI job, ``--quiet``) one line per finished unit,
    so a long sweep is not silent until it ends."""
    from wirelessfl.sweep import pending, run_sweep

    if quiet:
        total, ended = len(pending(plan, sweep_dir)), [0]

        def log(kind: str, unit, payload) -> None:
            if kind not in ("done", "failed", "retry"):
                return
            if kind == "retry":
                line = f"unit {ended[0] + 1}/{total} retrying: {unit.label} ({payload})"
            else:
                ended[0] += 1
                what = f"({payload.wall_s:.1f} s)" if kind == "done" else f"({payload})"
                line = f"unit {ended[0]}/{total} {'done' if kind == 'done' else 'failed'}: {unit.label} {what}"
            err_console.print(escape(line), highlight=False, soft_wrap=True)

        return run_sweep(plan, sweep_dir, runner, log)
    with _progress() as progress:
        task_id = progress.add_task(f"{plan.base.name} units", total=len(pending(plan, sweep_dir)), status="")

        def on_event(kind: str, unit, payload) -> None:
            if kind == "start":
                status = f"running {unit.label}"
            elif kind == "round":
                status = f"{unit.label}: {payload['unit']} round {payload['round']}"
            elif kind == "retry":
                status = f"retrying {unit.label} ({payload})"
            else:
                status = f"{'finished' if kind == 'done' else 'failed'} {unit.label}"
            progress.update(task_id, advance=1 if kind in ("done", "failed") else 0, status=status)

        return run_sweep(plan, sweep_dir, runner, on_event)


def _report_sweep(result) -> None:
    ok = sum(1 for outcome in result.outcomes.values() if outcome.status == "ok")
    console.print(
        escape(
            f"sweep: {ok} of {len(result.outcomes)} units ok ({len(result.computed)} run now, "
            f"{result.trained_units} training runs); {len(result.table)} rows in {result.dir / 'sweep.csv'}"
        ),
        highlight=False,
        soft_wrap=True,
    )
    for note in result.notes:
        _note(note)
    console.print(escape(f"results: {result.dir}"), highlight=False, soft_wrap=True)
    if result.failed:
        _fail(
            f"{len(result.failed)} of {len(result.outcomes)} units failed: {', '.join(result.failed)}; "
            f"see {result.dir / 'summary.md'}",
            code=1,
        )


@app.command()
def tune(
    scenario: Path | None = typer.Argument(None, help="scenario YAML file (leave out with --resume)"),
    out: Path | None = typer.Option(None, "--out", help="new tuning directory (default: <output>/<name>-tune-<timestamp>)"),
    trials: int | None = typer.Option(None, "--trials", min=1, help="trials per curve (sets tune.trials)"),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="rounds of each trial (sets tune.rounds)"),
    executor: Executor | None = typer.Option(
        None, "--executor", help="local, process (the default when more than one trial runs at once) or ray"
    ),
    address: str | None = typer.Option(None, "--address", help="with --executor ray: join this Ray cluster (default: a local Ray)"),
    workers: int | None = typer.Option(None, "--workers", min=1, help="trials run at once (default: one per CPU)"),
    resume: Path | None = typer.Option(None, "--resume", help="continue a killed tuning directory with its own tune.yaml"),
    settings: list[str] | None = typer.Option(None, "--set", help="override a field of the scenario: PATH=VALUE (repeatable)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar; a line per finished trial"),
) -> None:
    """Search each curve's hyper-parameters on the validation split (Optuna TPE, median pruning); write tuned.yaml."""
    from wirelessfl.config import dump_scenario, load_scenario
    from wirelessfl.run.prepare import make_run_dir
    from wirelessfl.tune.study import tune_config

    if resume is not None:
        given = {"SCENARIO": scenario, "--out": out, "--trials": trials, "--rounds": rounds, "--set": settings or None}
        _refuse_beside_resume(resume, "the scenario in its tune.yaml", given)
        if not (resume / "tune.yaml").is_file():
            _fail(f"--resume {resume}: no tune.yaml there (not a wirelessfl tuning directory)")
        sc = _guard(load_scenario, resume / "tune.yaml")
        source = resume / "tune.yaml"
    else:
        if scenario is None:
            _fail("give a SCENARIO file to tune, or --resume TUNE_DIR to continue a killed tuning")
        budget = [f"tune.trials={trials}"] if trials is not None else []
        budget += [f"tune.rounds={rounds}"] if rounds is not None else []
        sc = _guard(load_scenario, scenario, None, [*(settings or []), *budget])
        source = scenario
    if executor is Executor.ray:
        from wirelessfl.sweep.executors import import_ray

        _guard(import_ray)
    cost = _guard(_tune_preflight, sc, source)
    if resume is None:
        run_dir = _guard(make_run_dir, sc, out, dump_scenario(sc), "tune", "tune.yaml", "a killed tuning")
    else:
        from dataclasses import replace

        from wirelessfl.tune.study import trials_finished

        run_dir = resume
        cost = replace(cost, finished=trials_finished(sc, resume))
    _note(cost.line())
    cfg = tune_config(sc)
    at_once = cfg.batch * cost.curves
    kind = executor.value if executor is not None else ("process" if at_once > 1 else "local")
    from wirelessfl.sweep import make_executor

    runner = _guard(make_executor, kind, workers, address, at_once)
    try:
        result = _guard(_tune_with_progress, sc, run_dir, runner, quiet or not sys.stderr.isatty())
    except KeyboardInterrupt:
        _fail(f"interrupted; `wirelessfl tune --resume {run_dir}` continues the studies (finished trials are kept)", code=130)
    for line in (run_dir / "summary.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            console.print(escape(line), highlight=False, soft_wrap=True)
    for note in result.notes:
        _note(note)
    console.print(escape(f"results: {run_dir} (tuned.yaml, study.csv, history.html)"), highlight=False, soft_wrap=True)


def _tune_preflight(sc, source: Path):
    """Before anything is written: every end of every search space builds (data, model, algorithms), and the
    cost of one trial of every curve fits in memory; returns the cost preview."""
    from wirelessfl.config import first_line
    from wirelessfl.learning.data.data_files import missing_dataset
    from wirelessfl.run.build import build_units
    from wirelessfl.run.preflight import check_links
    from wirelessfl.run.prepare import check_cost
    from wirelessfl.tune.study import check_tunable, endpoint_scenario, tune_cost

    missing = missing_dataset(sc.data.dataset, sc.data.root, sc.data.download, sc.data.options)
    if missing is not None:
        raise UserError(f"{source}: {missing}")
    try:
        check_tunable(sc)
        ends = endpoint_scenario(sc)
    except ValueError as err:
        raise UserError(f"{source}: {err}") from None
    try:
        check_links(ends, str(source))
    except ValueError as err:
        raise UserError(str(err)) from None
    check_cost(ends, str(source), probe=False)  # before the ends' data and algorithms are built
    try:
        build_units(ends, ends.seeds[0])
    except ValueError as err:
        message = first_line(str(err), type(err).__name__)
        name = next((a.name for a in ends.algorithms if message.startswith(a.name)), None)
        where = f"tune.algorithms.{name}: an end of its search space is refused: " if name else "tune: "
        raise UserError(f"{source}: {where}{message}") from None
    try:
        return tune_cost(sc)
    except ValueError as err:
        raise UserError(f"{source}: {err}") from None


def _tune_with_progress(sc, run_dir: Path, runner, quiet: bool):
    """A line per finished trial without a terminal; a progress bar of trials on one."""
    from wirelessfl.tune.study import run_tune, targets, tune_config

    from wirelessfl.results.tables import percent

    total = tune_config(sc).trials * len(targets(sc))
    if quiet:
        def log(kind: str, task, payload) -> None:
            if kind == "done":
                value = payload.get("value")
                shown = "n/a" if value is None or value != value else f"{percent(value)}%"
                err_console.print(escape(f"{task.label}: {payload['state']} {shown}"), highlight=False, soft_wrap=True)
            elif kind == "failed":
                err_console.print(escape(f"{task.label}: failed ({payload})"), highlight=False, soft_wrap=True)

        return run_tune(sc, run_dir, runner, log)
    with _progress() as progress:
        task_id = progress.add_task(f"{sc.name} trials", total=total, status="")

        def on_event(kind: str, task, payload) -> None:
            if kind == "round":
                status = f"{task.label} round {payload['round']}"
            elif kind == "start":
                status = f"running {task.label}"
            else:
                status = f"{task.label}: {payload['state'] if isinstance(payload, dict) else 'failed'}"
            progress.update(task_id, advance=1 if kind in ("done", "failed") else 0, status=status)

        return run_tune(sc, run_dir, runner, on_event)


@app.command("list")
def list_components() -> None:
    """Algorithms, datasets, partitioners, models and network presets."""
    from wirelessfl.algorithms.registry import SPECS
    from wirelessfl.learning.catalog import ARCHITECTURES
    from wirelessfl.learning.data.catalog import DATASETS, PARTITIONERS
    from wirelessfl.network import PRESETS

    def section(title: str, rows: list[tuple[str, str]]) -> None:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("what")
        for name, what in rows:
            table.add_row(escape(name), escape(what))  # "[conv 5x5]" is text, not rich markup
        console.print(table)

    section("algorithms", [
        (n, f"{spec.description}; params {spec.hparams}; tune searches "
            + ", ".join(f"{k} {p.describe()}" for k, p in spec.search_space.items()))
        for n, spec in sorted(SPECS.items())
    ])
    section("datasets", [(n, _describe(d)) for n, d in sorted(DATASETS.items())])
    section("partitioners", [(n, _describe(p)) for n, p in sorted(PARTITIONERS.items())])
    section("models", [(n, _describe(m)) for n, m in sorted(ARCHITECTURES.items())])
    section("network presets", [(n, f"{p.to_dict()}") for n, p in sorted(PRESETS.items())])


def _describe(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    parts = [getattr(entry, "description", "") or ""]
    for attr in ("kind", "options", "parameters", "defaults"):
        value = getattr(entry, attr, None)
        if value:
            parts.append(f"{attr}: {value}")
    return "; ".join(p for p in parts if p) or str(entry)


class ImageFormat(str, Enum):
    """Static figure formats ``plot --format`` writes (matplotlib; no browser needed)."""

    png = "png"
    pdf = "pdf"
    svg = "svg"


@app.command()
def plot(
    run_dir: Path = typer.Argument(..., help="a run directory written by simulate, or a sweep directory"),
    timeline: int | None = typer.Option(
        None, "--timeline", metavar="ROUND", help="only re-make timeline.html, the per-client Gantt chart, for this round"
    ),
    image_format: ImageFormat = typer.Option(
        ImageFormat.png, "--format", help="format of the static figures beside the HTML ones (pdf and svg for papers)"
    ),
) -> None:
    """Re-make the figures of a finished run, or the trade-off maps of a sweep (from its sweep.parquet)."""
    from wirelessfl.results.figures import plot_run, plot_timeline
    from wirelessfl.sweep.run import is_sweep_dir, replot_sweep

    if timeline is not None and timeline < 1:
        _fail(f"--timeline must be a round >= 1, got {timeline}")
    if is_sweep_dir(run_dir):
        if timeline is not None:
            _fail(f"--timeline: {run_dir} is a sweep directory; give one of its units/<key> run directories")
        paths, notes = _guard(replot_sweep, run_dir, image_format.value)
    elif timeline is not None:
        written = _guard(_need_run(plot_timeline), run_dir, timeline, image_format.value)
        paths, notes = written.paths, written.notes
    else:
        written = _guard(_need_run(plot_run), run_dir, image_format.value)
        paths, notes = written.paths, written.notes
    for path in paths:
        console.print(escape(str(path)), highlight=False, soft_wrap=True)
    for note in notes:
        _note(note)


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="run directories written by simulate, or sweep directories"),
    target: float | None = typer.Option(None, "--target", help="target accuracy for time-to-target"),
    reproduction: Path | None = typer.Option(
        None, "--reproduction", help="also write the comparison of the runs with their paper (tables, claims) to this file"
    ),
    paper: str | None = typer.Option(
        None, "--paper", help="the paper of --reproduction (default: the one whose scenarios the runs are)"
    ),
    last: int = typer.Option(
        1, "--last", min=1, help="report each seed's accuracies as the mean over the evaluated rounds among the last N"
    ),
) -> None:
    """Re-make summary.md of finished runs (of a sweep: with its table and maps, from its units); with
    --reproduction, compare a paper's scenario runs with the paper. Says which files it rewrote."""
    from wirelessfl.results.figures import prepare_report
    from wirelessfl.results.io import atomic_write_text
    from wirelessfl.results.reproduction import reproduction_markdown
    from wirelessfl.results.tables import check_target
    from wirelessfl.sweep.run import is_sweep_dir, rereport_sweep
    from wirelessfl_papers import papers

    if paper is not None and reproduction is None:
        _fail("--paper needs --reproduction FILE")
    if last != 1 and (sweeps := [str(d) for d in run_dirs if is_sweep_dir(d)]):
        _fail(f"--last applies to run directories, not to sweeps ({', '.join(sweeps)})")
    if target is not None:
        _guard(check_target, target)
    if reproduction is not None and (reproduction.is_dir() or not reproduction.parent.is_dir()):
        _fail(f"--reproduction {reproduction}: {'a folder' if reproduction.is_dir() else 'its folder does not exist'}; give a file to write the page to")
    # every run read and its files made before the first is written: a bad input leaves every folder as it was
    reports = {run_dir: None if is_sweep_dir(run_dir) else _guard(_need_run(prepare_report), run_dir, target, last) for run_dir in run_dirs}
    page = None
    if reproduction is not None:
        command = "wirelessfl report " + " ".join(str(d) for d in run_dirs) + f" --reproduction {reproduction}"
        command += f" --paper {paper}" if paper is not None else ""
        page = _guard(reproduction_markdown, run_dirs, command, papers(), paper)
    for run_dir, prepared in reports.items():
        existed, notes = (run_dir / "summary.md").exists(), []
        if prepared is None:
            result = _guard(rereport_sweep, run_dir, target)
            tables = ", sweep.csv, sweep.parquet" if (run_dir / "units").is_dir() else " (from its sweep.csv)"
            path, also, notes = result.dir / "summary.md", f"{tables} and the trade-off maps", result.notes
        else:
            path, also = _guard(prepared.write), ""
        at = f" with --target {target:g}" if target is not None else ""
        at += f" over the last {last} rounds" if last != 1 else ""
        console.print(escape(f"{'rewrote' if existed else 'wrote'} {path}{also}{at}"), highlight=False, soft_wrap=True)
        for note in notes:
            _note(note)
    if page is not None:
        _guard(atomic_write_text, reproduction, page)
        console.print(escape(str(reproduction)), highlight=False, soft_wrap=True)


def _need_run(fn):
    def wrapped(run_dir: Path, *args):
        if not (run_dir / "trace.csv").exists() and not (run_dir / "trace.parquet").exists():
            raise UserError(f"{run_dir}: no trace.csv here (not a finished wirelessfl run directory)")
        return fn(run_dir, *args)

    return wrapped


def run() -> None:
    """The console entry point: like ``app()``, but typer's usage errors are one line too."""
    try:
        code = app(standalone_mode=False, prog_name="wirelessfl")
    except typer.Abort:
        _print_error("aborted")
        raise SystemExit(1) from None
    except typer.TyperException as err:
        show, exit_code = getattr(err, "show", None), getattr(err, "exit_code", 1)
        if type(err).__name__ == "NoArgsIsHelpError" and show is not None:
            show()
            raise SystemExit(exit_code) from None
        context = getattr(err, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        message = err.format_message() if hasattr(err, "format_message") else str(err)
        _print_error(" ".join(message.split()) + hint)
        raise SystemExit(exit_code) from None
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
