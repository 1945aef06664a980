"""Trade-off figures of a sweep table, checked on a hand-made 2 x 2 x 2 grid (rho x mu x k) with known times.

Times to target per (rho, mu) cell and curve, (seed 0, seed 1); "-" = not reached:

    cell          fedavg    ucfl streams=1  ucfl streams=4  ucfl streams=auto
    rho=1 mu=1    9, 11     11, 13          5, 7            6, 7
    rho=4 mu=1    19, 21    14, 16          -, -            15, -
    rho=1 mu=inf  4, 6      8, 10           3, -            -, -
    rho=4 mu=inf  -, -      -, -            -, -            -, -

So by hand (mean over the seeds that reached; every-seed curves rank first):
fastest curve (1,1) ucfl streams=4 6.0, (4,1) ucfl streams=1 15.0, (1,inf)
fedavg 5.0, (4,inf) not reached; best k (1,1) 4, (4,1) 1, (1,inf) 1 (k=4's
3.0 is one seed of two), (4,inf) not reached. Final worst-user accuracy:
fedavg 0.30, k=1 0.35, k=4 0.60, auto 0.55, plus 0.01 on seed 1.

Two seeds 2 apart give a 95% t-interval of ± 12.706 (t = 12.706 at 1 degree of
freedom, sd sqrt(2), n = 2); auto's 6 and 7 give ± 6.35. So every pair of
intervals overlaps. But a tie is read seed by seed: seed 1 is 2 slower than seed
0 for most curves, so their differences are the same in both seeds (interval
± 0) and the faster one wins; only k=4 (5, 7) against auto (6, 7) differs by 1
and 0, ± 6.35, a tie.
"""

import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.results import tradeoff
from wirelessfl.results.tradeoff import pareto_front, seed_summary, tradeoff_figures, write_tradeoff_figures

NR = math.nan
K = "algorithms.ucfl.streams"
AXES = ["rho", "mu", K]
TIMES = {
    (1, 1): {"fedavg": (9, 11), "ucfl streams=1": (11, 13), "ucfl streams=4": (5, 7), "ucfl streams=auto": (6, 7)},
    (4, 1): {"fedavg": (19, 21), "ucfl streams=1": (14, 16), "ucfl streams=4": (NR, NR), "ucfl streams=auto": (15, NR)},
    (1, math.inf): {"fedavg": (4, 6), "ucfl streams=1": (8, 10), "ucfl streams=4": (3, NR), "ucfl streams=auto": (NR, NR)},
    (4, math.inf): {curve: (NR, NR) for curve in ("fedavg", "ucfl streams=1", "ucfl streams=4", "ucfl streams=auto")},
}
WORST = {"fedavg": 0.3, "ucfl streams=1": 0.35, "ucfl streams=4": 0.6, "ucfl streams=auto": 0.55}


def _row(point: str, base: str, curve: str, seed: int, time: float, worst: float, **axes) -> dict:
    algorithm, _, variant = curve.partition(" ")
    return {
        "point": point,
        **axes,
        "base_profile": base,
        "profile": f"{base} {point}",
        "curve": curve,
        "algorithm": algorithm,
        "variant": variant,
        "seed": seed,
        "status": "ok",
        "error": "",
        "target": 0.6,
        "time_to_target": time,
        "time_unit": "T_dl",
        "rounds_to_target": time,
        "final_avg_acc": worst + 0.2,
        "final_worst_acc": worst,
        "final_p10_acc": worst + 0.1,
        "dl_bits": 1e6,
        "ul_bits": 2e6,
        "total_time": 30.0,
    }


def make_table(bases=("wired",)) -> pd.DataFrame:
    rows = []
    for base in bases:
        for (rho, mu), curves in TIMES.items():
            for curve, times in curves.items():
                variant = curve.partition(" ")[2]
                k = variant.split("=")[1] if variant else None
                k = int(k) if k and k.isdigit() else k
                for seed, time in enumerate(times):
                    axes = {"rho": rho, "mu": mu, K: k}
                    rows.append(_row(f"rho={rho} mu={mu:g}", base, curve, seed, time, WORST[curve] + 0.01 * seed, **axes))
    return pd.DataFrame(rows)


def _traces(fig):
    """The (values, grey overlay) heatmap pair of every panel."""
    return [(fig.data[i], fig.data[i + 1]) for i in range(0, len(fig.data), 2)]


