import math

import pandas as pd
import pytest

from wirelessfl.results.tables import (
    convergence_warnings,
    fit_table,
    last_change,
    last_rounds_rows,
    markdown_table,
    paired_ranking,
    summary_table,
    time_to_target,
    worst_client_table,
    write_summary_md,
)


def _row(table: pd.DataFrame, curve: str, profile: str) -> pd.Series:
    selected = table[(table["curve"] == curve) & (table["profile"] == profile)]
    assert len(selected) == 1
    return selected.iloc[0]


def test_time_to_target_by_hand(trace):
    table = time_to_target(trace, 0.6)
    assert list(zip(table["curve"], table["profile"])) == [
        ("fedavg", "wired"), ("fedavg", "slow"), ("ucfl k=4", "wired"), ("ucfl k=4", "slow"),
    ]  # fmt: skip
    # fedavg reaches 0.6 at round 2 (seed 0) and round 1 (seed 1, 0.6 >= 0.6 counts).
    fedavg_wired = _row(table, "fedavg", "wired")
    assert fedavg_wired["time"] == pytest.approx((2 * 2.0 + 1 * 3.0) / 2)
    assert fedavg_wired["round"] == pytest.approx(1.5)
    assert fedavg_wired["time_std"] == pytest.approx(math.sqrt(0.5))
    assert (fedavg_wired["seeds_reached"], fedavg_wired["seeds"]) == (2, 2)
    assert _row(table, "fedavg", "slow")["time"] == pytest.approx((2 * 6.0 + 1 * 7.0) / 2)
    # ucfl reaches it at round 1 (seed 0) and round 2 (seed 1).
    assert _row(table, "ucfl k=4", "wired")["time"] == pytest.approx((1 * 3.0 + 2 * 4.0) / 2)
    assert _row(table, "ucfl k=4", "slow")["time"] == pytest.approx((1 * 9.0 + 2 * 10.0) / 2)
    assert set(table["time_unit"]) == {"T_dl"}


def test_time_to_target_not_reached_by_every_seed_is_nan(trace):
    table = time_to_target(trace, 0.88)
    fedavg, ucfl = _row(table, "fedavg", "wired"), _row(table, "ucfl k=4", "wired")
    assert math.isnan(fedavg["time"]) and fedavg["seeds_reached"] == 0
    assert math.isnan(ucfl["time"]) and math.isnan(ucfl["round"]) and ucfl["seeds_reached"] == 1


def test_time_to_target_reached_by_the_initial_models_is_time_zero(trace):
    table = time_to_target(trace, 0.1)
    assert table["time"].tolist() == [0.0] * 4
    assert table["round"].tolist() == [0.0] * 4


def test_time_to_target_on_another_metric(trace):
    # worst_acc = avg_acc - 0.2: fedavg reaches 0.45 at round 2 in both seeds (0.4 at round 1 of seed 1).
    row = _row(time_to_target(trace, 0.45, metric="worst_acc"), "fedavg", "wired")
    assert row["time"] == pytest.approx((4.0 + 6.0) / 2)
    assert row["metric"] == "worst_acc"


def test_time_to_target_does_not_depend_on_row_order(trace):
    shuffled = trace.sample(frac=1.0, random_state=0)
    pd.testing.assert_series_equal(
        time_to_target(shuffled, 0.6).set_index(["curve", "profile"])["time"].sort_index(),
        time_to_target(trace, 0.6).set_index(["curve", "profile"])["time"].sort_index(),
    )


@pytest.mark.parametrize("target", [0, -0.5, 1.5, float("nan"), "0.8", True])
def test_bad_target_is_rejected(trace, target):
    with pytest.raises(ValueError, match=r"^target accuracy must be a number in \(0, 1\], got "):
        time_to_target(trace, target)


def test_bad_metric_is_rejected(trace):
    with pytest.raises(ValueError, match=r"^metric must be one of \['avg_acc', 'worst_acc', 'p10_acc', 'avg_val_acc'\], got 'loss'$"):
        time_to_target(trace, 0.5, metric="loss")


