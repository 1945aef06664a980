"""Reproduction pages: our runs of a paper's scenarios beside the paper's numbers and claims.

The machinery is generic and knows no paper. The papers live outside this
package, one module each in ``wirelessfl_papers/``, which holds the paper's tables
as data (:class:`PaperTable`) and its claims as functions of runs (:class:`Claim`)
and exposes them as ``PAPER``; ``wirelessfl_papers.papers()`` collects them. Given
that registry, :func:`paper_of` finds the paper a run belongs to by its scenario
name, so adding a paper adds a module there and nothing here. ``wirelessfl report
RUN_DIR... --reproduction FILE [--paper NAME]`` writes the page.

Every verdict is computed from run directories written by ``wirelessfl simulate``;
nothing is typed in except the paper's own numbers and claims. Accuracies are the
seed-mean of each curve's final round (first network profile), in percent.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from wirelessfl.results.energy import energy_comparison_md
from wirelessfl.results.intervals import interval_half_width, paired_difference
from wirelessfl.results.io import CLIENT_FILES, read_clients, read_trace
from wirelessfl.results.tables import last_rounds_rows, markdown_table

PAPERS_DIR_ENV_VAR = "WIRELESSFL_PAPERS"
DEFAULT_PAPERS_DIR = "../shared/papers"
"""The offline machines' copy of the papers' texts, relative to the repository root."""

ACCURACY_COLUMNS = ("avg_acc", "worst_acc", "p10_acc", "unseen_acc")
"""Trace columns averaged into :attr:`Run.final` (in percent) when the trace has them."""


@dataclass(frozen=True)
class Verdict:
    """``holds`` is None when the run lacks what the claim needs."""

    holds: bool | None
    evidence: str

    def __post_init__(self) -> None:
        if self.holds is not None:
            object.__setattr__(self, "holds", bool(self.holds))


@dataclass
class Run:
    """One run directory: seed-mean final accuracies (first profile) and its trace."""

    directory: Path
    trace: pd.DataFrame
    final: pd.DataFrame
    diagnostics: dict
    runtime: dict
    labels: dict[str, str] = field(default_factory=dict)
    """Curve labels that stand in for a method's own (see :meth:`with_label`)."""
    groups: np.ndarray | None = None
    """Each client's ground-truth group (seed 0), from the run's per-client table."""
    spread: pd.DataFrame | None = None
    """Half-width of the 95% Student-t interval over seeds of each curve's final accuracies (percent; NaN
    with one seed; ``results.intervals``)."""
    per_seed: pd.DataFrame | None = None
    """Each (curve, seed)'s final accuracies in percent, the rows :attr:`final` averages."""

    @classmethod
    def load(cls, directory: Path) -> Run:
        run = cls.from_trace(
            read_trace(directory), directory, _json(directory / "diagnostics.json"), _json(directory / "runtime.json")
        )
        if any((directory / name).exists() for name in CLIENT_FILES):
            clients = read_clients(directory)
            seed0 = clients[clients["seed"] == 0].drop_duplicates("client").sort_values("client")
            if len(seed0):
                run = replace(run, groups=seed0["group"].to_numpy())
        return run

    @classmethod
    def from_trace(
        cls, trace: pd.DataFrame, directory: Path = Path("."), diagnostics=None, runtime=None, last_rounds: int = 1
    ) -> Run:
        """A run from an in-memory trace (``simulate(...).trace``); accuracies in percent, each seed's taken
        over the evaluated rounds among its last ``last_rounds`` (1: the last round)."""
        final, spread, per_seed = _finals(trace, last_rounds)
        return cls(directory, trace, final, diagnostics or {}, runtime or {}, spread=spread, per_seed=per_seed)

    def over_last(self, last_rounds: int) -> Run:
        """The same run with its accuracies averaged over the evaluated rounds among the last ``last_rounds``."""
        final, spread, per_seed = _finals(self.trace, last_rounds)
        return replace(self, final=final, spread=spread, per_seed=per_seed)

    @property
    def scenario(self) -> str:
        return str(self.trace["scenario"].iloc[0])

    def acc(self, curve: str, column: str = "avg_acc") -> float | None:
        """Seed-mean final ``column`` of ``curve`` in percent; None when the run lacks it (or it is NaN)."""
        if curve not in self.final.index or column not in self.final.columns:
            return None
        value = float(self.final.loc[curve, column])
        return None if math.isnan(value) else value

    def interval(self, curve: str, column: str = "avg_acc") -> float | None:
        """Half-width of :meth:`acc`'s 95% interval over seeds in points; None with one seed or without it."""
        if self.acc(curve, column) is None or self.spread is None:
            return None
        half = float(self.spread.loc[curve, column])
        return None if math.isnan(half) else half

    def paired(self, a: str, b: str, column: str = "avg_acc") -> tuple[float, float] | None:
        """``a - b`` seed by seed in points: its mean and the half-width of its 95% interval; None without two
        seeds both curves ran. Where every curve of a seed shares its random numbers (the run's provenance.json),
        this difference is free of the seed-to-seed spread that :meth:`interval` carries; in an older run it is
        still a fair test, only wider."""
        if self.per_seed is None or column not in self.per_seed.columns:
            return None
        values = self.per_seed[column].unstack("curve")
        if a not in values.columns or b not in values.columns:
            return None
        mean, half = paired_difference(values[a].to_dict(), values[b].to_dict())
        return None if math.isnan(half) else (mean, half)

    def acc_text(self, curve: str, column: str = "avg_acc") -> str:
        """:meth:`acc` as a table cell, with `` ± `` its 95% interval over seeds when the run has several."""
        mean, half = self.acc(curve, column), self.interval(curve, column)
        return pp(mean) if half is None else f"{mean:.1f} ± {half:.1f}"

    def label(self, method: str) -> str:
        """The curve label that the claims read for ``method``: its own unless :meth:`with_label` replaced it."""
        return self.labels.get(method, method)

    def with_label(self, method: str, label: str) -> Run:
        """The same run, with the claims reading ``label`` where they ask for ``method`` (e.g. our variant)."""
        return replace(self, labels={**self.labels, method: label})

    def seeds(self) -> int:
        return int(self.trace["seed"].nunique())

    def rounds(self) -> int:
        return int(self.trace["round"].max())


