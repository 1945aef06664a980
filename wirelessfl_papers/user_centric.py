"""Our runs of the user-centric FL paper's experiments beside the paper's numbers and claims.

M. Mestoukirdi, M. Zecchin, D. Gesbert, Q. Li, N. Gresset, "User-Centric
Federated Learning": Table I (worst user
accuracy, §IV-B), the qualitative claims of §IV-B about Fig. 2 and of §IV-C about
Fig. 3. Every verdict below is computed from run directories written by
``wirelessfl simulate scenarios/paper/*.yaml``; nothing is typed in except the
paper's own numbers and claims. ``wirelessfl report RUN_DIR... --reproduction
docs/research/reproduction.md`` writes the page.

A claim is checked on the seed-mean final round (the paper reports final
accuracies) and, for Fig. 3, on the seed-mean accuracy-versus-time curves. Every
claim is checked twice: with the paper's reading of UCFL and with our variant
(its own page layout, hence its own ``render``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score

from wirelessfl.results.reproduction import (
    Claim,
    Paper,
    Run,
    Runs,
    Section,
    Verdict,
    need,
    not_run_line,
    paper_text,
    pp,
    runtime_line,
    setup_line,
    verdict_cell,
)
from wirelessfl.results.tables import markdown_table

APPROX_PP = 2.0
"""'matches' / '≈' in the paper's text: within this many accuracy points."""
CLEAR_GAP_PP = 5.0
"""'largely outperforms' / '≫': ahead by at least this many accuracy points."""
BASELINES = ("fedavg", "local", "cfl", "fedfomo")
PAPER_UCFL = "ucfl"
"""The curve label of the paper's reading of UCFL (``ucfl streams=K``)."""
OUR_UCFL = "ucfl+warmup"
"""Our variant (docs/research/ucfl-investigation.md §5); every claim is checked with it too, in its own column."""


@dataclass(frozen=True)
class PaperRow:
    """One row of Table I: worst user accuracy (%) of each method, averaged over 5 runs."""

    title: str
    figure: str
    worst: dict[str, float | None]
    ucfl_streams: int
    ucfl_worst: float


TABLE_I: dict[str, PaperRow] = {
    "paper-emnist-label-shift": PaperRow(
        "EMNIST label shift", "Fig. 2a", {"local": 58.8, "fedavg": 68.9, "oracle": None, "cfl": 70.3, "fedfomo": 70.0}, 20, 73.2
    ),
    "paper-emnist-covariate-label-shift": PaperRow(
        "EMNIST covariate and label shift", "Fig. 2b", {"local": 56.0, "fedavg": 67.5, "oracle": 77.4, "cfl": 76.1, "fedfomo": 73.6}, 4, 76.4
    ),
    "paper-cifar10-concept-shift": PaperRow(
        "CIFAR-10 concept shift", "Fig. 2c", {"local": 35.7, "fedavg": 19.6, "oracle": 49.1, "cfl": 48.6, "fedfomo": 45.5}, 4, 49.1
    ),
}
FIG3_SCENARIO = "paper-emnist-covariate-label-shift"
SCENARIO_FILES = {
    "paper-emnist-label-shift": "scenarios/paper/emnist-label-shift.yaml",
    "paper-emnist-covariate-label-shift": "scenarios/paper/emnist-covariate-label-shift.yaml",
    "paper-cifar10-concept-shift": "scenarios/paper/cifar10-concept-shift.yaml",
}


def ucfl_curves(run: Run) -> dict[int, str]:
    """The run's UCFL curves (``<label> streams=K``, m = every user) by number of streams, in increasing K.

    ``label`` is ``ucfl`` unless the run reads our variant in its place (``run.with_label("ucfl", OUR_UCFL)``).
    """
    label = run.label(PAPER_UCFL)
    found = {}
    for curve in run.final.index:
        if curve.startswith(f"{label} streams="):
            value = curve.split("=", 1)[1]
            if value.isdigit():
                found[int(value)] = curve
            elif value == "m":
                found[int(run.trace["participants"].max())] = curve
    return dict(sorted(found.items()))


# ---- claims of §IV-B (final accuracies) -------------------------------------------------------