def _cells(trace) -> dict:
    return {(x, y): (trace.z[i][j], trace.text[i][j]) for i, y in enumerate(trace.y) for j, x in enumerate(trace.x)}


def test_seeds_are_aggregated_over_the_seeds_that_reached():
    entries = seed_summary(make_table(), AXES).set_index(["point", "label"])
    assert entries.loc[("rho=1 mu=1", "fedavg"), ["time", "reached", "seeds"]].tolist() == [10.0, 2, 2]
    assert entries.loc[("rho=1 mu=inf", "ucfl streams=4"), ["time", "reached", "seeds"]].tolist() == [3.0, 1, 2]
    assert entries.loc[("rho=4 mu=1", "ucfl streams=auto"), ["time", "reached"]].tolist() == [15.0, 1]
    assert math.isnan(entries.loc[("rho=4 mu=inf", "fedavg"), "time"])
    assert entries.loc[("rho=1 mu=1", "ucfl streams=4"), "worst_acc"] == pytest.approx(0.605)
    assert entries.loc[("rho=1 mu=1", "ucfl streams=4"), ["k", "method"]].tolist() == ["4", "ucfl"]
    assert entries.loc[("rho=1 mu=1", "ucfl streams=auto"), ["k", "method"]].tolist() == ["auto", "ucfl streams=auto"]
    assert entries.loc[("rho=1 mu=1", "fedavg"), "method"] == "fedavg"


@pytest.fixture(scope="module")
def maps():
    """The maps of ``make_table()`` over AXES, drawn once for the tests that only read them."""
    return tradeoff_figures(make_table(), AXES)


def test_time_map_shows_the_fastest_curve_and_not_reached_in_grey(maps):
    fig = maps["time_to_target"]
    ((values, grey),) = _traces(fig)
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("ρ = T_ul / T_dl", "μ (compute-time rate, 1 / T_dl)")
    assert fig.layout.coloraxis.colorbar.title.text == "time to target (T_dl)"
    assert "mean over the seeds that reached the target ± 95% t-interval</sup><br><sup>tie: the first two's per-seed difference has a 95% interval holding 0" in fig.layout.title.text
    assert (list(values.x), list(values.y)) == (["1", "4"], ["1", "inf"])
    cells = _cells(values)
    assert cells["1", "1"] == (6.0, "tie:<br>ucfl streams=4: 6.00 ± 12.7<br>ucfl streams=auto: 6.50 ± 6.35")
    # auto is as fast on mean but one seed of two; fedavg's interval overlaps, but it is 5 slower in both seeds
    assert cells["4", "1"] == (15.0, "ucfl streams=1<br>15.0 ± 12.7")
    assert cells["1", "inf"] == (5.0, "fedavg<br>5.00 ± 12.7")  # 4 faster than k=1 in both seeds
    assert math.isnan(cells["4", "inf"][0]) and cells["4", "inf"][1] == ""
    shaded = _cells(grey)
    assert shaded["4", "inf"] == (0.0, "not reached")
    assert all(math.isnan(z) and text == "" for key, (z, text) in shaded.items() if key != ("4", "inf"))
    assert tradeoff.NOT_REACHED_COLOR in str(grey.colorscale)


def test_best_k_ranks_every_seed_first_and_prints_auto_beside_it(maps):
    fig = maps["best_k"]
    ((values, grey),) = _traces(fig)
    assert list(fig.layout.coloraxis.colorbar.ticktext) == ["1", "4"]
    cells = _cells(values)
    assert cells["1", "1"] == (1, "k=4<br>6.00 ± 12.7<br>auto: 6.50 ± 6.35")  # 6 faster than k=1 in both seeds
    assert cells["4", "1"] == (0, "k=1<br>15.0 ± 12.7<br>auto: 15.0*")
    assert cells["1", "inf"] == (0, "k=1<br>9.00 ± 12.7<br>auto: not reached")  # k=4: 3.0 on one seed of two
    assert _cells(grey)["4", "inf"] == (0.0, "not reached<br>auto: not reached")


