"""Summary tables of a finished trace: final accuracy, time to target, payload, worst client.

The worst-client table follows Table I of the user-centric FL paper
(M. Mestoukirdi et al., "User-Centric Federated Learning: Trading off Wireless
Resources for Personalization"): average
and worst client accuracy of each method after the last round.

Curves and profiles keep the order in which they first appear in the trace
(the scenario's order), never alphabetical.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from wirelessfl.algorithms.registry import SPECS
from wirelessfl.results.intervals import CONFIDENCE, interval_half_width, paired_difference
from wirelessfl.results.io import atomic_write_text, validate_clients, validate_trace

ACCURACY_METRICS: tuple[str, ...] = ("avg_acc", "worst_acc", "p10_acc", "avg_val_acc")
METRIC_LABELS = {
    "avg_acc": "average client accuracy",
    "worst_acc": "worst client accuracy",
    "p10_acc": "10th-percentile client accuracy",
    "avg_val_acc": "average client validation accuracy",
}
_KEYS = ["curve", "profile"]


def _check_metric(metric: str) -> None:
    if metric not in ACCURACY_METRICS:
        raise ValueError(f"metric must be one of {list(ACCURACY_METRICS)}, got {metric!r}")


def check_target(target: float) -> None:
    """One line for a target that is not an accuracy in (0, 1] (``--target 2``, ``nan``)."""
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not (0.0 < target <= 1.0):
        raise ValueError(f"target accuracy must be a number in (0, 1], got {target!r}")


def _final_rows(trace: pd.DataFrame) -> pd.DataFrame:
    """The last round of every (curve, profile, seed)."""
    last = trace.groupby(_KEYS + ["seed"], sort=False)["round"].transform("max")
    return trace[trace["round"] == last]


def last_rounds_rows(trace: pd.DataFrame, columns: list[str], last_rounds: int = 1) -> pd.DataFrame:
    """Per (curve, profile, seed): each of ``columns`` averaged over the evaluated rounds among the last
    ``last_rounds`` rounds (1: the last round alone, which is always evaluated), and that last ``round``.

    Papers that report "the mean of the values at the final 10 global rounds" (pflego.txt §4.4) smooth
    the round-to-round noise of partial participation; a round that was not evaluated (NaN) is skipped.
    """
    if isinstance(last_rounds, bool) or not isinstance(last_rounds, int) or last_rounds < 1:
        raise ValueError(f"last_rounds must be an int >= 1, got {last_rounds!r}")
    keys = _KEYS + ["seed"]
    last = trace.groupby(keys, sort=False)["round"].transform("max")
    window = trace[trace["round"] > last - last_rounds]
    grouped = window.groupby(keys, sort=False)
    return grouped[columns].mean().join(grouped["round"].max()).reset_index()


def _seed_statistics(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per (curve, profile): each column's mean over seeds, its std (``_std``) and its interval half-width (``_ci``)."""
    grouped = frame.groupby(_KEYS, sort=False)[columns]
    means = grouped.mean()
    stds = grouped.std(ddof=1).add_suffix("_std")
    halves = grouped.agg(interval_half_width).add_suffix("_ci")
    return means.join(stds).join(halves)


CONVERGENCE_WINDOW = 10
"""Rounds over which ``last_change`` measures whether a curve still moves at the end of its budget."""


CONVERGENCE_TOLERANCE = 0.01
"""A curve whose average accuracy moved by more than this over its last ``CONVERGENCE_WINDOW`` rounds has not
settled: summary.md and the console warn that the budget, not convergence, ranks it."""


def last_change(trace: pd.DataFrame, window: int = CONVERGENCE_WINDOW, metric: str = "avg_acc") -> pd.Series:
    """Per (curve, profile): ``metric`` at the last round minus its value at the last evaluated round at least
    ``window`` rounds before, mean over seeds (NaN where a seed has no such round).

    A budget is long enough to rank methods at convergence when this is small (under one point over the
    last 10 rounds); a method still gaining is ranked by the budget, not by what it can reach."""
    keys = _KEYS + ["seed"]
    evaluated = trace.dropna(subset=[metric])
    last = evaluated.groupby(keys, sort=False)["round"].transform("max")
    end = evaluated[evaluated["round"] == last].set_index(keys)[metric]
    earlier = evaluated[evaluated["round"] <= last - window]
    start = earlier.loc[earlier.groupby(keys, sort=False)["round"].idxmax()].set_index(keys)[metric]
    change = (end - start.reindex(end.index)).rename(f"{metric}_last_change")
    return change.groupby(level=[0, 1], sort=False).agg(lambda values: values.mean(skipna=False))