def ucfl_grows_with_k(run: Run) -> Verdict:
    ks = ucfl_curves(run)
    if len(ks) < 2:
        return Verdict(None, "needs ucfl with at least two stream counts")
    accs = [run.acc(c) for c in ks.values()]
    shown = ", ".join(f"k={k}: {pp(a)}" for k, a in zip(ks, accs))
    rising = all(b >= a - 0.5 for a, b in zip(accs, accs[1:])) and accs[-1] > accs[0]
    return Verdict(rising, f"average accuracy {shown} (non-decreasing within 0.5 points, last above first)")


def ucfl_beats_fedavg(run: Run) -> Verdict:
    ks, fedavg = ucfl_curves(run), run.acc("fedavg")
    if not ks or fedavg is None:
        return Verdict(None, "needs ucfl and fedavg")
    k, curve = max(((k, c) for k, c in ks.items()), key=lambda kc: run.acc(kc[1]))
    best = run.acc(curve)
    return Verdict(best > fedavg, f"best ucfl (k={k}) {pp(best)} vs FedAvg {pp(fedavg)} average accuracy")


def oracle_far_above_fedavg(run: Run) -> Verdict:
    oracle, fedavg = run.acc("oracle"), run.acc("fedavg")
    if not need(oracle, fedavg):
        return Verdict(None, "needs oracle and fedavg")
    return Verdict(oracle - fedavg >= CLEAR_GAP_PP, f"Oracle {pp(oracle)} vs FedAvg {pp(fedavg)} (needs a gap >= {CLEAR_GAP_PP:.0f} points)")


def ucfl_matches_oracle(k_min: int) -> Callable[[Run], Verdict]:
    def check(run: Run) -> Verdict:
        oracle = run.acc("oracle")
        ks = {k: c for k, c in ucfl_curves(run).items() if k >= k_min}
        if oracle is None or not ks:
            return Verdict(None, f"needs oracle and ucfl with k >= {k_min}")
        shown = ", ".join(f"k={k}: {pp(run.acc(c))}" for k, c in ks.items())
        holds = all(run.acc(c) >= oracle - APPROX_PP for c in ks.values())
        return Verdict(holds, f"Oracle {pp(oracle)}; ucfl {shown} (each within {APPROX_PP:.0f} points of Oracle or above)")

    return check


def local_beats_fedavg(run: Run) -> Verdict:
    local, fedavg = run.acc("local"), run.acc("fedavg")
    if not need(local, fedavg):
        return Verdict(None, "needs local and fedavg")
    return Verdict(local > fedavg, f"Local {pp(local)} vs FedAvg {pp(fedavg)} average accuracy")


def ucfl_at_least_cfl(k: int) -> Callable[[Run], Verdict]:
    def check(run: Run) -> Verdict:
        curve, cfl = ucfl_curves(run).get(k), run.acc("cfl")
        if not need(curve, cfl):
            return Verdict(None, f"needs ucfl k={k} and cfl")
        ours = run.acc(curve)
        return Verdict(ours >= cfl - APPROX_PP, f"ucfl k={k} {pp(ours)} vs CFL {pp(cfl)} (CFL 'matches': within {APPROX_PP:.0f} points)")

    return check


def cfl_finds_groups(groups: int) -> Callable[[Run], Verdict]:
    """Holds when CFL's final clusters are exactly the true groups (adjusted Rand index 1)."""

    def check(run: Run) -> Verdict:
        rounds = run.diagnostics.get("seed0__cfl")
        if not rounds or run.groups is None:
            return Verdict(None, "needs cfl diagnostics (diagnostics.json) and the per-client table (clients.csv)")
        splits = [rounds[r]["assignment"] for r in sorted(rounds, key=int) if "assignment" in rounds[r]]
        if not splits and int(rounds[max(rounds, key=int)].get("clusters", 1)) > 1:
            return Verdict(None, "diagnostics.json lacks CFL's cluster assignment (runs made before it was recorded: rerun cfl)")
        assignment = np.asarray(splits[-1] if splits else np.zeros(len(run.groups), dtype=np.int64))
        clusters = int(len(np.unique(assignment)))
        pure = sum(len(np.unique(run.groups[assignment == c])) == 1 for c in np.unique(assignment))
        ari = adjusted_rand_score(run.groups, assignment)
        return Verdict(
            ari >= 1.0 - 1e-12,
            f"CFL ends with {clusters} clusters, {pure} of them within one group; adjusted Rand index {ari:.2f} "
            f"against the {groups} true groups",
        )

    return check


