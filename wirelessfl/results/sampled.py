"""summary.md's section on a sampled evaluation (``evaluation.clients``): how sure each estimate is.

With a sample, the trace's ``avg_acc`` of a round before the last is an
estimate of the mean client accuracy; ``avg_acc_lo`` / ``avg_acc_hi`` hold its
95% interval (``intervals.sample_mean_interval``). The last round is evaluated
in full, so the final tables are exact; this section shows the last sampled
round of every curve beside that exact final value.
"""

from __future__ import annotations

import pandas as pd

from wirelessfl.results.tables import identical_across_profiles, markdown_table, percent


def sample_table(trace: pd.DataFrame) -> pd.DataFrame:
    """Per curve, profile and seed: the last sampled round (fewer clients evaluated than at the last round),
    its estimate and interval, and the last round's exact ``avg_acc``. Empty without ``avg_acc_lo``."""
    if "avg_acc_lo" not in trace.columns:
        return pd.DataFrame()
    rows = []
    for (curve, profile, seed), unit in trace.groupby(["curve", "profile", "seed"], sort=False):
        final = unit.loc[unit["round"].idxmax()]
        sampled = unit[unit["evaluated_clients"] < final["evaluated_clients"]]
        if sampled.empty:
            continue
        last = sampled.loc[sampled["round"].idxmax()]
        rows.append({
            "curve": curve, "profile": profile, "seed": seed, "round": int(last["round"]),
            "clients": int(last["evaluated_clients"]), "population": int(final["evaluated_clients"]),
            "avg_acc": last["avg_acc"], "low": last["avg_acc_lo"], "high": last["avg_acc_hi"],
            "final_round": int(final["round"]), "final_acc": final["avg_acc"],
        })
    return pd.DataFrame(rows)


def sample_section(trace: pd.DataFrame) -> list[str]:
    """The section's lines (none without a sampled evaluation); profile 'all' where every profile agrees."""
    table = sample_table(trace)
    if table.empty:
        return []
    same = {curve for curve, rows in trace.groupby("curve", sort=False) if identical_across_profiles(rows, ["seed", "round"], "avg_acc")}
    shown = table[~table["curve"].isin(same)]
    merged = table[table["curve"].isin(same)].drop_duplicates(["curve", "seed"]).assign(profile="all")
    table = pd.concat([shown, merged]).sort_values(["curve", "profile", "seed"], kind="stable")
    return [
        "## Sampled evaluation (`evaluation.clients`)",
        "",
        "Rounds before the last evaluated a seeded sample of the training clients (the same clients for every "
        "curve of a seed and round); their average accuracy is an estimate of the mean over all clients, given "
        "with its 95% interval (Student t with the finite-population correction). The last round evaluated "
        "every client: its value is exact.",
        "",
        markdown_table(
            ["curve", "profile", "seed", "last sampled round", "clients", "estimate (%)", "95% interval (%)", "last round, all clients (%)"],
            [
                [r.curve, r.profile, str(r.seed), str(r.round), f"{r.clients} of {r.population}", percent(r.avg_acc),
                 f"{percent(r.low)} to {percent(r.high)}", f"{percent(r.final_acc)} (round {r.final_round})"]
                for r in table.itertuples()
            ],
            [False, False, True, True, True, True, True, True],
        ),
        "",
    ]