def test_summary_table_by_hand(trace, clients):
    table = summary_table(trace, clients, 0.6)
    assert len(table) == 4
    wired = _row(table, "fedavg", "wired")
    assert wired["avg_acc"] == pytest.approx(0.75)
    assert wired["avg_acc_std"] == pytest.approx(math.sqrt(0.005))
    assert wired["worst_acc"] == pytest.approx(0.55)
    assert wired["p10_acc"] == pytest.approx(0.65)
    assert (wired["rounds"], wired["seeds"], wired["clients"]) == (2, 2, 4)
    assert wired["final_time"] == pytest.approx((4.0 + 6.0) / 2)
    assert wired["time_to_target"] == pytest.approx(3.5)
    assert wired["round_to_target"] == pytest.approx(1.5)
    assert (wired["total_dl_payload"], wired["total_ul_payload"]) == (2.0, 8.0)
    assert math.isnan(wired["total_dl_bits"]) and math.isnan(wired["total_ul_bits"])
    # worst group: seed 0 groups (0.65, 0.75) -> 0.65; seed 1 (0.8, 0.8) -> 0.8.
    assert wired["worst_group_acc"] == pytest.approx(0.725)
    slow = _row(table, "ucfl k=4", "slow")
    assert (slow["total_dl_payload"], slow["total_dl_bits"], slow["total_ul_bits"]) == (8.0, 8000.0, 8000.0)
    assert slow["final_time"] == pytest.approx((18.0 + 20.0) / 2)
    assert slow["avg_acc"] == pytest.approx(0.875)


def test_summary_bits_are_unknown_when_any_round_is_unknown(trace, clients):
    partly = trace.copy()
    partly.loc[(partly["profile"] == "slow") & (partly["round"] == 1) & (partly["seed"] == 0), "dl_bits"] = math.nan
    row = _row(summary_table(partly, clients, 0.6), "fedavg", "slow")
    # seed 0 unknown, seed 1 known (2000): the mean over seeds is unknown too.
    assert math.isnan(row["total_dl_bits"])
    assert row["total_ul_bits"] == 8000.0


def test_worst_client_table_merges_identical_profiles(clients):
    table = worst_client_table(clients)
    assert table["profile"].tolist() == ["all", "all"]
    fedavg = _row(table, "fedavg", "all")
    assert fedavg["avg_acc"] == pytest.approx(0.75)
    assert fedavg["worst_acc"] == pytest.approx((0.6 + 0.7) / 2)
    assert fedavg["worst_acc_std"] == pytest.approx(math.sqrt(0.005))
    assert (fedavg["clients"], fedavg["seeds"]) == (4, 2)


def test_worst_client_table_splits_profiles_that_differ(clients):
    changed = clients.copy()
    changed.loc[(changed["curve"] == "fedavg") & (changed["profile"] == "slow") & (changed["client"] == 0), "accuracy"] = 0.2
    table = worst_client_table(changed)
    assert list(zip(table["curve"], table["profile"])) == [("fedavg", "wired"), ("fedavg", "slow"), ("ucfl k=4", "all")]
    assert _row(table, "fedavg", "slow")["worst_acc"] == pytest.approx(0.2)
    assert _row(table, "fedavg", "wired")["worst_acc"] == pytest.approx(0.65)


def test_markdown_table_exact_text():
    text = markdown_table(["curve", "acc"], [["a|b", "1.0"], ["c", "2.0"]], [False, True])
    assert text == "| curve | acc |\n|:---|---:|\n| a\\|b | 1.0 |\n| c | 2.0 |"
    with pytest.raises(ValueError, match=r"^markdown_table: every row and align_right must have 2 cells, like the header$"):
        markdown_table(["curve", "acc"], [["only one"]])