def test_the_best_k_colour_bar_lists_only_the_k_some_cell_took():
    table = make_table()
    table = table[table["point"] == "rho=4 mu=1"]  # k=1 wins; k=4 competes but never reaches the target
    fig = tradeoff_figures(table, AXES)["best_k"]
    ((values, _),) = _traces(fig)
    assert list(fig.layout.coloraxis.colorbar.ticktext) == ["1"] and list(fig.layout.coloraxis.colorbar.tickvals) == [0]
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (-0.5, 0.5)
    assert _cells(values)["4", "1"] == (0, "k=1<br>15.0 ± 12.7<br>auto: 15.0*")
    nowhere = make_table()
    nowhere = nowhere[nowhere["point"] == "rho=4 mu=inf"]  # no k reaches the target: no colour bar at all
    fig = tradeoff_figures(nowhere, AXES)["best_k"]
    assert list(fig.layout.coloraxis.colorbar.ticktext) == [] and fig.layout.coloraxis.showscale is False


def test_best_method_groups_stream_counts_into_one_method(maps):
    fig = maps["best_method"]
    ((values, _),) = _traces(fig)
    methods = list(fig.layout.coloraxis.colorbar.ticktext)
    assert methods == ["fedavg", "ucfl"]  # ucfl streams=auto wins no cell, so the colour bar does not list it
    cells = _cells(values)
    assert cells["1", "1"] == (1, "tie:<br>ucfl streams=4: 6.00 ± 12.7<br>ucfl streams=auto: 6.50 ± 6.35")
    assert cells["4", "1"] == (1, "ucfl streams=1<br>15.0 ± 12.7")
    assert cells["1", "inf"] == (0, "fedavg<br>5.00 ± 12.7")


def _three_seed_table(oracle: tuple[float, float, float], **more: tuple[float, float, float]) -> pd.DataFrame:
    """One cell, three seeds: k=1 at 10, 11, 12 and k=4 at 20, 21, 22 (intervals ± 2.48, apart), k=20 at
    10, 13, 16 (± 7.45, overlapping k=1's), oracle at ``oracle``; ``more`` adds curves (``k2=(...)``)."""
    times = {"ucfl streams=1": (10, 11, 12), "ucfl streams=4": (20, 21, 22), "ucfl streams=20": (10, 13, 16), "oracle": oracle}
    times.update({f"ucfl streams={name[1:]}": values for name, values in more.items()})
    rows = []
    for curve, values in times.items():
        k = curve.partition("=")[2]
        for seed, time in enumerate(values):
            rows.append(_row("rho=1 mu=1", "wired", curve, seed, time, 0.5, rho=1, mu=1, **{K: int(k) if k else None}))
    return pd.DataFrame(rows)


def test_a_tie_is_read_from_the_seed_by_seed_difference():
    """k=1 (10, 11, 12) against k=20 (10, 13, 16): differences 0, 2, 4, mean 2 ± 4.97 (t(0.975, 2) 2 / sqrt(3)): a tie.
    Against k=2 at 12, 13, 14 the intervals overlap (± 2.48 each), but k=2 is 2 slower in every seed: no tie."""
    assert tradeoff.paired_difference({0: 10, 1: 13, 2: 16}, {0: 10, 1: 11, 2: 12}) == pytest.approx((2.0, 4.302653 * 2 / math.sqrt(3)))
    assert tradeoff.paired_difference({0: 1.0, 1: math.nan}, {0: 0.0, 1: 5.0, 7: 3.0}) == (1.0, pytest.approx(math.nan, nan_ok=True))
    table = _three_seed_table((1.0, 1.0, 1.0))
    cells = _cells(_traces(tradeoff_figures(table[table["curve"] != "ucfl streams=4"], AXES)["best_k"])[0][0])
    assert cells["1", "1"][1].startswith("tie:<br>k=1: 11.0 ± 2.48<br>k=20: 13.0 ± 7.45")
    close = _three_seed_table((1.0, 1.0, 1.0), k2=(12, 13, 14))
    close = close[close["curve"].isin(["ucfl streams=1", "ucfl streams=2"])]
    cells = _cells(_traces(tradeoff_figures(close, AXES)["best_k"])[0][0])
    assert cells["1", "1"] == (0, "k=1<br>11.0 ± 2.48")


