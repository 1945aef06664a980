"""A sweep end to end: units -> executor -> the sweep table, the joined trace, summary.md and figures.

The sweep directory holds ``sweep.yaml`` (the base scenario with the resolved
grid as its ``sweep:`` block, so the file runs the same sweep again),
``units/<key>/`` (each a normal simulate run directory), ``trace.parquet``
(every unit's trace with the axis columns), ``sweep.csv``/``sweep.parquet``
(one row per grid point x curve x seed) and ``summary.md``.

Axis columns hold the values as given; their type is the values' common type:
integers (nullable ``Int64``), numbers (float, ``inf`` read as infinity), else
strings (``streams`` 1, 2, m -> "1", "2", "m"). An algorithm axis is NA on the
rows of other algorithms' curves, and then is not part of the row's ``point``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from wirelessfl.config import Scenario, first_line
from wirelessfl.sweep.executors import Outcome, UnitTask, execute, is_done
from wirelessfl.sweep.grid import SweepError, SweepPlan, UnitSpec, assignment_text, plan_sweep, value_text

TABLE_COLUMNS = (
    "base_profile", "profile", "curve", "algorithm", "variant", "seed", "status", "error", "target",
    "time_to_target", "time_unit", "rounds_to_target", "final_avg_acc", "final_worst_acc", "final_p10_acc",
    "dl_bits", "ul_bits", "total_time", "energy_to_target", "worst_device_energy_to_target", "total_energy",
)
"""Columns after ``point`` and the axis columns (one per grid key)."""


@dataclass
class SweepResult:
    dir: Path
    table: pd.DataFrame
    trace: pd.DataFrame
    axes: list[str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    profile_labels: dict[str, str] = field(default_factory=dict)
    """Panel title per ``networks:`` entry (see :func:`profile_labels`)."""

    @property
    def computed(self) -> list[str]:
        """Keys of the units this call ran (not found finished in the cache)."""
        return [key for key, outcome in self.outcomes.items() if outcome.computed]

    @property
    def trained_units(self) -> int:
        """Training runs this call made (curve x seed, x profile where a deadline needs it)."""
        return sum(outcome.trained_units for outcome in self.outcomes.values())

    @property
    def failed(self) -> list[str]:
        return [f"{self.labels[key]} (units/{key})" for key, o in self.outcomes.items() if o.status == "failed"]

    def figures(self, **choice: Any) -> dict[str, Any]:
        """The trade-off figures (plotly) of the table; ``x``, ``y``, ``facet`` choose the axes."""
        from wirelessfl.results.tradeoff import tradeoff_figures

        return tradeoff_figures(self.table, self.axes, **{"profile_labels": self.profile_labels, **choice})


def check_out(out: Path | None, plan: SweepPlan | None = None) -> None:
    """``out`` must be new, empty, or a directory of the same sweep as ``plan`` (whose finished units are reused).

    Writing another sweep into it would replace its sweep.yaml, table and
    summary and orphan its units; see :func:`sweep_differences` for "same".
    """
    if out is not None and Path(out).exists():
        out = Path(out)
        if not (out.is_dir() and ((out / "sweep.yaml").is_file() or not any(out.iterdir()))):
            raise SweepError(f"--out {out}: already exists and is neither empty nor a sweep directory; choose a new one")
        if plan is not None and (out / "sweep.yaml").is_file():
            differing = sweep_differences(out, plan)
            if differing:
                raise SweepError(
                    f"--out {out}: holds a sweep of another scenario or grid (its sweep.yaml differs in {', '.join(differing)}); "
                    f"choose a new folder, or `wirelessfl sweep --resume {out}` to finish that sweep"
                )


def sweep_differences(sweep_dir: Path, plan: SweepPlan) -> list[str]:
    """The top-level fields in which ``sweep_dir``'s sweep.yaml is not the sweep ``plan`` would run.

    The same sweep: the resolved base scenario (every field but ``sweep:``, all
    defaults written) is equal, and the grid has the same axes in the same order,
    each keeping at least its earlier values. So a grid grown by values reuses
    every finished unit and its table still covers every earlier point; a
    changed scenario, a dropped value, or an added or reordered axis is another sweep.
    """
    from wirelessfl.config import ScenarioError, load_scenario, resolved

    try:
        earlier = resolved(load_scenario(Path(sweep_dir) / "sweep.yaml"))
    except ScenarioError as err:
        raise SweepError(f"--out {sweep_dir}: its sweep.yaml cannot be read ({first_line(str(err))}); choose a new folder") from None
    now = resolved(plan.base)
    differing = [key for key in dict.fromkeys([*earlier, *now]) if key != "sweep" and earlier.get(key) != now.get(key)]
    old_grid, new_grid = earlier.get("sweep") or {}, now.get("sweep") or {}
    grown = list(old_grid) == list(new_grid) and all(
        {value_text(v) for v in values} <= {value_text(v) for v in new_grid[key]} for key, values in old_grid.items()
    )
    return differing if grown else [*differing, "sweep"]


def profile_labels(plan: SweepPlan) -> dict[str, str]:
    """Panel title per ``networks:`` entry: its name and the values that still tell it apart from the others.

    A network axis overrides that field in every entry, so after a grid over
    ``rho`` the entry named "wired" is wired only in its other fields; the title
    shows those (``wired: mu=inf``), or says the grid sets every field the entries
    differ in. One entry: no panels, no labels.
    """
    profiles = plan.base.profiles()
    if len(profiles) < 2:
        return {}
    swept = {axis.key for axis in plan.axes if axis.kind == "network"}
    fields = [_flat(p.to_dict()) for p in profiles]
    differing = [key for key in fields[0] if key not in ("name", "description") and len({repr(f.get(key)) for f in fields}) > 1]
    kept = [key for key in differing if key not in swept]
    labels = {}
    for profile, values in zip(profiles, fields):
        if kept:
            labels[profile.name] = f"{profile.name}: " + ", ".join(f"{key}={_shown(values[key])}" for key in kept)
        else:
            labels[profile.name] = f"{profile.name}: {', '.join(differing) or 'every field'} set by the grid"
    return labels


def _flat(profile: dict[str, Any]) -> dict[str, Any]:
    physical = profile.pop("physical", None) or {}
    return {**profile, **{f"physical.{key}": value for key, value in physical.items()}}


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return value_text(value)


def sweep_dir_for(base: Scenario, out: Path | None) -> Path:
    """Create (or reuse, see ``check_out``) ``out``, else ``<output>/<name>-sweep-<time>``."""
    from wirelessfl.results.io import new_run_dir

    check_out(out)
    if out is None:
        return new_run_dir(Path(base.output), f"{base.name}-sweep")
    out = Path(out)
    if out.exists():
        return out
    try:
        out.mkdir(parents=True)
    except OSError as err:
        raise SweepError(f"--out {out}: cannot create the sweep directory: {err.strerror or err}") from None
    return out


def tasks_of(plan: SweepPlan, sweep_dir: Path) -> list[UnitTask]:
    seen: dict[str, UnitTask] = {}
    for unit in plan.units:
        seen.setdefault(unit.key, UnitTask(unit.key, unit.label, str(sweep_dir / "units" / unit.key), unit.scenario))
    return list(seen.values())


def pending(plan: SweepPlan, sweep_dir: Path) -> list[UnitTask]:
    return [task for task in tasks_of(plan, sweep_dir) if not is_done(Path(task.dir))]


def preflight(plan: SweepPlan, sweep_dir: Path | None) -> None:
    """Check that each unit still to run fits in memory (``wirelessfl.cost.check_run``, as ``simulate`` does, before
    anything of it is allocated), then build its data, model and every algorithm, so a bad value fails before any
    training.

    ``sweep_dir`` None (not created yet): every unit is still to run. Each unit is checked alone: units that
    run at once share the memory.
    """
    from wirelessfl.learning.data.guard import check_data

    algorithm = [f"{a.key}={','.join(map(value_text, a.values))}" for a in plan.axes if a.kind == "algorithm"]
    todo = {task.key for task in pending(plan, sweep_dir)} if sweep_dir is not None else {u.key for u in plan.units}
    for unit in plan.units:  # data too big to build, from the spec's sizes, before torch loads
        if unit.key in todo:
            try:
                check_data(unit.scenario)
            except ValueError as err:
                where = " ".join(([assignment_text(unit.assignment)] if unit.assignment else []) + algorithm)
                raise SweepError(f"--grid {where}: {err}" if where else str(err)) from None
    from wirelessfl.cost import check_run
    from wirelessfl.run.build import build_units
    from wirelessfl.run.preflight import analog_cells_problem

    checked: set[str] = set()
    for unit in plan.units:
        if unit.key not in todo or unit.key in checked:
            continue
        checked.add(unit.key)
        where = " ".join(([assignment_text(unit.assignment)] if unit.assignment else []) + algorithm)
        try:
            check_run(unit.scenario, probe=False)
            units = build_units(unit.scenario, unit.scenario.seeds[0])
            problem = analog_cells_problem(unit.scenario, units[0].algorithm.ctx.arch.param_count)
            if problem is not None:
                raise ValueError(problem)
        except ValueError as err:
            message = first_line(str(err), type(err).__name__)
            raise SweepError(f"--grid {where}: {message}" if where else message) from None


def run_sweep(
    plan: SweepPlan,
    sweep_dir: Path,
    executor,
    on_event: Callable[[str, UnitTask, Any], None] | None = None,
    png: bool = True,
) -> SweepResult:
    """Run the units not yet finished, then write the table, trace, summary and figures."""
    from wirelessfl.config import dump_scenario
    from wirelessfl.results.io import atomic_write_frame, atomic_write_text

    sweep_dir = Path(sweep_dir)
    (sweep_dir / "units").mkdir(parents=True, exist_ok=True)
    atomic_write_text(sweep_dir / "sweep.yaml", dump_scenario(plan.base))
    todo = pending(plan, sweep_dir)
    outcomes = execute(todo, executor, on_event) if todo else {}
    for task in tasks_of(plan, sweep_dir):
        outcomes.setdefault(task.key, Outcome("ok", "", 0))
    table, trace, units = collect(plan, sweep_dir, outcomes)
    atomic_write_frame(sweep_dir / "sweep.csv", table)
    atomic_write_frame(sweep_dir / "sweep.parquet", table)
    if not trace.empty:
        atomic_write_frame(sweep_dir / "trace.parquet", trace)
    axes = list(plan.grid)
    result = SweepResult(sweep_dir, table, trace, axes, outcomes, {u.key: u.label for u in plan.units})
    result.profile_labels = profile_labels(plan)
    result.notes = _figures(sweep_dir, table, axes, "png" if png else None, result.profile_labels)
    atomic_write_text(sweep_dir / "summary.md", summary_markdown(plan, result, units))
    return result


def is_sweep_dir(directory: Path) -> bool:
    directory = Path(directory)
    return (directory / "sweep.yaml").is_file() and any((directory / f"sweep.{ext}").is_file() for ext in ("parquet", "csv"))


def read_table(sweep_dir: Path) -> pd.DataFrame:
    """The sweep table: ``sweep.parquet``, or ``sweep.csv`` where only that was kept (a folder committed as text)."""
    parquet = Path(sweep_dir) / "sweep.parquet"
    return pd.read_parquet(parquet) if parquet.is_file() else pd.read_csv(Path(sweep_dir) / "sweep.csv")


def _axis_value(value: Any) -> Any:
    """A unit's or a table cell's axis value in one comparable form (numbers as floats, the rest as text)."""
    value = value.item() if hasattr(value, "item") else value
    number = _number(value)
    return number if number is not None else value_text(value)


def units_of_rows(plan: SweepPlan, table: pd.DataFrame) -> list[str]:
    """Each table row's unit, from its values of the axes that make units (every row of a unit has them)."""
    keys = [key for key, _ in plan.units[0].assignment]
    index = {tuple(_axis_value(v) for _, v in unit.assignment): unit.key for unit in plan.units}
    rows = table[keys].itertuples(index=False, name=None) if keys else [()] * len(table)
    units = [index.get(tuple(_axis_value(v) for v in values)) for values in rows]
    if None in units:
        values = dict(zip(keys, next(v for v, u in zip(table[keys].itertuples(index=False, name=None), units) if u is None)))
        raise SweepError(f"the sweep table: a row has {values}, which no unit of sweep.yaml's grid has; is the table from this sweep?")
    return units