def test_write_summary_md_content(tmp_path, trace, clients):
    """Two seeds: ± t(0.975, 1) * |a - b| / 2 (t = 12.706): fedavg's final 70 / 80% -> 63.5, its times 3 / 4 -> 6.4."""
    path = write_summary_md(tmp_path, trace, clients, "toy", 0.6, ["PNG export skipped: no Chrome"])
    assert path == tmp_path / "summary.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# wirelessfl results: toy\n")
    assert "- scenario: `toy`" in text
    assert "- network profiles: wired (time in T_dl), slow (time in T_dl)" in text
    assert "| fedavg | wired | 2 | 5.0 T_dl | 75.0 ± 63.5 | 55.0 ± 63.5 | 65.0 ± 63.5 | 72.5 |" in text
    assert "## Time to target accuracy (average client accuracy >= 60.0%)" in text
    assert "| fedavg | 3.5 ± 6.4 (round 1.5) | 9.5 ± 31.8 (round 1.5) |" in text
    assert "| ucfl k=4 | 5.5 ± 31.8 (round 1.5) | 14.5 ± 69.9 (round 1.5) |" in text
    assert "| fedavg | wired | 2.0 | 8.0 | unknown | unknown |" in text
    assert "| ucfl k=4 | slow | 8.0 | 8.0 | 8000 | 8000 |" in text
    assert "| fedavg | all | 75.0 ± 63.5 | 65.0 ± 63.5 | 4 | 2 |" in text
    assert text.endswith("## Notes\n\n- PNG export skipped: no Chrome\n")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_write_summary_md_reports_targets_not_reached(tmp_path, trace, clients):
    text = write_summary_md(tmp_path, trace, clients, "toy", 0.88, []).read_text(encoding="utf-8")
    assert "| fedavg | not reached (0/2 seeds) | not reached (0/2 seeds) |" in text
    assert "| ucfl k=4 | not reached (1/2 seeds) | not reached (1/2 seeds) |" in text
    assert text.endswith("## Notes\n\n- none\n")


def test_last_rounds_one_is_the_last_round_and_more_average_the_evaluated_rounds_among_them(trace):
    columns = ["avg_acc", "worst_acc"]
    one = last_rounds_rows(trace, columns, 1).set_index(["curve", "profile", "seed"])
    last = trace[trace["round"] == trace["round"].max()].set_index(["curve", "profile", "seed"])
    pd.testing.assert_frame_equal(one[columns], last.loc[one.index, columns])
    two = last_rounds_rows(trace, columns, 2).set_index(["curve", "profile", "seed"])
    before = trace[trace["round"] == trace["round"].max() - 1].set_index(["curve", "profile", "seed"])
    expected = (last.loc[two.index, columns] + before.loc[two.index, columns]) / 2
    pd.testing.assert_frame_equal(two[columns], expected)
    gapped = trace.assign(avg_acc=trace["avg_acc"].where(trace["round"] != trace["round"].max() - 1))
    skipped = last_rounds_rows(gapped, ["avg_acc"], 2).set_index(["curve", "profile", "seed"])
    pd.testing.assert_series_equal(skipped["avg_acc"], last.loc[skipped.index, "avg_acc"])
    with pytest.raises(ValueError, match="last_rounds must be an int >= 1, got 0"):
        last_rounds_rows(trace, columns, 0)


def test_summary_table_over_the_last_rounds_changes_only_the_accuracies(trace, clients):
    one, two = summary_table(trace, clients, 0.6), summary_table(trace, clients, 0.6, last_rounds=2)
    accuracies = [f"{m}{s}" for m in ("avg_acc", "worst_acc", "p10_acc") for s in ("", "_std", "_ci")]
    pd.testing.assert_frame_equal(one.drop(columns=accuracies), two.drop(columns=accuracies))
    assert not one["avg_acc"].equals(two["avg_acc"])