def ucfl_highest_worst(run: Run) -> Verdict:
    ks = ucfl_curves(run)
    rivals = {b: run.acc(b, "worst_acc") for b in BASELINES if run.acc(b, "worst_acc") is not None}
    if not ks or not rivals:
        return Verdict(None, "needs ucfl and baselines")
    k, curve = max(ks.items(), key=lambda kc: run.acc(kc[1], "worst_acc"))
    ours = run.acc(curve, "worst_acc")
    best_rival = max(rivals, key=rivals.get)
    return Verdict(
        ours >= rivals[best_rival],
        f"best ucfl worst user (k={k}) {pp(ours)} vs best baseline {best_rival} {pp(rivals[best_rival])} (Oracle excluded)",
    )


def fedavg_worst_above_local(run: Run) -> Verdict:
    fedavg, local = run.acc("fedavg", "worst_acc"), run.acc("local", "worst_acc")
    if not need(fedavg, local):
        return Verdict(None, "needs fedavg and local")
    return Verdict(fedavg > local, f"worst user FedAvg {pp(fedavg)} vs Local {pp(local)} (Table I: 68.9 vs 58.8)")


CLAIMS: tuple[Claim, ...] = (
    Claim("paper-emnist-label-shift", "UCFL accuracy grows with the number of streams k (Fig. 2a)", ucfl_grows_with_k),
    Claim("paper-emnist-label-shift", "UCFL beats FedAvg (Fig. 2a)", ucfl_beats_fedavg),
    Claim("paper-emnist-label-shift", "FedAvg's worst user is better than Local's (Table I)", fedavg_worst_above_local),
    Claim("paper-emnist-label-shift", "UCFL has the highest worst user (Table I)", ucfl_highest_worst),
    Claim("paper-emnist-covariate-label-shift", "Oracle largely outperforms FedAvg (Fig. 2b)", oracle_far_above_fedavg),
    Claim("paper-emnist-covariate-label-shift", "UCFL with k >= 4 matches Oracle (Fig. 2b)", ucfl_matches_oracle(4)),
    Claim("paper-emnist-covariate-label-shift", "CFL identifies the 4 clusters (Fig. 2b)", cfl_finds_groups(4)),
    Claim("paper-emnist-covariate-label-shift", "UCFL has the highest worst user (Table I)", ucfl_highest_worst),
    Claim("paper-cifar10-concept-shift", "Local beats FedAvg: collaboration across permuted labels hurts (Fig. 2c)", local_beats_fedavg),
    Claim("paper-cifar10-concept-shift", "UCFL with k >= 4 matches Oracle (Fig. 2c)", ucfl_matches_oracle(4)),
    Claim("paper-cifar10-concept-shift", "UCFL k=4 is at least as good as CFL (Fig. 2c)", ucfl_at_least_cfl(4)),
    Claim("paper-cifar10-concept-shift", "UCFL has the highest worst user (Table I)", ucfl_highest_worst),
)


# ---- claims of §IV-C (Fig. 3: accuracy versus normalised time) --------------------------------


def _curves_over_time(run: Run, profile: str) -> dict[str, pd.DataFrame]:
    rows = run.trace[(run.trace["profile"] == profile) & run.trace["avg_acc"].notna()]
    mean = rows.groupby(["curve", "round"], sort=False)[["time", "avg_acc"]].mean().reset_index()
    return {curve: frame.sort_values("round") for curve, frame in mean.groupby("curve", sort=False)}


def _time_to(frame: pd.DataFrame, level: float) -> float:
    hit = frame[frame["avg_acc"] >= level]
    return float(hit["time"].iloc[0]) if len(hit) else math.inf


def ucfl_first_to_every_level(profile: str) -> Callable[[Run], Verdict]:
    def check(run: Run) -> Verdict:
        curves = _curves_over_time(run, profile)
        ucfl = [c for c in ucfl_curves(run).values() if c in curves]
        rivals = [c for c in curves if c in BASELINES and c != "local"]
        if not curves or not ucfl or not rivals:
            return Verdict(None, f"needs ucfl, baselines and profile {profile}")
        top = max(float(curves[c]["avg_acc"].max()) for c in ucfl + rivals)
        levels = [round(x, 2) for x in np.arange(0.1, top + 1e-9, 0.1)]
        lost = []
        for level in levels:
            ours = min(_time_to(curves[c], level) for c in ucfl)
            first = min(rivals, key=lambda c: _time_to(curves[c], level))
            if _time_to(curves[first], level) < ours:
                lost.append(f"{level:.0%}: {first} at {_time_to(curves[first], level):.0f} vs ucfl {ours:.0f}")
        evidence = f"levels 10%..{levels[-1]:.0%} of average accuracy, against {', '.join(rivals)} (Local sends nothing); " + (
            "ucfl first at every level" if not lost else "a baseline first at " + "; ".join(lost)
        )
        return Verdict(not lost, evidence)

    return check