def load_plan(sweep_dir: Path) -> SweepPlan:
    """The plan of a sweep directory, from its sweep.yaml (the base scenario with its grid)."""
    from wirelessfl.config import load_scenario

    return plan_sweep(load_scenario(Path(sweep_dir) / "sweep.yaml"))


def replot_sweep(sweep_dir: Path, image_format: str = "png") -> tuple[list[Path], list[str]]:
    """Re-make the trade-off maps of a sweep directory from its sweep.parquet, as HTML and ``image_format``;
    (files written, notes)."""
    from wirelessfl.results.tradeoff import FIGURES

    sweep_dir = Path(sweep_dir)
    plan = load_plan(sweep_dir)
    table = read_table(sweep_dir)
    files = _figure_files(FIGURES, image_format)
    began = {name: _mtime(sweep_dir / name) for name in files}
    notes = _figures(sweep_dir, table, list(plan.grid), image_format, profile_labels(plan))
    written = [sweep_dir / name for name in files if _mtime(sweep_dir / name) not in (None, began[name])]
    return written, notes


def _figure_files(names, image_format: str) -> list[str]:
    return [f"{name}.{ext}" for name in names for ext in ("html", image_format)]


def _mtime(path: Path) -> int | None:
    return path.stat().st_mtime_ns if path.exists() else None