def test_overlapping_intervals_are_a_tie_and_apart_ones_are_not():
    table = _three_seed_table((1.0, 1.0, 1.0))
    entries = seed_summary(table, AXES).set_index("label")
    assert entries.loc["ucfl streams=1", "half"] == pytest.approx(4.302653 / math.sqrt(3))  # t(0.975, 2) sd 1 / sqrt(3)
    assert bool(entries.loc["oracle", "reference"]) and not entries.loc["ucfl streams=1", "reference"]
    cells = _cells(_traces(tradeoff_figures(table, AXES)["best_k"])[0][0])
    assert cells["1", "1"] == (0, "tie:<br>k=1: 11.0 ± 2.48<br>k=20: 13.0 ± 7.45")
    apart = table[table["curve"] != "ucfl streams=20"]
    cells = _cells(_traces(tradeoff_figures(apart, AXES)["best_k"])[0][0])
    assert cells["1", "1"] == (0, "k=1<br>11.0 ± 2.48")


def test_oracle_is_shown_beside_the_contest_and_never_wins():
    """Oracle is the fastest curve here (1.0 on every seed) but not a contestant."""
    figs = tradeoff_figures(_three_seed_table((1.0, 1.0, 1.0)), AXES)
    time_cells = _cells(_traces(figs["time_to_target"])[0][0])
    assert time_cells["1", "1"] == (11.0, "tie:<br>ucfl streams=1: 11.0 ± 2.48<br>ucfl streams=20: 13.0 ± 7.45<br>oracle: 1.00 ± 0.00")
    method_cells = _cells(_traces(figs["best_method"])[0][0])
    assert method_cells["1", "1"][1].startswith("tie:<br>ucfl streams=1: 11.0 ± 2.48<br>ucfl streams=20: 13.0 ± 7.45")
    assert list(figs["best_method"].layout.coloraxis.colorbar.ticktext) == ["ucfl"]
    assert "oracle (knows the true groups) shown beside, not ranked" in figs["best_method"].layout.title.text
    only_oracle = _three_seed_table((1.0, 1.0, 1.0))
    only_oracle = only_oracle[only_oracle["algorithm"] == "oracle"]
    grey = _cells(_traces(tradeoff_figures(only_oracle, AXES)["best_method"])[0][1])
    assert grey["1", "1"] == (0.0, "only references ran<br>oracle: 1.00 ± 0.00")


def test_the_references_are_the_algorithms_that_know_the_true_groups():
    from wirelessfl.algorithms import ALGORITHMS

    assert tradeoff.REFERENCE_ALGORITHMS == {name for name, cls in ALGORITHMS.items() if cls.knows_truth}


def test_a_one_seed_map_says_it_is_one_draw():
    table = make_table()
    fig = tradeoff_figures(table[table["seed"] == 0], AXES)["time_to_target"]
    assert "one seed: no interval, a tie cannot be seen; read each cell as one draw" in fig.layout.title.text
    assert _cells(_traces(fig)[0][0])["1", "1"] == (5.0, "ucfl streams=4<br>5.00")


def test_a_cell_reached_only_by_some_seeds_is_marked_and_failed_units_are_left_out():
    table = make_table()
    only_partial = (table["point"] == "rho=4 mu=1") & ~((table["curve"] == "ucfl streams=auto") & (table["seed"] == 0))
    table.loc[only_partial, "time_to_target"] = NR
    everything_failed = table["point"] == "rho=4 mu=inf"
    table.loc[everything_failed, ["status", "error"]] = ["failed", "boom"]
    table.loc[(table["point"] == "rho=1 mu=1") & (table["curve"] == "ucfl streams=4") & (table["seed"] == 1), "status"] = "failed"
    figs = tradeoff_figures(table, AXES)
    ((values, grey),) = _traces(figs["time_to_target"])
    assert _cells(values)["4", "1"] == (15.0, "ucfl streams=auto<br>15.0*")
    assert _cells(values)["1", "1"] == (5.0, "ucfl streams=4<br>5.00")  # the failed seed (7) is not in the mean
    assert _cells(grey)["4", "inf"] == (1.0, "failed")
    assert tradeoff.FAILED_COLOR in str(grey.colorscale)