def time_to_target(trace: pd.DataFrame, target: float, metric: str = "avg_acc") -> pd.DataFrame:
    """First simulated time (and round) at which ``metric >= target``, per (curve, profile).

    ``time``/``round`` are means over seeds, NaN unless every seed reached the
    target (a mean over only the lucky seeds would flatter the method);
    ``seeds_reached`` out of ``seeds`` says how close it came.
    """
    validate_trace(trace)
    _check_metric(metric)
    check_target(target)
    seeds = first_reached(trace, target, metric, ["time", "round"])
    rows = []
    for (curve, profile), group in seeds.groupby(_KEYS, sort=False):
        reached = int(group["time"].notna().sum())
        everyone = reached == len(group)
        rows.append(
            {
                "curve": curve,
                "profile": profile,
                "metric": metric,
                "target": float(target),
                "time_unit": group["time_unit"].iloc[0],
                "time": group["time"].mean() if everyone else math.nan,
                "time_std": group["time"].std(ddof=1) if everyone else math.nan,
                "time_ci": interval_half_width(group["time"]) if everyone else math.nan,
                "round": group["round"].mean() if everyone else math.nan,
                "seeds_reached": reached,
                "seeds": len(group),
            }
        )
    return pd.DataFrame(rows)


def first_reached(trace: pd.DataFrame, target: float, metric: str, columns: list[str]) -> pd.DataFrame:
    """Per (curve, profile, seed): ``columns`` at the first round where ``metric >= target`` (NaN if none), and time_unit."""
    ordered = trace.sort_values("round", kind="stable")
    per_seed = []
    for (curve, profile, seed), rows in ordered.groupby(_KEYS + ["seed"], sort=False):
        hits = rows[rows[metric] >= target]
        first = hits.iloc[0] if len(hits) else None
        per_seed.append(
            {
                "curve": curve, "profile": profile, "seed": seed, "time_unit": rows["time_unit"].iloc[0],
                **{column: float(first[column]) if first is not None else math.nan for column in columns},
            }
        )
    return pd.DataFrame(per_seed)


def _group_floor(clients: pd.DataFrame) -> pd.DataFrame:
    """Per (curve, profile): mean over seeds of the worst group's mean accuracy."""
    group_means = clients.groupby(_KEYS + ["seed", "group"], sort=False)["accuracy"].mean()
    worst_group = group_means.groupby(level=[0, 1, 2], sort=False).min()
    per_seed = worst_group.reset_index()
    return per_seed.groupby(_KEYS, sort=False)["accuracy"].mean().rename("worst_group_acc").to_frame()


AGGREGATION_WARNING = 0.8
"""Below this mean fraction of the participants' uploads aggregated per round, summary.md and the
console warn: a deadline is dropping clients (3.5-5.7 of 12 left UCFL's worst client at 0% unseen)."""


def aggregated_fraction(trace: pd.DataFrame) -> pd.DataFrame:
    """Per (curve, profile): aggregated / participants, mean over the rounds that uploaded, mean over seeds.

    Rounds without uploads (Local sends nothing, round 0) are left out, so a
    curve that never uploads has NaN, not 0.
    """
    rounds = trace[(trace["round"] > 0) & (trace["participants"] > 0) & (trace["ul_payload"] > 0)]
    rounds = rounds.assign(aggregated_fraction=rounds["aggregated"] / rounds["participants"])
    per_seed = rounds.groupby(_KEYS + ["seed"], sort=False)["aggregated_fraction"].mean()
    return per_seed.groupby(level=[0, 1], sort=False).mean().to_frame()