def rereport_sweep(sweep_dir: Path, target: float | None = None, png: bool = True) -> SweepResult:
    """Re-make a sweep's table, trace, summary.md and maps from its finished units, at ``target`` (default: sweep.yaml's).

    Nothing is trained: a unit without its trace is a failed row ("not finished").
    The target changes the time-to-target columns, so the table is re-made with the summary.
    A folder that kept only its table (no ``units/``, as the committed examples) gets its summary and maps
    from that table, which it leaves as it is; another target needs the units' traces and is refused.
    """
    from wirelessfl.results.io import atomic_write_frame, atomic_write_text

    sweep_dir = Path(sweep_dir)
    plan = load_plan(sweep_dir)
    if not (sweep_dir / "units").is_dir():
        return _report_from_table(plan, sweep_dir, target, png)
    unfinished = f"not finished; `wirelessfl sweep --resume {sweep_dir}` runs it"
    outcomes = {
        task.key: Outcome("ok") if is_done(Path(task.dir)) else Outcome("failed", unfinished) for task in tasks_of(plan, sweep_dir)
    }
    table, trace, units = collect(plan, sweep_dir, outcomes, target)
    atomic_write_frame(sweep_dir / "sweep.csv", table)
    atomic_write_frame(sweep_dir / "sweep.parquet", table)
    if not trace.empty:
        atomic_write_frame(sweep_dir / "trace.parquet", trace)
    axes = list(plan.grid)
    result = SweepResult(sweep_dir, table, trace, axes, outcomes, {u.key: u.label for u in plan.units}, profile_labels=profile_labels(plan))
    result.notes = _figures(sweep_dir, table, axes, "png" if png else None, result.profile_labels)
    atomic_write_text(sweep_dir / "summary.md", summary_markdown(plan, result, units))
    return result