def right_k_beats_unicast(profile: str) -> Callable[[Run], Verdict]:
    def check(run: Run) -> Verdict:
        ks = ucfl_curves(run)
        curves = _curves_over_time(run, profile)
        if len(ks) < 2 or profile not in set(run.trace["profile"]):
            return Verdict(None, f"needs ucfl with several k and profile {profile}")
        unicast = max(ks)
        level = 0.95 * float(curves[ks[unicast]]["avg_acc"].iloc[-1])
        times = {k: _time_to(curves[c], level) for k, c in ks.items()}
        best = min((k for k in ks if k != unicast), key=times.get)
        shown = ", ".join(f"k={k}: {t:.0f}" if math.isfinite(t) else f"k={k}: never" for k, t in times.items())
        return Verdict(times[best] < times[unicast], f"time to {level:.1%} (95% of unicast's final accuracy): {shown}")

    return check


def stream_overhead_small_when_ul_slow(run: Run) -> Verdict:
    ks = ucfl_curves(run)
    profiles = list(dict.fromkeys(run.trace["profile"]))
    if len(ks) < 2 or not {"slow-ul-unreliable", "wired"} <= set(profiles):
        return Verdict(None, "needs ucfl with several k and the slow-ul-unreliable and wired profiles")
    low, high = ks[min(ks)], ks[max(ks)]

    def overhead(profile: str) -> float:
        rows = run.trace[(run.trace["profile"] == profile) & (run.trace["round"] >= 2)]
        per_round = rows.groupby("curve")["round_time"].mean()
        return float(per_round[high] / per_round[low] - 1)

    slow, wired = overhead("slow-ul-unreliable"), overhead("wired")
    return Verdict(
        slow < 0.25 and wired > 2 * slow,
        f"mean round time of k={max(ks)} over k={min(ks)}: +{slow:.0%} under slow-ul-unreliable, +{wired:.0%} under wired",
    )


def fedfomo_costs_most_downlink(run: Run) -> Verdict:
    final = run.trace[run.trace["round"] == run.trace["round"].max()]
    dl = final.groupby("curve")["cum_dl_payload"].mean()
    if "fedfomo" not in dl.index or len(dl) < 2:
        return Verdict(None, "needs fedfomo and another method")
    runner_up = dl.drop("fedfomo").idxmax()
    return Verdict(
        dl["fedfomo"] > dl[runner_up],
        f"downlink models sent over the run: FedFomo {dl['fedfomo']:.0f}, next {runner_up} {dl[runner_up]:.0f}",
    )


FIG3_CLAIMS: tuple[Claim, ...] = (
    Claim(FIG3_SCENARIO, "rho = 4, unreliable nodes: UCFL reaches every accuracy level first", ucfl_first_to_every_level("slow-ul-unreliable")),
    Claim(FIG3_SCENARIO, "extra downlink streams are negligible when rho is large, not when rho = 1", stream_overhead_small_when_ul_slow),
    Claim(FIG3_SCENARIO, "rho = 1 (wired): the right k beats unicast", right_k_beats_unicast("wired")),
    Claim(FIG3_SCENARIO, "rho = 2, reliable nodes: the right k beats unicast", right_k_beats_unicast("fast-ul-reliable")),
    Claim(FIG3_SCENARIO, "FedFomo incurs a large communication cost", fedfomo_costs_most_downlink),
)


# ---- the page ----------------------------------------------------------------------------------


def _ucfl_weights_note(run: Run) -> str | None:
    """The eq. 6-7 weights as the run measured them: how far from uniform they were."""
    clients = int(run.trace.loc[run.trace["round"] == 1, "participants"].max())
    parts = []
    for label, prefix in ((PAPER_UCFL, "seed0__ucfl_streams"), (OUR_UCFL, "seed0__ucfl_warmup_streams")):
        estimates = [
            (int(r), value["self_weight_mean"])
            for key, rounds in run.diagnostics.items()
            if key.startswith(prefix)
            for r, value in rounds.items()
            if isinstance(value, dict) and "self_weight_mean" in value
        ]
        if estimates:
            r, weight = min(estimates)
            parts.append(f"{label} (estimated in round {r}) w_ii = {weight:.3f}")
    if not parts:
        return None
    return (
        f"UCFL's eq. 6-7 weights in this run, mean self-weight: {'; '.join(parts)} (1 would be Local; "
        f"{1 / clients:.3f}, uniform weights over {clients} users, would be FedAvg with equal data sizes)."
    )