def test_last_change_is_the_gain_over_the_last_window_rounds_by_hand():
    """Rounds 0-14, evaluated every 4th and at 14 (NaN between). Seed 0: 0.10 at round 4, 0.50 at 14; seed 1:
    0.30 at 4, 0.40 at 14. Window 10: the last evaluated round <= 4 is 4, so +0.40 and +0.10, mean +0.25;
    window 12: round 0 (0.0 for both), so +0.50 and +0.40; window 15: no such round, NaN."""
    rows = []
    for seed, (at4, at14) in enumerate([(0.10, 0.50), (0.30, 0.40)]):
        for r in range(15):
            value = {0: 0.0, 4: at4, 8: (at4 + at14) / 2, 12: at14, 14: at14}.get(r, math.nan)
            rows.append({"curve": "a", "profile": "p", "seed": seed, "round": r, "avg_acc": value})
    trace = pd.DataFrame(rows)
    assert last_change(trace).loc[("a", "p")] == pytest.approx(0.25)
    assert last_change(trace, window=12).loc[("a", "p")] == pytest.approx(0.45)
    assert math.isnan(last_change(trace, window=15).loc[("a", "p")])


def test_convergence_warnings_name_the_curves_still_moving_by_more_than_a_point():
    """Rounds 0-20, evaluated every 5th. a rises 0.50 -> 0.52 over its last 10 rounds (+2 points), b moves
    0.009 (under a point), c falls 0.60 -> 0.58: a and c are named, with their signed change; replayed through
    two profiles, one line; trained apart (b moves 3 points on slow only), one line per profile."""
    ends = {"a": (0.50, 0.52), "b": (0.700, 0.709), "c": (0.60, 0.58)}
    rows = [
        {"curve": curve, "profile": profile, "seed": seed, "round": r,
         "avg_acc": (start if r <= 10 else end) if r % 5 == 0 else math.nan}
        for curve, (start, end) in ends.items() for profile in ("wired", "slow") for seed in (0, 1)
        for r in range(21)
    ]  # fmt: skip
    trace = pd.DataFrame(rows)
    named = "a +2.0, c -2.0; the round budget, not convergence, ranks these"
    assert convergence_warnings(trace) == [
        f"on every profile, still moving by more than 1 point over the last 10 rounds (mean over seeds): {named}"
    ]
    slow_b = (trace["curve"] == "b") & (trace["profile"] == "slow") & (trace["round"] == 20)
    trace.loc[slow_b, "avg_acc"] = 0.73
    assert convergence_warnings(trace) == [
        f"on wired, still moving by more than 1 point over the last 10 rounds (mean over seeds): {named}",
        "on slow, still moving by more than 1 point over the last 10 rounds (mean over seeds): a +2.0, b +3.0, "
        "c -2.0; the round budget, not convergence, ranks these",
    ]
    assert convergence_warnings(trace, tolerance=0.05) == []
    assert convergence_warnings(trace, tolerance=0.025) == [  # only b's 3 points on slow exceed 2.5
        "on slow, still moving by more than 2.5 points over the last 10 rounds (mean over seeds): b +3.0; the round "
        "budget, not convergence, ranks these"
    ]
    assert convergence_warnings(trace[trace["round"] < 8]) == []  # no round 10 before the end: nothing measured


def test_fit_table_by_hand(trace, clients):
    """fit_acc = avg_acc + 0.1 + 0.05 * seed, fit_loss 0.2: at the last round fedavg's seeds fit 0.8 and 0.95
    against tests of 0.7 and 0.8, so fit 0.875, test 0.75 and a gap of 0.1 and 0.15 (mean 0.125); the
    summary gets the section only for a trace that has the columns."""
    with_fit = trace.assign(fit_acc=trace.avg_acc + 0.1 + 0.05 * trace.seed, fit_loss=0.2)
    row = _row(fit_table(with_fit), "fedavg", "wired")
    assert row.fit_acc == pytest.approx(0.875) and row.avg_acc == pytest.approx(0.75)
    assert row.gap == pytest.approx(0.125) and row.fit_loss == pytest.approx(0.2)
    assert row.gap_ci > 0 and row.fit_acc_ci > 0
    two = _row(fit_table(with_fit, last_rounds=2), "fedavg", "wired")  # rounds 1 and 2: fits 0.6, 0.8 and 0.75, 0.95
    assert two.fit_acc == pytest.approx((0.6 + 0.8 + 0.75 + 0.95) / 4)
    assert fit_table(trace).empty
    from wirelessfl.results.tables import summary_markdown

    assert "## Fit to the training data" not in summary_markdown(trace, clients, "toy", 0.6, [])
    text = summary_markdown(with_fit, clients, "toy", 0.6, [])
    assert "| fedavg | all | 87.5 ± " in text and "| 0.200 | 75.0 ± " in text  # replayed: one row for every profile
    apart = with_fit.assign(fit_acc=with_fit.fit_acc.where(with_fit.profile == "wired", with_fit.fit_acc - 0.1))
    text = summary_markdown(apart, clients, "toy", 0.6, [])
    section = text[text.index("## Fit") : text.index("## Worst")]
    assert "| fedavg | wired | 87.5 ± " in section and "| fedavg | slow | 77.5 ± " in section and "| all |" not in section