def _report_from_table(plan: SweepPlan, sweep_dir: Path, target: float | None, png: bool) -> SweepResult:
    from wirelessfl.results.io import atomic_write_text

    if target is not None:
        raise SweepError(f"--target: {sweep_dir} kept only its table (no units/ folder); another target needs the units' traces")
    table = read_table(sweep_dir)
    units = units_of_rows(plan, table)
    finished = {key for key, status in zip(units, table["status"]) if status == "ok"}
    outcomes = {u.key: Outcome("ok" if u.key in finished else "failed") for u in plan.units}
    result = SweepResult(
        sweep_dir, table, pd.DataFrame(), list(plan.grid), outcomes, {u.key: u.label for u in plan.units},
        profile_labels=profile_labels(plan),
    )
    result.notes = _figures(sweep_dir, table, result.axes, "png" if png else None, result.profile_labels)
    atomic_write_text(sweep_dir / "summary.md", summary_markdown(plan, result, units, from_table=True))
    return result


def _figures(
    sweep_dir: Path, table: pd.DataFrame, axes: list[str], image_format: str | None, labels: dict[str, str] | None = None
) -> list[str]:
    try:
        from wirelessfl.results.tradeoff import write_tradeoff_figures
    except ImportError:
        return ["trade-off figures skipped: wirelessfl.results.tradeoff is not available."]
    if not (table["status"] == "ok").any():
        return ["trade-off figures skipped: no unit finished."]
    try:
        return list(write_tradeoff_figures(sweep_dir, table, axes, image_format=image_format, profile_labels=labels or {}))
    except ValueError as err:
        return [f"trade-off figures skipped: {err}"]