def _cfl_fedfomo_note(run: Run) -> str | None:
    """CFL's final cluster count and how many FedFomo clients still mix (eq. 5 weights not all <= 0)."""
    parts = []
    cfl = run.diagnostics.get("seed0__cfl")
    if cfl:
        parts.append(f"CFL ends with {cfl[max(cfl, key=int)].get('clusters')} cluster(s)")
    fomo = run.diagnostics.get("seed0__fedfomo")
    if fomo:
        clients = int(run.trace["participants"].max())
        moved = {int(r): v.get("federated") for r, v in fomo.items() if isinstance(v, dict) and "federated" in v}
        first, last = min(r for r in moved if r > 1), max(moved)
        parts.append(
            f"FedFomo clients that mixed in peers' models: {moved[first]}/{clients} in round {first}, "
            f"{moved[last]}/{clients} in round {last} (the others went back to their previous model: every candidate, "
            "their own newly trained model included, had a higher validation loss)"
        )
    return "; ".join(parts) + "." if parts else None


def _scenario_section(row: PaperRow, run: Run | None, section: Section) -> list[str]:
    lines = [f"## {row.title} ({row.figure}, Table I)", ""]
    if run is None:
        lines += [not_run_line(section), ""]
        return lines
    lines += [
        f"Run `{run.directory}`: {run.rounds()} rounds, {run.seeds()} seed(s) (the paper: {section.paper_runs}); {runtime_line(run)}.",
        "",
        f"Setup: {setup_line(run.directory)}.",
        "",
    ]
    table = []
    for method in ("local", "fedavg", "oracle", "cfl", "fedfomo"):
        paper = row.worst.get(method)
        table.append([method, "-" if paper is None else pp(paper), run.acc_text(method, "worst_acc"), run.acc_text(method)])
    ucfl = ucfl_curves(run)
    for k, curve in ucfl.items():
        paper = pp(row.ucfl_worst) if k == row.ucfl_streams else ""
        table.append([curve, paper, run.acc_text(curve, "worst_acc"), run.acc_text(curve)])
    for curve in run.final.index:
        if curve.startswith("ucfl") and curve not in ucfl.values():
            table.append([f"{curve} (ours, not in the paper)", "", run.acc_text(curve, "worst_acc"), run.acc_text(curve)])
    lines += [
        markdown_table(["method", "paper worst user (%)", "our worst user (%)", "our average (%)"], table, [False, True, True, True]),
        "",
    ]
    return lines


def _claims_section(title: str, claims: Sequence[Claim], runs: Runs) -> tuple[list[str], list[str], list[str]]:
    """The claims table: each claim checked with the paper's UCFL and, where the run has it, with ours.

    Returns the lines and the claims that do not hold with the paper's UCFL and with ours.
    """
    rows, failed, failed_ours = [], [], []
    for claim in claims:
        run = runs.get(claim.scenario)
        verdict = claim.verdict(runs)
        ours = _ours(claim, run)
        if ours is None:
            cell, evidence = "no ucfl+warmup run", ""
        elif ours.evidence == verdict.evidence:
            cell, evidence = verdict_cell(ours), "same"
        else:
            cell, evidence = verdict_cell(ours), ours.evidence
        title_text = f"{TABLE_I[claim.scenario].title}: {claim.text}"
        rows.append([TABLE_I[claim.scenario].title, claim.text, verdict_cell(verdict), verdict.evidence, cell, evidence])
        if verdict.holds is False:
            failed.append(title_text)
        if ours is not None and ours.holds is False:
            failed_ours.append(title_text)
    header = ["scenario", "claim", "verdict (paper's UCFL)", "evidence (ours)", f"verdict with {OUR_UCFL}", f"evidence with {OUR_UCFL}"]
    return [f"## {title}", "", markdown_table(header, rows), ""], failed, failed_ours