def test_one_panel_per_facet_value_and_per_base_profile():
    figs = tradeoff_figures(make_table(bases=("wired", "slow")), AXES, x="rho", y=K, facet="mu")
    fig = figs["time_to_target"]
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["mu=1, profile=wired", "mu=1, profile=slow", "mu=inf, profile=wired", "mu=inf, profile=slow"]
    assert len(_traces(fig)) == 4
    assert fig.layout.yaxis.title.text == "k = downlink streams (ucfl)"
    values, _ = _traces(fig)[2]  # mu=inf, wired: only ucfl curves have a k
    assert list(values.y) == ["1", "4", "auto"]
    assert _cells(values)["1", "4"] == (3.0, "ucfl streams=4<br>3.00*")
    # The best maps keep the facet and take rho as x; k competes inside each cell.
    best_k = figs["best_k"]
    assert [a.text for a in best_k.layout.annotations] == titles
    values, _ = _traces(best_k)[2]
    assert (list(values.x), list(values.y)) == (["1", "4"], [""])
    assert _cells(values)["1", ""] == (0, "k=1<br>9.00 ± 12.7<br>auto: not reached")


def test_base_profile_panels_take_the_given_labels():
    labels = {"wired": "wired: t_min=1", "slow": "slow: t_min=2"}
    figs = tradeoff_figures(make_table(bases=("wired", "slow")), AXES, x="rho", y=K, facet="mu", profile_labels=labels)
    titles = [a.text for a in figs["time_to_target"].layout.annotations]
    assert titles == ["mu=1, wired: t_min=1", "mu=1, slow: t_min=2", "mu=inf, wired: t_min=1", "mu=inf, slow: t_min=2"]
    assert [a.text for a in figs["best_method"].layout.annotations] == titles


def test_axes_read_back_from_csv_give_the_same_maps(tmp_path, maps):
    table = make_table()
    table.to_csv(tmp_path / "sweep.csv", index=False)
    again = pd.read_csv(tmp_path / "sweep.csv")
    assert not pd.api.types.is_numeric_dtype(again[K])  # "1", "4", "auto" and NaN read back as strings
    figs, figs_again = maps, tradeoff_figures(again, AXES)
    for name in ("time_to_target", "best_k", "best_method"):
        first, second = figs[name], figs_again[name]
        assert [list(t.x) for t in first.data] == [list(t.x) for t in second.data]
        assert [list(t.y) for t in first.data] == [list(t.y) for t in second.data]
        np.testing.assert_array_equal(np.asarray(first.data[0].z, float), np.asarray(second.data[0].z, float))


def test_pareto_front_by_hand():
    # A(1, .5) B(2, .7) C(3, .6) D(2, .4) E(4, .9) F(2, .7): C is beaten by B, D by A; B and F tie.
    assert pareto_front([1, 2, 3, 2, 4, 2], [0.5, 0.7, 0.6, 0.4, 0.9, 0.7]).tolist() == [0, 1, 5, 4]
    assert pareto_front([], []).tolist() == []


def test_pareto_figure_marks_the_front_and_counts_what_never_reached():
    points = {"A": (1, 0.5), "B": (2, 0.7), "C": (3, 0.6), "D": (2, 0.4), "E": (4, 0.9), "F": (NR, 0.95)}
    table = pd.DataFrame([_row("rho=1", "wired", curve, 0, t, w, rho=1) for curve, (t, w) in points.items()])
    fig = tradeoff_figures(table, ["rho"])["pareto"]
    front = next(t for t in fig.data if t.name == "Pareto front")
    assert list(front.x) == [1, 2, 4]
    assert list(front.y) == [0.5, 0.7, 0.9]
    assert [row[0] for row in front.customdata] == ["A", "B", "E"]
    assert [t.name for t in fig.data] == ["A", "B", "C", "D", "E", "Pareto front"]
    assert "1 (point, curve) pairs never reached the target and are not shown" in fig.layout.title.text
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("time to target (T_dl)", "final worst-user accuracy")


def test_default_axes_are_the_first_two_network_axes_and_a_learning_axis_gives_panels():
    table = make_table().assign(**{"training.lr": 0.1})
    table["point"] = table["point"] + " training.lr=0.1"
    fig = tradeoff_figures(table, ["training.lr", K, "mu", "rho"])["time_to_target"]
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("μ (compute-time rate, 1 / T_dl)", "ρ = T_ul / T_dl")
    assert [a.text for a in fig.layout.annotations] == ["training.lr=0.1"]