def _final_trace(values: dict[str, list[float]], profiles=("wired", "slow")) -> pd.DataFrame:
    """One final round per (curve, profile, seed) with the given accuracy per seed, the same on every profile."""
    return pd.DataFrame([
        {"curve": curve, "algorithm": curve.split("-")[0], "profile": profile, "seed": seed, "round": 5, "avg_acc": value}
        for curve, per_seed in values.items() for profile in profiles for seed, value in enumerate(per_seed)
    ])  # fmt: skip


def test_paired_ranking_by_hand():
    """Seeds spread the accuracies by 10 points, so separate intervals overlap everywhere; paired by seed, b
    is 1 point below a in every seed (interval 0: below the best), c is -3, +3, 0 against a (mean 0 with an
    interval: tied), and the oracle, 2 above a in every seed, is a reference: above the best, never it."""
    trace = _final_trace({
        "a": [0.50, 0.60, 0.70], "b-1": [0.49, 0.59, 0.69], "c": [0.47, 0.63, 0.70], "oracle": [0.52, 0.62, 0.72],
    })  # fmt: skip
    ranking = paired_ranking(trace).set_index("curve")
    assert set(ranking["profile"]) == {"all"}  # the same on both profiles
    assert ranking.loc["a", "verdict"] == "best" and ranking.loc["a", "avg_acc"] == pytest.approx(0.60)
    assert ranking.loc["b-1", "diff"] == pytest.approx(-0.01) and ranking.loc["b-1", "diff_ci"] == pytest.approx(0, abs=1e-12)
    assert ranking.loc["b-1", "verdict"] == "below the best"
    half_c = 4.302652729911275 * 0.03 / math.sqrt(3)  # t(0.975, 2) x std(-3, 3, 0 points) / sqrt(3)
    assert ranking.loc["c", "diff"] == pytest.approx(0) and ranking.loc["c", "diff_ci"] == pytest.approx(half_c)
    assert ranking.loc["c", "verdict"] == "tied with the best"
    assert ranking.loc["oracle", "verdict"] == "above the best" and bool(ranking.loc["oracle", "reference"])
    assert list(ranking.index) == ["oracle", "a", "c", "b-1"]
    apart = trace.assign(avg_acc=trace.avg_acc.where((trace.profile == "wired") | (trace.curve != "c"), 0.9))
    by_profile = paired_ranking(apart)
    assert set(by_profile["profile"]) == {"wired", "slow"}
    assert by_profile.set_index(["profile", "curve"]).loc[("slow", "c"), "verdict"] == "best"
    one_seed = paired_ranking(_final_trace({"a": [0.5], "b-1": [0.4]})).set_index("curve")
    assert one_seed.loc["b-1", "verdict"] == "one seed"


def test_summary_ranks_by_paired_differences_from_two_seeds_on(trace, clients):
    from wirelessfl.results.tables import summary_markdown

    text = summary_markdown(trace, clients, "toy", 0.6, [])
    assert "## Ranking, paired by seed" in text
    section = text[text.index("## Ranking") : text.index("## Worst")]
    ranking = paired_ranking(trace)
    for r in ranking.itertuples():
        assert f"| {r.profile} | {r.curve} | {100 * r.avg_acc:.1f} |" in section
    assert section.count("| best |") == ranking["profile"].nunique()
    assert "## Ranking" not in summary_markdown(trace[trace.seed == trace.seed.min()], clients, "toy", 0.6, [])