def _ours(claim: Claim, run: Run | None) -> Verdict | None:
    """The claim checked with ucfl+warmup in place of the paper's UCFL; None when the run has no such curves."""
    if run is None:
        return None
    variant = run.with_label(PAPER_UCFL, OUR_UCFL)
    return claim.check(variant) if ucfl_curves(variant) else None


WHY_WE_DIFFER = [
    "## Why our numbers differ from the paper's",
    "",
    "docs/research/reproduction-notes.md explains the differences from these runs' own diagnostics (the data we have offline,",
    "the optimizer's stability, the eq. 6-7 weights, FedFomo's early stopping, one seed against five). This page",
    "only computes.",
    "",
]


def _page(paper: Paper, runs: Runs, command: str) -> str:
    lines = [
        "# Reproducing User-Centric Federated Learning (Table I, Fig. 2, Fig. 3)",
        "",
        f"Written by `{command}` from the run directories below; every number and verdict is computed from their traces.",
        f"Paper: {paper_text(paper)}. Accuracies are percentages of each user's own model on its own",
        "held-out test split after the last round, averaged over seeds (± the half-width of the mean's 95% interval over",
        "seeds where a run has several). The paper does not give rounds, local epochs or",
        "batch size; ours are in each scenario file. 'Matches' means within "
        f"{APPROX_PP:.0f} points, 'largely outperforms' a gap of at least {CLEAR_GAP_PP:.0f} points.",
        "Oracle does not apply to label shift (no groups). Why UCFL's weights behave as they do: docs/research/ucfl-investigation.md.",
        "Each run directory below needs only its trace, per-client table, diagnostics and scenario.yaml (ours are committed",
        "under docs/runs/), so the command above re-makes this page anywhere.",
        "",
    ]
    for name, row in TABLE_I.items():
        run = runs.get(name)
        lines += _scenario_section(row, run, paper.section(name))
        for note in (_ucfl_weights_note(run), _cfl_fedfomo_note(run)) if run is not None else ():
            if note:
                lines += [note, ""]
    claim_lines, failed, failed_ours = _claims_section("Claims of §IV-B (Fig. 2, Table I), checked one by one", CLAIMS, runs)
    fig3_lines, fig3_failed, fig3_failed_ours = _claims_section(
        "Claims of §IV-C (Fig. 3: the same training timed under three systems)", FIG3_CLAIMS, runs
    )
    lines += claim_lines + fig3_lines
    lines += WHY_WE_DIFFER
    lines += ["## Summary", ""]
    every = CLAIMS + FIG3_CLAIMS
    checked = sum(1 for c in every if c.verdict(runs).holds is not None)
    not_holding = failed + fig3_failed
    lines.append(f"With the paper's UCFL: {checked} of {len(every)} claims checked; {checked - len(not_holding)} hold.")
    if not_holding:
        lines += ["", "Not reproduced:", ""] + [f"- {text}" for text in not_holding]
    ours = [v for c in every if (v := _ours(c, runs.get(c.scenario))) is not None and v.holds is not None]
    if ours:
        not_ours = failed_ours + fig3_failed_ours
        lines += ["", f"With {OUR_UCFL} in place of the paper's UCFL: {len(ours)} claims checked; {len(ours) - len(not_ours)} hold."]
        if not_ours:
            lines += ["", "Not reproduced with it:", ""] + [f"- {text}" for text in not_ours]
    return "\n".join(lines + DEVICE_ENERGY) + "\n"


DEVICE_ENERGY = [
    "",
    "## Device energy",
    "",
    "What the extra streams cost the devices' batteries (UCFL k = 2, 4, 20 against FedAvg and Oracle) and what",
    "FedFomo's M downloads cost is measured in docs/research/reproduction-notes.md §8 (runs in `docs/runs/energy-quickstart`",
    "and `docs/runs/energy-fedfomo`; `wirelessfl report` puts a device-energy table under each run's section once",
    "its trace has energy columns).",
]
"""The page's pointer to the energy measurements, which live beside it rather than in its runs."""


PAPER = Paper(
    name="user-centric",
    title="User-Centric Federated Learning (Table I, Fig. 2, Fig. 3)",
    source="user-centric-fl.txt",
    sections=tuple(
        Section(name, f"{row.title} ({row.figure}, Table I)", paper_runs="5", scenario_file=SCENARIO_FILES[name])
        for name, row in TABLE_I.items()
    ),
    claims=CLAIMS + FIG3_CLAIMS,
    render=_page,
)