def _finals(trace: pd.DataFrame, last_rounds: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per curve (first profile): the seed mean of each accuracy column (percent) and the last round, the
    half-width of each mean's 95% interval over seeds, and the per-seed values (indexed by curve and seed)."""
    first = trace["profile"].iloc[0]
    rows = trace[trace["profile"] == first]
    columns = [c for c in ACCURACY_COLUMNS if c in rows.columns]
    per_seed = last_rounds_rows(rows, columns, last_rounds)
    by_curve = per_seed.groupby("curve", sort=False)[columns + ["round"]]
    final, spread = by_curve.mean(), by_curve.agg(interval_half_width)
    final[columns] *= 100
    spread[columns] *= 100
    per_seed = per_seed.set_index(["curve", "seed"])[columns] * 100
    return final, spread, per_seed


Runs = Mapping[str, Run]
"""The runs of one page, by scenario name."""


@dataclass(frozen=True)
class Claim:
    """One claim of the paper; ``check`` takes the scenario's Run, or for several scenarios the Runs present."""

    scenario: str | tuple[str, ...]
    text: str
    check: Callable[..., Verdict]
    where: str = ""
    """The claims table's scenario cell; default: the scenarios' titles."""

    @property
    def scenarios(self) -> tuple[str, ...]:
        return (self.scenario,) if isinstance(self.scenario, str) else tuple(self.scenario)

    def verdict(self, runs: Runs) -> Verdict:
        if isinstance(self.scenario, str):
            run = runs.get(self.scenario)
            return self.check(run) if run is not None else Verdict(None, "scenario not run")
        present = {name: runs[name] for name in self.scenario if name in runs}
        return self.check(present) if present else Verdict(None, "no scenario of the claim run")


@dataclass(frozen=True)
class TableRow:
    """One method of a paper table: our curve label, the paper's numbers (None: not reported), the paper's name."""

    curve: str
    paper: tuple[float | None, ...]
    name: str = ""


@dataclass(frozen=True)
class PaperTable:
    """A paper table beside the same numbers from our run."""

    caption: str
    paper_columns: tuple[str, ...]
    ours: tuple[tuple[str, str], ...]
    """(header, trace column) of each measured column."""
    rows: tuple[TableRow, ...]
    others: bool = True
    """Also list the run's curves the rows do not name, marked as ours."""
    digits: int = 1
    """Decimals of the paper's numbers, as the paper prints them."""


@dataclass(frozen=True)
class Section:
    """One scenario of the paper: its tables and what the paper's numbers rest on."""

    scenario: str
    title: str
    tables: tuple[PaperTable, ...] = ()
    paper_runs: str = "not stated"
    scenario_file: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paper:
    """A paper's page: its scenarios (one section each), claims and the text above them."""

    name: str
    title: str
    source: str
    """The paper's text file, in :func:`papers_dir`."""
    sections: tuple[Section, ...]
    claims: tuple[Claim, ...]
    intro: tuple[str, ...] = ()
    render: Callable[[Paper, Runs, str], str] | None = None
    """A page of its own instead of :func:`paper_markdown`."""
    why: str = ""
    """Where the claims that do not hold are measured (a doc and section), printed under them."""
    last_rounds: int = 1
    """Our accuracies are each seed's mean over the evaluated rounds among the last ``last_rounds``, as the
    paper averages its own (1: the last round)."""

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(section.scenario for section in self.sections)

    def section(self, scenario: str) -> Section:
        return next(s for s in self.sections if s.scenario == scenario)

    def markdown(self, runs: Runs, command: str) -> str:
        return (self.render or paper_markdown)(self, runs, command)


def papers_dir() -> str:
    """Where the papers' texts live, as the pages name it: ``$WIRELESSFL_PAPERS``, else ``../shared/papers``."""
    return os.environ.get(PAPERS_DIR_ENV_VAR) or DEFAULT_PAPERS_DIR


def paper_text(paper: Paper) -> str:
    """The path of the paper's text, as a page's "Paper:" line names it."""
    return f"{papers_dir().rstrip('/')}/{paper.source}"


Registry = Mapping[str, Paper]
"""Every paper by name (``wirelessfl_papers.papers()``)."""


def paper_of(papers: Registry, scenario: str) -> Paper | None:
    """The paper whose scenarios include ``scenario``; None when no paper lists it."""
    return next((p for p in papers.values() if scenario in p.scenarios), None)


def get_paper(papers: Registry, name: str) -> Paper:
    if name not in papers:
        raise ValueError(f"--paper must be one of {sorted(papers)}, got {name!r}")
    return papers[name]


# ---- helpers for claims and pages --------------------------------------------------------------


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def pp(value: float | None) -> str:
    """An accuracy in percent, one decimal; 'n/a' when missing."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def need(*values) -> bool:
    return all(v is not None for v in values)


def seeds_text(run: Run) -> str:
    return f"on {run.seeds()} seed(s)"


def within_intervals(
    run: Run, pairs: Sequence[tuple[str, str]], names: Mapping[str, str] | None = None, column: str = "avg_acc"
) -> str:
    """``"; within the 95% intervals: A vs B (A - B seed by seed: +d ± h), ..."`` for the pairs of curves
    whose intervals over seeds of ``column`` overlap (a gap a reader should not take as a ranking), each with
    its per-seed difference (:meth:`Run.paired`), which separates them when its interval excludes 0; empty
    with one seed or when every gap is clear."""
    names = names or {}
    close = []
    for a, b in pairs:
        values = (run.acc(a, column), run.acc(b, column), run.interval(a, column), run.interval(b, column))
        if all(v is not None for v in values) and abs(values[0] - values[1]) <= values[2] + values[3]:
            paired = run.paired(a, b, column)
            detail = "" if paired is None else f" ({names.get(a, a)} - {names.get(b, b)} seed by seed: {paired[0]:+.1f} ± {paired[1]:.1f})"
            close.append(f"{names.get(a, a)} vs {names.get(b, b)}{detail}")
    return f"; within the 95% intervals: {', '.join(close)}" if close else ""


def verdict_cell(verdict: Verdict) -> str:
    return {True: "holds", False: "**does not hold**", None: "not checked"}[verdict.holds]


def runtime_line(run: Run) -> str:
    if not run.runtime:
        return "training wall time: not recorded (run made before runtime.json existed)"
    wall = sum(u["wall_s"] for u in run.runtime.values())
    samples = sum(u["rounds"] * u["train_samples_per_round"] for u in run.runtime.values())
    return f"training wall time {wall / 60:.1f} min for {len(run.runtime)} runs, {samples / wall:,.0f} local-training samples/s"


def setup_line(directory: Path) -> str:
    """Data, split and training of the run, from its resolved scenario.yaml."""
    path = directory / "scenario.yaml"
    if not path.is_file():
        return "no scenario.yaml in the run directory"
    sc = yaml.safe_load(path.read_text())
    data, training = sc.get("data", {}), sc.get("training", {})
    steps = " + ".join(
        step["name"] + "".join(f" {k}={v}" for k, v in step.items() if k != "name") for step in data.get("partition", [])
    )
    dataset = " ".join(str(part) for part in (data.get("dataset"), data.get("options")) if part)
    return (
        f"{dataset}, {data.get('clients')} users, samples {data.get('samples')}, "
        f"partition {steps}, train/val/test {data.get('split')}; {sc.get('model', {}).get('name')}, "
        f"{training.get('local_epochs')} local epoch(s) of batch {training.get('batch_size')}, "
        f"SGD lr {training.get('lr')} momentum {training.get('momentum')}"
    )


def curve_training(directory: Path, curve: str) -> dict:
    """The training settings ``curve`` ran with, from the run's resolved scenario.yaml: the scenario's
    ``training`` under the curve's own override; empty without that file or without that curve."""
    path = directory / "scenario.yaml"
    if not path.is_file():
        return {}
    sc = yaml.safe_load(path.read_text())
    for algorithm in sc.get("algorithms", []):
        if (algorithm.get("label") or algorithm.get("name")) == curve:
            return {**sc.get("training", {}), **(algorithm.get("training") or {})}
    return {}


def not_run_line(section: Section) -> str:
    how = f"`wirelessfl simulate {section.scenario_file}`" if section.scenario_file else f"simulate scenario `{section.scenario}`"
    return f"Not run yet: {how}, then add the run directory to the report command."


# ---- the generic page --------------------------------------------------------------------------


def table_markdown(table: PaperTable, run: Run) -> list[str]:
    header = ["method"] + [f"paper {c} (%)" for c in table.paper_columns] + [f"our {h} (%)" for h, _ in table.ours]
    rows = []
    for row in table.rows:
        name = f"{row.curve} ({row.name})" if row.name and row.name != row.curve else row.curve
        paper = ["-" if v is None else f"{v:.{table.digits}f}" for v in row.paper]
        rows.append([name, *paper, *(run.acc_text(row.curve, column) for _, column in table.ours)])
    if table.others:
        named = {row.curve for row in table.rows}
        for curve in run.final.index:
            if curve not in named:
                blank = [""] * len(table.paper_columns)
                rows.append([f"{curve} (ours, not in the paper's table)", *blank, *(run.acc_text(curve, c) for _, c in table.ours)])
    align = [False] + [True] * (len(header) - 1)
    return [f"{table.caption}:", "", markdown_table(header, rows, align), ""]


def _target(directory: Path) -> float | None:
    """The run's ``target_accuracy`` (scenario.yaml), None without one."""
    from wirelessfl.results.figures import _scenario_target

    try:
        return float(_scenario_target(Path(directory)))
    except (ValueError, OSError):
        return None


def section_markdown(section: Section, run: Run | None) -> list[str]:
    lines = [f"## {section.title}", ""]
    if run is None:
        return lines + [not_run_line(section), ""]
    lines += [
        f"Run `{run.directory}`: {run.rounds()} rounds, {run.seeds()} seed(s) (the paper: {section.paper_runs}); "
        f"{runtime_line(run)}.",
        "",
        f"Setup: {setup_line(run.directory)}.",
        "",
    ]
    for table in section.tables:
        lines += table_markdown(table, run)
    lines += energy_comparison_md(run.trace, _target(run.directory))
    for note in section.notes:
        lines += [note, ""]
    return lines


def claim_scenario_cell(paper: Paper, claim: Claim) -> str:
    return claim.where or ", ".join(paper.section(s).title for s in claim.scenarios)


def claims_markdown(paper: Paper, runs: Runs) -> tuple[list[str], list[tuple[Claim, Verdict]]]:
    """The claims table and every claim with its verdict."""
    checked = [(claim, claim.verdict(runs)) for claim in paper.claims]
    rows = [[claim_scenario_cell(paper, c), c.text, verdict_cell(v), v.evidence] for c, v in checked]
    table = markdown_table(["scenario", "claim", "verdict", "evidence (ours)"], rows)
    return ["## Claims, checked one by one", "", table, ""], checked


def summary_markdown(paper: Paper, checked: Sequence[tuple[Claim, Verdict]]) -> list[str]:
    done = [(c, v) for c, v in checked if v.holds is not None]
    failed = [f"- {claim_scenario_cell(paper, c)}: {c.text}" for c, v in done if v.holds is False]
    missing = len(checked) - len(done)
    held = len(done) - len(failed)
    lines = ["## Summary", "", f"{len(done)} of {len(checked)} claims checked; {held} {'holds' if held == 1 else 'hold'}."]
    if missing:
        lines[-1] += f" {missing} not checked (scenario not run, or the run lacks the curves the claim needs)."
    if failed:
        lines += ["", "Not reproduced:", ""] + failed
        if paper.why:
            lines += ["", f"Why they do not hold, measured from these runs: {paper.why}."]
    return lines


def paper_markdown(paper: Paper, runs: Runs, command: str) -> str:
    """The page: each scenario's tables beside ours, every claim with its verdict, a summary."""
    lines = [
        f"# Reproducing {paper.title}",
        "",
        f"Written by `{command}` from the run directories below; every number and verdict is computed from their traces.",
        f"Paper: {paper_text(paper)}. Our accuracies are percentages of each user's own model on its own",
        f"held-out test split {_when(paper)}, averaged over seeds (± the half-width of the mean's 95% Student-t interval over seeds where a run has several).",
        *paper.intro,
        "",
    ]
    for section in paper.sections:
        lines += section_markdown(section, runs.get(section.scenario))
    claim_lines, checked = claims_markdown(paper, runs)
    lines += claim_lines + summary_markdown(paper, checked)
    return "\n".join(lines) + "\n"


def _when(paper: Paper) -> str:
    if paper.last_rounds == 1:
        return "after the last round"
    return f"as each seed's mean over the evaluated rounds among the last {paper.last_rounds}"


def reproduction_markdown(run_dirs: Sequence[Path], command: str, papers: Registry, paper: str | None = None) -> str:
    """The page of the paper of ``papers`` the runs belong to (``paper``: its name, to name it explicitly)."""
    chosen = get_paper(papers, paper) if paper is not None else None
    runs: dict[str, Run] = {}
    owners: dict[str, Paper] = {}
    for directory in run_dirs:
        run = Run.load(Path(directory))
        owner = paper_of(papers, run.scenario)
        if owner is None:
            every = sorted(s for p in papers.values() for s in p.scenarios)
            raise ValueError(
                f"{directory}: scenario {run.scenario!r} is not one of the paper scenarios {every} "
                "(each paper module in wirelessfl_papers/ lists its scenarios)"
            )
        if chosen is not None and owner is not chosen:
            raise ValueError(f"{directory}: scenario {run.scenario!r} belongs to paper {owner.name!r}, not {chosen.name!r}")
        owners[owner.name] = owner
        runs[run.scenario] = run if owner.last_rounds == 1 else run.over_last(owner.last_rounds)
    if len(owners) > 1:
        raise ValueError(f"the runs belong to several papers ({', '.join(sorted(owners))}): write one page per paper")
    if chosen is None and not owners:
        raise ValueError("no run directories given")
    page = chosen or next(iter(owners.values()))
    return page.markdown(runs, command)