def aggregation_warnings(trace: pd.DataFrame, threshold: float = AGGREGATION_WARNING) -> list[str]:
    """One line per profile naming the curves whose mean aggregated fraction is below ``threshold``, with why the
    uploads were lost (:func:`battery_drops`): a deadline, empty batteries, or either."""
    table = aggregated_fraction(trace).reset_index()
    low = table[table["aggregated_fraction"] < threshold]
    causes = battery_drops(trace)
    lines = []
    for profile, rows in low.groupby("profile", sort=False):
        found = {causes.get((curve, profile), "none") for curve in rows["curve"]}
        why = (
            "missed the deadline" if found == {"none"}
            else "their batteries ran out" if found == {"all"}
            else "missed the deadline or their batteries ran out"
        )
        lines.append(
            f"on {profile}, under {100 * threshold:.0f}% of the participants' uploads were aggregated per round "
            f"({why}): {', '.join(f'{r.curve} {100 * r.aggregated_fraction:.0f}%' for r in rows.itertuples())}"
        )
    return lines


def battery_drops(trace: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (curve, profile): how many of its lost uploads empty batteries explain: "none" (no device ran out),
    "all" (in every round, no more uploads were lost than devices ran out then), or "some".

    A device whose battery runs out before its upload lands is dropped and counted in ``depleted`` that round; any
    other lost upload missed a deadline."""
    if "depleted" not in trace.columns:
        return {}
    causes = {}
    for (curve, profile), rows in trace.groupby(["curve", "profile"], sort=False):
        rows = rows.sort_values(["seed", "round"])
        newly = rows.groupby("seed")["depleted"].diff().fillna(rows["depleted"])
        lost = (rows["participants"] - rows["aggregated"]).where(rows["ul_payload"] > 0, 0)
        if not (rows["depleted"] > 0).any():
            causes[curve, profile] = "none"
        else:
            causes[curve, profile] = "all" if (lost <= newly).all() else "some"
    return causes


def loss_warnings(trace: pd.DataFrame) -> list[str]:
    """One line per profile (one for all when the profiles replayed the same training) naming the curves whose
    test loss is NaN or infinite in an evaluated round, and the first such round: the model's outputs broke
    (training diverged, or the model computes NaN); the run went on, so its later accuracies are a broken model's."""
    if "mean_loss" not in trace:
        return []
    evaluated = trace[trace["avg_acc"].notna()]
    index = [c for c in ("curve", "seed", "round") if c in trace]
    if evaluated["profile"].nunique() > 1 and identical_across_profiles(evaluated, index, "mean_loss"):
        evaluated = evaluated[evaluated["profile"] == evaluated["profile"].iloc[0]].assign(profile="every profile")
    broken = evaluated[~np.isfinite(evaluated["mean_loss"].to_numpy(dtype=float))]
    lines = []
    for profile, rows in broken.groupby("profile", sort=False):
        first = rows.groupby("curve", sort=False)["round"].min()
        lines.append(
            f"on {profile}, the test loss is NaN or infinite (mean_loss empty) from round "
            f"{', '.join(f'{int(r)} for {curve}' for curve, r in first.items())}: the model's outputs broke (its "
            "training diverged, or it computes NaN); try a smaller training.lr or training.clip_norm"
        )
    return lines


def convergence_warnings(trace: pd.DataFrame, tolerance: float = CONVERGENCE_TOLERANCE) -> list[str]:
    """One line per profile (one for all when the profiles replayed the same training) naming the curves whose
    average accuracy still moved by more than ``tolerance`` over the last ``CONVERGENCE_WINDOW`` rounds."""
    change = last_change(trace).rename("change").reset_index()
    if trace["profile"].nunique() > 1 and identical_across_profiles(trace, ["curve", "seed", "round"], "avg_acc"):
        change = change[change["profile"] == change["profile"].iloc[0]].assign(profile="every profile")
    moving = change[change["change"].abs() > tolerance]
    points = f"{100 * tolerance:g} point" + ("" if 100 * tolerance == 1 else "s")
    return [
        f"on {profile}, still moving by more than {points} over the last {CONVERGENCE_WINDOW} "
        f"rounds (mean over seeds): {', '.join(f'{r.curve} {_signed_points(r.change)}' for r in rows.itertuples())}; "
        "the round budget, not convergence, ranks these"
        for profile, rows in moving.groupby("profile", sort=False)
    ]


def summary_table(trace: pd.DataFrame, clients: pd.DataFrame, target: float, last_rounds: int = 1) -> pd.DataFrame:
    """One row per (curve, profile): final accuracies (mean and std over seeds), time to target, payload moved.

    Payloads and bits are the totals over all rounds of one run, averaged over
    seeds; ``final_time`` is the simulated time at the end of the last round.
    With ``last_rounds`` > 1 each seed's accuracies are first averaged over the
    evaluated rounds among its last ``last_rounds`` (:func:`last_rounds_rows`).
    """
    validate_trace(trace)
    validate_clients(clients)
    check_target(target)
    final = _final_rows(trace)
    final = final.assign(
        total_dl_payload=final["cum_dl_payload"],
        total_ul_payload=final["cum_ul_payload"],
    )
    bits = trace.groupby(_KEYS + ["seed"], sort=False)[["dl_bits", "ul_bits"]].sum(min_count=1)
    # A run with any unknown round has unknown total bits.
    unknown = trace.groupby(_KEYS + ["seed"], sort=False)[["dl_bits", "ul_bits"]].agg(lambda s: s.isna().any())
    bits = bits.mask(unknown).rename(columns={"dl_bits": "total_dl_bits", "ul_bits": "total_ul_bits"})
    bits = bits.groupby(level=[0, 1], sort=False).agg(lambda totals: totals.mean(skipna=False))
    accuracies = ["avg_acc", "worst_acc", "p10_acc"]
    stats = _seed_statistics(last_rounds_rows(trace, accuracies, last_rounds), accuracies)
    sums = final.groupby(_KEYS, sort=False).agg(
        rounds=("round", "max"),
        seeds=("seed", "nunique"),
        time_unit=("time_unit", "first"),
        final_time=("time", "mean"),
        total_dl_payload=("total_dl_payload", "mean"),
        total_ul_payload=("total_ul_payload", "mean"),
    )
    client_counts = clients.groupby(_KEYS + ["seed"], sort=False)["client"].nunique()
    client_counts = client_counts.groupby(level=[0, 1], sort=False).max().rename("clients").to_frame()
    ttt = time_to_target(trace, target).set_index(_KEYS)[["time", "round", "seeds_reached"]]
    ttt = ttt.rename(columns={"time": "time_to_target", "round": "round_to_target", "seeds_reached": "seeds_reached_target"})
    table = (
        sums.join(stats)
        .join(ttt)
        .join(bits)
        .join(_group_floor(clients), how="left")
        .join(aggregated_fraction(trace), how="left")
        .join(client_counts, how="left")
        .join(last_change(trace), how="left")
        .reset_index()
    )
    columns = [
        "curve", "profile", "seeds", "clients", "rounds", "time_unit", "final_time",
        "avg_acc", "avg_acc_std", "avg_acc_ci", "worst_acc", "worst_acc_std", "worst_acc_ci", "p10_acc", "p10_acc_std",
        "p10_acc_ci", "worst_group_acc", "avg_acc_last_change",
        "aggregated_fraction", "time_to_target", "round_to_target", "seeds_reached_target",
        "total_dl_payload", "total_ul_payload", "total_dl_bits", "total_ul_bits",
    ]  # fmt: skip
    return table[columns]


def fit_table(trace: pd.DataFrame, last_rounds: int = 1) -> pd.DataFrame:
    """Per (curve, profile) of a run with ``eval_train``: the fit to the training split (``fit_acc``,
    ``fit_loss``) beside the test accuracy (``avg_acc``), each a mean over seeds with its interval (``_ci``),
    and ``gap = fit_acc - avg_acc`` per seed (``gap``, ``gap_ci``). Empty for a trace without ``fit_acc``.

    One measure for every method: a low ``fit_acc`` says the method under-fits at this budget, a large
    ``gap`` that it over-fits; ``train_loss`` cannot say either across methods (each algorithm's own)."""
    if "fit_acc" not in trace.columns:
        return pd.DataFrame(columns=_KEYS)
    columns = ["fit_acc", "fit_loss", "avg_acc"]
    per_seed = last_rounds_rows(trace, columns, last_rounds)
    per_seed["gap"] = per_seed["fit_acc"] - per_seed["avg_acc"]
    stats = _seed_statistics(per_seed, columns + ["gap"]).reset_index()
    return stats[_KEYS + [c for name in columns + ["gap"] for c in (name, f"{name}_ci")]]


REFERENCE_ALGORITHMS = frozenset(name for name, spec in SPECS.items() if spec.knows_truth)
"""Algorithms that know the truth (their declaration's ``knows_truth``: Oracle's true groups): shown beside a
contest, never its winner."""


def paired_ranking(trace: pd.DataFrame, last_rounds: int = 1, metric: str = "avg_acc") -> pd.DataFrame:
    """Per profile (``"all"`` when every curve gave the same numbers on every profile), every curve's
    ``metric`` against the contest's best, the difference taken seed by seed.

    Every curve of a seed shares its random numbers (initial model, batches, participants, network draws), so
    the per-seed difference ``diff`` (mean over the shared seeds, ``diff_ci`` its interval) removes the
    seed-to-seed spread that two separate intervals both carry. ``verdict``: ``best``; ``tied with the best``
    when the interval holds 0; ``below the best``; ``above the best`` (a reference only); ``one seed`` when
    no interval exists. References (``REFERENCE_ALGORITHMS``) are ranked beside the contest, never its best.
    """
    per_seed = last_rounds_rows(trace, [metric], last_rounds)
    algorithms = trace.groupby("curve", sort=False)["algorithm"].first()
    if trace["profile"].nunique() > 1 and identical_across_profiles(trace, ["curve", "seed", "round"], metric):
        per_seed = per_seed[per_seed["profile"] == per_seed["profile"].iloc[0]].assign(profile="all")
    rows = []
    for profile, group in per_seed.groupby("profile", sort=False):
        values = group.pivot_table(index="seed", columns="curve", values=metric, aggfunc="first")
        means = values.mean().sort_values(ascending=False, kind="stable")
        contest = [c for c in means.index if algorithms[c] not in REFERENCE_ALGORITHMS]
        if not contest:
            continue
        best = contest[0]
        for curve in means.index:
            mean, half = paired_difference(values[curve].to_dict(), values[best].to_dict())
            if curve == best:
                verdict = "best"
            elif math.isnan(half):
                verdict = "one seed"
            elif abs(mean) <= half:
                verdict = "tied with the best"
            else:
                verdict = "above the best" if mean > 0 else "below the best"
            seeds = int((values[curve].notna() & values[best].notna()).sum())
            rows.append({
                "profile": profile, "curve": curve, metric: means[curve], "diff": mean, "diff_ci": half,
                "seeds": seeds, "reference": algorithms[curve] in REFERENCE_ALGORITHMS, "verdict": verdict,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["profile", "curve", metric, "diff", "diff_ci", "seeds", "reference", "verdict"])


def worst_client_table(clients: pd.DataFrame) -> pd.DataFrame:
    """Table I style: per curve, average and worst client accuracy after the last round.

    A curve gets one row (profile ``"all"``) when every profile gave every client
    the same accuracy (training replayed through the profiles), else one row per profile.
    """
    validate_clients(clients)
    per_seed = clients.groupby(_KEYS + ["seed"], sort=False)["accuracy"].agg(avg_acc="mean", worst_acc="min", clients="count")
    per_seed = per_seed.reset_index()
    rows = []
    for curve, curve_clients in clients.groupby("curve", sort=False):
        if identical_across_profiles(curve_clients, ["seed", "client"], "accuracy"):
            first_profile = curve_clients["profile"].iloc[0]
            selected = per_seed[(per_seed["curve"] == curve) & (per_seed["profile"] == first_profile)]
            selected = selected.assign(profile="all")
        else:
            selected = per_seed[per_seed["curve"] == curve]
        for profile, group in selected.groupby("profile", sort=False):
            rows.append(
                {
                    "curve": curve,
                    "profile": profile,
                    "avg_acc": group["avg_acc"].mean(),
                    "avg_acc_std": group["avg_acc"].std(ddof=1),
                    "avg_acc_ci": interval_half_width(group["avg_acc"]),
                    "worst_acc": group["worst_acc"].mean(),
                    "worst_acc_std": group["worst_acc"].std(ddof=1),
                    "worst_acc_ci": interval_half_width(group["worst_acc"]),
                    "seeds": len(group),
                    "clients": int(group["clients"].max()),
                }
            )
    return pd.DataFrame(rows)


def identical_across_profiles(frame: pd.DataFrame, index: list[str], value: str) -> bool:
    """True when every profile holds the same ``value`` at every ``index`` (e.g. training replayed through them)."""
    by_profile = frame.pivot_table(index=index, columns="profile", values=value, aggfunc="first", dropna=False)
    values = by_profile.to_numpy()
    return bool(np.array_equal(values, np.repeat(values[:, :1], values.shape[1], axis=1), equal_nan=True))


def markdown_table(header: list[str], rows: list[list[str]], align_right: list[bool] | None = None) -> str:
    """A GitHub-flavoured markdown table (pandas' to_markdown needs the optional ``tabulate``)."""
    if align_right is None:
        align_right = [False] * len(header)
    if len(align_right) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"markdown_table: every row and align_right must have {len(header)} cells, like the header")

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---:" if right else ":---" for right in align_right) + "|")
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def _warning_lines(warnings: list[str]) -> list[str]:
    return ["", *(f"- **warning** {w}" for w in warnings)] if warnings else []


def percent(value: float, spread: float = math.nan) -> str:
    """A fraction as percent with one decimal, "± spread" when given, "n/a" when missing (summary.md and the console)."""
    if pd.isna(value):
        return "n/a"
    if pd.isna(spread):
        return f"{100 * value:.1f}"
    return f"{100 * value:.1f} ± {100 * spread:.1f}"


def _signed_points(value: float) -> str:
    """A change of a fraction, in percentage points with its sign; 'n/a' when missing."""
    return "n/a" if pd.isna(value) else f"{100 * value:+.1f}"


def _num(value: float, fmt: str = ".1f") -> str:
    return "n/a" if pd.isna(value) else format(value, fmt)


def _bits(value: float) -> str:
    return "unknown" if pd.isna(value) else f"{value:.4g}"


def _time_to_target_cell(row: pd.Series) -> str:
    if pd.isna(row["time"]):
        return f"not reached ({row['seeds_reached']}/{row['seeds']} seeds)"
    spread = "" if pd.isna(row.get("time_ci", math.nan)) else f" ± {row['time_ci']:.1f}"
    return f"{row['time']:.1f}{spread} (round {row['round']:.1f})"


def _fit_section(trace: pd.DataFrame, last_rounds: int) -> list[str]:
    """summary.md's section on the fit to the training data (no lines without ``eval_train``)."""
    fit = fit_table(trace, last_rounds)
    if fit.empty:
        return []
    replayed = [
        curve for curve, rows in trace.groupby("curve", sort=False)
        if identical_across_profiles(rows, ["seed", "round"], "fit_acc") and identical_across_profiles(rows, ["seed", "round"], "avg_acc")
    ]
    fit = pd.concat(
        [fit[~fit["curve"].isin(replayed)], fit[fit["curve"].isin(replayed)].drop_duplicates("curve").assign(profile="all")]
    ).set_index("curve").loc[list(dict.fromkeys(fit["curve"]))].reset_index()
    return [
        "## Fit to the training data (`eval_train`)",
        "",
        "Each client's own model on its own training split, the same measure for every method, beside its test "
        "accuracy; 'gap' = fit - test, mean over seeds. A low fit says a method under-fits at this budget, a "
        "large gap that it over-fits. Profile 'all': every profile gave the same numbers.",
        "",
        markdown_table(
            ["curve", "profile", "fit acc (%)", "fit loss", "test avg acc (%)", "gap (points)"],
            [
                [r.curve, r.profile, percent(r.fit_acc, r.fit_acc_ci), _num(r.fit_loss, ".3f"), percent(r.avg_acc, r.avg_acc_ci),
                 percent(r.gap, r.gap_ci)]
                for r in fit.itertuples()
            ],
            [False, False, True, True, True, True],
        ),
        "",
    ]


SHARED_DRAWS_TEXT = (
    "Every curve of a seed starts from the same model and sees the same batches, participants and network draws, so "
    "each curve is compared with the best one seed by seed"
)
SEPARATE_DRAWS_TEXT = (
    "This run directory has no provenance.json: it was made before wirelessfl recorded its seeding, when each "
    "algorithm of a seed drew its own initial model, batches and participants (variants of one algorithm shared "
    "them). Between algorithms its per-seed differences are still a fair test, but they carry that "
    "initialisation noise, which shared draws would remove. Each curve is compared with the best one seed by seed"
)


def _ranking_section(trace: pd.DataFrame, last_rounds: int, shared_draws: bool = True) -> list[str]:
    """summary.md's ranking by per-seed differences (no lines for one curve or one seed); ``shared_draws``: the
    run's provenance says its curves of a seed share their random numbers."""
    if trace["curve"].nunique() < 2 or trace["seed"].nunique() < 2:
        return []
    ranking = paired_ranking(trace, last_rounds)
    if ranking.empty:
        return []
    return [
        "## Ranking, paired by seed",
        "",
        f"{SHARED_DRAWS_TEXT if shared_draws else SEPARATE_DRAWS_TEXT}: 'difference' is the mean over seeds "
        f"of (curve - best) in points with its {CONFIDENCE:.0%} interval, and an interval that holds 0 is a "
        f"tie. {', '.join(sorted(REFERENCE_ALGORITHMS))} knows the true groups: shown beside the contest, "
        "never its best. Profile 'all': every profile gave the same numbers.",
        "",
        markdown_table(
            ["profile", "curve", "avg acc (%)", "difference to the best (points)", "verdict"],
            [
                [r.profile, r.curve + (" (reference)" if r.reference else ""), percent(r.avg_acc),
                 "" if r.verdict == "best" else percent(r.diff, r.diff_ci), r.verdict]
                for r in ranking.itertuples()
            ],
            [False, False, True, True, False],
        ),
        "",
    ]


def summary_markdown(
    trace: pd.DataFrame, clients: pd.DataFrame, scenario_name: str, target: float, notes: list[str],
    sections: list[str] = (), last_rounds: int = 1, shared_draws: bool = True,
) -> str:
    """The text of summary.md (see docs/results.md for how to read it); ``shared_draws``: the curves of a seed
    share their random numbers (the run's ``provenance.json`` says so), which the paired ranking states."""
    summary = summary_table(trace, clients, target, last_rounds)
    when = "after the last round" if last_rounds == 1 else f"each seed's mean over the evaluated rounds among the last {last_rounds}"
    ttt = time_to_target(trace, target)
    profiles = list(dict.fromkeys(trace["profile"]))
    curves = list(dict.fromkeys(trace["curve"]))
    units = dict(zip(ttt["profile"], ttt["time_unit"]))
    seeds = sorted(trace["seed"].unique().tolist())
    reach = {(row["curve"], row["profile"]): _time_to_target_cell(row) for _, row in ttt.iterrows()}
    lines = [
        f"# wirelessfl results: {scenario_name}",
        "",
        f"- scenario: `{scenario_name}`",
        f"- curves: {', '.join(curves)}",
        f"- network profiles: {', '.join(f'{p} (time in {units[p]})' for p in profiles)}",
        f"- seeds: {', '.join(str(s) for s in seeds)}; rounds: {int(trace['round'].max())}",
        "- accuracies are percentages of each client's own model on its own held-out test split, "
        f"mean over seeds ± the half-width of its {CONFIDENCE:.0%} Student-t interval (from two seeds on), {when}",
        "",
        "## Final accuracy",
        "",
        markdown_table(
            ["curve", "profile", "rounds", "final time", "avg acc (%)", "worst acc (%)", "p10 acc (%)", "worst group (%)",
             "aggregated (%)", f"last {CONVERGENCE_WINDOW} rounds (points)"],
            [
                [
                    r.curve,
                    r.profile,
                    str(int(r.rounds)),
                    f"{_num(r.final_time)} {r.time_unit}",
                    percent(r.avg_acc, r.avg_acc_ci),
                    percent(r.worst_acc, r.worst_acc_ci),
                    percent(r.p10_acc, r.p10_acc_ci),
                    percent(r.worst_group_acc),
                    percent(r.aggregated_fraction),
                    _signed_points(r.avg_acc_last_change),
                ]
                for r in summary.itertuples()
            ],
            [False, False] + [True] * 8,
        ),
        "",
        "'aggregated': the participants' uploads aggregated per round, mean over rounds and seeds ('n/a' for a "
        f"method that uploads nothing). 'last {CONVERGENCE_WINDOW} rounds': how much the average accuracy changed "
        f"from the last evaluated round at least {CONVERGENCE_WINDOW} rounds before the end to the last round, "
        "mean over seeds: a curve that still gains more than a point is ranked by the round budget, not at "
        "convergence.",
        *_warning_lines(loss_warnings(trace) + aggregation_warnings(trace) + convergence_warnings(trace)),
        "",
        f"## Time to target accuracy (average client accuracy >= {100 * target:.1f}%)",
        "",
        "First simulated time at which the average client accuracy reached the target, mean over seeds "
        f"± its {CONFIDENCE:.0%} interval (the round in brackets); 'not reached' if some seed never reached it.",
        "",
        markdown_table(
            ["curve"] + [f"{p} ({units[p]})" for p in profiles],
            [
                [curve] + [reach[curve, p] if (curve, p) in reach else "n/a" for p in profiles]
                for curve in curves
            ],
            [False] + [True] * len(profiles),
        ),
        "",
        "## Payload moved (totals over all rounds, mean over seeds)",
        "",
        "Model units: 1.0 = one full model. Bits = model units x model parameters x the profile's "
        "`bits_per_parameter` (32 unless set); 'unknown' where a round's bits are missing from the trace.",
        "",
        markdown_table(
            ["curve", "profile", "DL payload", "UL payload", "DL bits", "UL bits"],
            [
                [
                    r.curve,
                    r.profile,
                    _num(r.total_dl_payload),
                    _num(r.total_ul_payload),
                    _bits(r.total_dl_bits),
                    _bits(r.total_ul_bits),
                ]
                for r in summary.itertuples()
            ],
            [False, False, True, True, True, True],
        ),
        "",
        *_ranking_section(trace, last_rounds, shared_draws),
        *_fit_section(trace, last_rounds),
        "## Worst client (Table I style)",
        "",
        "Profile 'all': every profile gave every client the same final accuracy.",
        "",
        markdown_table(
            ["curve", "profile", "avg acc (%)", "worst client acc (%)", "clients", "seeds"],
            [
                [r.curve, r.profile, percent(r.avg_acc, r.avg_acc_ci), percent(r.worst_acc, r.worst_acc_ci), str(r.clients), str(r.seeds)]
                for r in worst_client_table(clients).itertuples()
            ],
            [False, False, True, True, True, True],
        ),
        "",
    ]
    lines.extend(sections)
    lines.extend(["## Notes", ""])
    lines.extend(f"- {note}" for note in notes or ["none"])
    return "\n".join(lines) + "\n"


def write_summary_md(
    run_dir, trace, clients, scenario_name: str, target: float, notes: list[str], sections: list[str] = (),
    last_rounds: int = 1, shared_draws: bool = True,
) -> Path:
    """Write ``run_dir/summary.md`` atomically and return its path; ``sections`` are markdown lines before the notes."""
    path = Path(run_dir) / "summary.md"
    atomic_write_text(
        path,
        summary_markdown(trace, clients, scenario_name, target, list(notes), list(sections), last_rounds, shared_draws),
    )
    return path