def test_without_stream_counts_there_is_no_best_k_map(tmp_path):
    table = make_table()
    table = table[table["algorithm"] == "fedavg"].drop(columns=[K])
    figs = tradeoff_figures(table, ["rho", "mu"])
    assert list(figs) == ["time_to_target", "best_method", "pareto"]
    notes = write_tradeoff_figures(tmp_path, table, ["rho", "mu"], image_format=None)
    assert notes[0] == "no best_k map: no curve in the sweep has a number of streams (e.g. ucfl streams variants)"


def test_bad_arguments_are_one_line():
    table = make_table()
    with pytest.raises(ValueError, match=r"^tradeoff: x must be one of the sweep axes \['rho', 'mu', 'algorithms.ucfl.streams'\], got 'lr'$"):
        tradeoff_figures(table, AXES, x="lr")
    with pytest.raises(ValueError, match=r"^tradeoff: x, y and facet must be different axes, got x='rho', y='rho', facet=None$"):
        tradeoff_figures(table, AXES, x="rho", y="rho")
    with pytest.raises(ValueError, match=r"^tradeoff: the sweep table has no column 'channels' \(needs \["):
        tradeoff_figures(table, [*AXES, "channels"])


@pytest.mark.draws_figures
def test_written_files_share_one_plotly_js_and_each_has_its_png(tmp_path):
    notes = write_tradeoff_figures(tmp_path, make_table(), AXES)
    assert notes == []
    names = sorted(p.name for p in tmp_path.iterdir())
    stems = ["best_k", "best_method", "pareto", "time_to_target"]
    assert names == sorted([f"{s}.html" for s in stems] + [f"{s}.png" for s in stems] + ["plotly.min.js"])
    html = (tmp_path / "best_k.html").read_text(encoding="utf-8")
    assert '<script charset="utf-8" src="plotly.min.js"></script>' in html
    assert len(html) < 100_000  # plotly.js is not embedded
    for stem in stems:
        assert (tmp_path / f"{stem}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), stem


def test_html_only_says_how_to_get_the_static_maps(tmp_path):
    notes = write_tradeoff_figures(tmp_path, make_table(), AXES, image_format=None)
    assert notes == ["trade-off figures as HTML only: `wirelessfl plot SWEEP_DIR` draws their PNGs"]
    assert not list(tmp_path.glob("*.png"))
    assert (tmp_path / "time_to_target.html").exists()


def test_the_static_maps_show_every_cell_text_and_name_the_winners_on_the_colour_bar(maps):
    from wirelessfl.results.static import static_figure

    figures = maps
    drawn = static_figure(figures["best_k"])
    texts = {t.get_text() for axes in drawn.axes for t in axes.texts}
    cells = {str(t).replace("<br>", "\n") for trace in figures["best_k"].data for row in trace.text for t in row if t}
    assert cells and cells <= texts
    colour_bar = drawn.axes[-1]
    assert [t.get_text() for t in colour_bar.get_yticklabels()] == list(figures["best_k"].layout.coloraxis.colorbar.ticktext) == ["1", "4"]


def _stream_rows(variants: dict[str, str]) -> pd.DataFrame:
    """One seed of ``ucfl streams=1`` and ``ucfl streams=4`` at one point, their ``variant`` text as given."""
    return pd.DataFrame([_row("rho=1 mu=1", "wired", curve, 0, 5.0, 0.5, rho=1, mu=1.0) | {"variant": variant}
                         for curve, variant in variants.items()])


def test_k_and_the_method_are_read_from_the_parameter_columns_not_the_curve_name():
    """sweep.csv's ``params.streams`` column says k; the variant text (here left empty) is not read."""
    table = _stream_rows({"ucfl streams=1": "", "ucfl streams=4": ""})
    table["params.streams"] = pd.array([1, 4], dtype="Int64")
    summary = seed_summary(table, ["rho", "mu"])
    assert summary["k"].tolist() == ["1", "4"]
    assert summary["method"].tolist() == ["ucfl", "ucfl"]


def test_a_table_written_before_the_parameter_columns_reads_k_from_the_variant_text():
    summary = seed_summary(_stream_rows({"ucfl streams=1": "streams=1", "ucfl streams=4": "streams=4"}), ["rho", "mu"])
    assert summary["k"].tolist() == ["1", "4"]
    assert summary["method"].tolist() == ["ucfl", "ucfl"]