def _typed(values: list[Any]) -> pd.Series:
    """One axis column: Int64 if every value is an int, float if every value is a number or inf, else strings."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.Series(values, dtype="Int64")
    if present and all(_number(v) is not None for v in present):
        return pd.Series([math.nan if v is None else _number(v) for v in values], dtype="float64")
    return pd.Series([None if v is None else value_text(v) for v in values], dtype="object")


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity", "-inf", "-infinity"):
        return -math.inf if value.strip().startswith("-") else math.inf
    return None


def _point_columns(plan: SweepPlan, assignments: list[dict[str, Any]]) -> pd.DataFrame:
    """``point`` and one typed column per grid key, from each row's axis values."""
    keys = list(plan.grid)
    columns = {"point": [" ".join(f"{k}={value_text(a[k])}" for k in keys if k in a) for a in assignments]}
    for key in keys:
        columns[key] = _typed([a.get(key) for a in assignments])
    return pd.DataFrame({name: pd.Series(values).reset_index(drop=True) for name, values in columns.items()})


PARAM_PREFIX = "params."
"""Columns ``params.<key>``: the value of each parameter a curve's scenario sets (its params and its variant's),
empty where it sets none: what reads a curve's parameters reads these, never the curve's name."""


def _param_columns(params: list[dict[str, Any]]) -> pd.DataFrame:
    """One typed ``params.<key>`` column per parameter any curve sets, in the order they first appear."""
    keys = list(dict.fromkeys(key for given in params for key in given))
    return pd.DataFrame({PARAM_PREFIX + key: _typed([given.get(key) for given in params]) for key in keys})


def collect(
    plan: SweepPlan, sweep_dir: Path, outcomes: dict[str, Outcome], target: float | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The sweep table (failed units included, metrics NaN), the joined trace of the finished units, each row's unit.

    ``target``: the accuracy the time-to-target columns use (default: each unit's ``target_accuracy``).
    """
    from wirelessfl.results.io import read_trace
    from wirelessfl.results.tables import time_to_target

    rows, assignments, params, traces, units = [], [], [], [], []
    for unit in plan.units:
        outcome = outcomes[unit.key]
        per_curve = plan.curve_axes(unit)
        sc = unit.scenario
        goal = float(sc.target_accuracy if target is None else target)
        entries = [(a.name, v, c, p) for a in sc.algorithms for v, c, p in a.expand()]
        reached: dict[tuple[str, str, int], tuple[float, float]] = {}
        final: dict[tuple[str, str, int], dict[str, float]] = {}
        if outcome.status == "ok":
            trace = read_trace(sweep_dir / "units" / unit.key)
            for seed, rows_of_seed in trace.groupby("seed", sort=False):
                hits = time_to_target(rows_of_seed, goal)
                for hit in hits.itertuples():
                    reached[(hit.profile, hit.curve, int(seed))] = (hit.time, hit.round)
            for (profile, curve, seed), group in trace.sort_values("round", kind="stable").groupby(["profile", "curve", "seed"], sort=False):
                last = group.iloc[-1]
                final[(profile, curve, int(seed))] = {
                    "time_unit": last["time_unit"], "final_avg_acc": float(last["avg_acc"]),
                    "final_worst_acc": float(last["worst_acc"]), "final_p10_acc": float(last["p10_acc"]),
                    "dl_bits": float(group["dl_bits"].sum()), "ul_bits": float(group["ul_bits"].sum()),
                    "total_time": float(last["time"]),
                    **_energy_metrics(group, goal),
                }
            traces.append(_trace_with_axes(plan, unit, trace))
        for point in plan.profiles:
            for algorithm, variant, curve, given in entries:
                for seed in sc.seeds:
                    key = (point.name, curve, seed)
                    ok = outcome.status == "ok"
                    time, rounds = reached.get(key, (math.nan, math.nan))
                    metrics = final.get(key, {})
                    units.append(unit.key)
                    params.append(given)
                    assignments.append(dict(point.assignment) | dict(unit.assignment) | dict(per_curve.get(curve, ())))
                    rows.append({
                        "base_profile": point.base, "profile": point.name, "curve": curve, "algorithm": algorithm,
                        "variant": variant, "seed": seed, "status": outcome.status, "error": "" if ok else outcome.error,
                        "target": goal, "time_to_target": float(time),
                        "time_unit": metrics.get("time_unit", point.time_unit), "rounds_to_target": float(rounds),
                        **{c: metrics.get(c, math.nan) for c in TABLE_COLUMNS[12:]},
                    })
    table = pd.concat(
        [_point_columns(plan, assignments), pd.DataFrame(rows, columns=list(TABLE_COLUMNS)), _param_columns(params)], axis=1
    )
    return table, (pd.concat(traces, ignore_index=True) if traces else pd.DataFrame()), units


def _energy_metrics(rows: pd.DataFrame, target: float) -> dict[str, float]:
    """Devices' energy (J) until the average accuracy first reached ``target`` (all and the worst device), and in all;
    NaN for a unit written before device energy."""
    if "cum_energy_j" not in rows:
        return {"energy_to_target": math.nan, "worst_device_energy_to_target": math.nan, "total_energy": math.nan}
    hits = rows[rows["avg_acc"] >= target]
    first = hits.iloc[0] if len(hits) else None
    return {
        "energy_to_target": float(first["cum_energy_j"]) if first is not None else math.nan,
        "worst_device_energy_to_target": float(first["cum_energy_max_j"]) if first is not None else math.nan,
        "total_energy": float(rows["cum_energy_j"].iloc[-1]),
    }


def _trace_with_axes(plan: SweepPlan, unit: UnitSpec, trace: pd.DataFrame) -> pd.DataFrame:
    profiles = {p.name: p for p in plan.profiles}
    per_curve = plan.curve_axes(unit)
    assignments = [
        dict(profiles[profile].assignment) | dict(unit.assignment) | dict(per_curve.get(curve, ()))
        for profile, curve in zip(trace["profile"], trace["curve"])
    ]
    extra = _point_columns(plan, assignments)
    extra.insert(1 + len(plan.grid), "base_profile", [profiles[p].base for p in trace["profile"]])
    extra["unit"] = unit.key
    return pd.concat([trace.reset_index(drop=True), extra], axis=1)


def _mean_text(mean: float, half: float) -> str:
    return f"{mean:.1f}" if half != half else f"{mean:.1f} ± {half:.1f}"


def summary_markdown(plan: SweepPlan, result: SweepResult, units: list[str], from_table: bool = False) -> str:
    """Per cell (unit x profile) the curve that reaches the target first, a tie when the seeds do not separate it
    from the runner-up, the references beside; the failed units. ``from_table``: made from sweep.csv alone."""
    from wirelessfl.results.tables import markdown_table
    from wirelessfl.results.intervals import CONFIDENCE, interval_half_width, paired_difference
    from wirelessfl.results.tradeoff import REFERENCE_ALGORITHMS, is_tie

    table = result.table
    done = sum(1 for o in result.outcomes.values() if o.status == "ok")
    made = (
        f"{len(result.outcomes)} units ({done} finished, {len(result.failed)} failed), summarised from sweep.csv "
        "(the units' traces are not in this folder); "
        if from_table
        else f"{len(result.outcomes)} units ({len(result.computed)} run now, {done - len(result.computed)} from the cache, "
        f"{len(result.failed)} failed); {result.trained_units} training runs now; "
    )
    lines = [
        f"# Sweep {plan.base.name}",
        "",
        made + f"{len(plan.profiles)} profiles per unit; axes: "
        + ", ".join(f"{a.key} ({a.kind}, {len(a.values)} values)" for a in plan.axes)
        + ".",
        "",
        f"## Fastest curve per cell (time to {' / '.join(f'{t:.0%}' for t in dict.fromkeys(table['target']))} average accuracy, "
        f"mean over seeds ± {CONFIDENCE:.0%} t-interval; NaN unless every seed reached it)",
        "",
        "A tie names the runner-up when the 95% interval of its seed-by-seed time difference from the best holds 0 "
        "(every curve of a seed shares its random numbers): the seeds do not separate them. The runner-up column gives "
        "that difference (mean ± 95% t-interval, from two seeds on) when every seed of both reached the target. "
        f"{', '.join(sorted(REFERENCE_ALGORITHMS))} (knows the true groups) is shown beside, never the best curve.",
        "",
    ]
    body = []
    ok = table.assign(_unit=units)
    ok = ok[ok["status"] == "ok"]
    for unit in plan.units:
        if result.outcomes[unit.key].status != "ok":
            continue
        for point in plan.profiles:
            cell = ok[(ok["profile"] == point.name) & (ok["_unit"] == unit.key)]
            per_curve = cell.groupby("curve", sort=False).agg(
                time=("time_to_target", lambda s: s.mean() if s.notna().all() else math.nan),
                half=("time_to_target", lambda s: interval_half_width(s.to_numpy(dtype=float)) if s.notna().all() else math.nan),
                seeds=("time_to_target", "size"), reached=("time_to_target", "count"),
                avg=("final_avg_acc", "mean"), worst=("final_worst_acc", "mean"), unit=("time_unit", "first"),
                reference=("algorithm", lambda s: str(s.iloc[0]) in REFERENCE_ALGORITHMS),
            )
            per_curve["seed_times"] = cell.groupby("curve", sort=False)[["seed", "time_to_target"]].apply(
                lambda g: dict(zip(g["seed"], g["time_to_target"]))
            )
            contest = per_curve[~per_curve["reference"]]
            if contest.empty:
                continue
            reached = contest["time"].notna().any()
            ranked = contest.sort_values(["time", "avg"], ascending=[True, False], na_position="last")
            best = ranked.index[0] if reached else contest["avg"].idxmax()
            row = per_curve.loc[best]
            where = " ".join(x for x in (assignment_text(point.assignment), assignment_text(unit.assignment)) if x)
            when = f"{_mean_text(row.time, row.half)} {row.unit}" if reached else "not reached (best final avg acc shown)"
            tie = ranked.index[1] if reached and is_tie(ranked) else ""
            margin = ""
            if reached and len(ranked) > 1 and ranked["time"].iloc[1] == ranked["time"].iloc[1]:
                gap, half = paired_difference(ranked["seed_times"].iloc[1], ranked["seed_times"].iloc[0])
                margin = f"{ranked.index[1]}: +{_mean_text(gap, half)}"
            refs = "; ".join(
                f"{name}: {_mean_text(r.time, r.half) + ' ' + r.unit if r.time == r.time else 'not reached'}"
                for name, r in per_curve[per_curve["reference"]].iterrows()
            )
            body.append([where or "-", point.base, best, when, tie, margin, f"{row.avg:.1%}", f"{row.worst:.1%}", refs])
    lines.append(markdown_table(
        ["point", "base profile", "best curve", "time to target", "tie with", "runner-up - best, seed by seed", "final avg acc",
         "final worst acc", "beside (reference)"], body,
    ))  # fmt: skip
    lines += ["", "## Failed units", ""]
    failed = [(key, o) for key, o in result.outcomes.items() if o.status == "failed"]
    lines += [
        f"- {result.labels[key]} (units/{key}){f', after {o.attempts} attempts' if o.attempts else ''}: {o.error}" for key, o in failed
    ] or ["none"]
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"

