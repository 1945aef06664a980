"""The paper comparison computes its verdicts from the traces: hand-made traces with known answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app
from wirelessfl.results.io import TRACE_COLUMNS, write_trace
from wirelessfl_papers.user_centric import CLAIMS, FIG3_CLAIMS, OUR_UCFL, PAPER_UCFL, ucfl_curves
from wirelessfl.results.reproduction import Run, Verdict, get_paper, paper_of, reproduction_markdown, setup_line
from wirelessfl_papers import adaptive_experts, fedem, papers, pflego, pflego_protocol

COVARIATE = "paper-emnist-covariate-label-shift"
ROUND_TIME = {"fedavg": 1.0, "local": 0.5, "oracle": 1.0, "cfl": 1.0, "fedfomo": 3.0,
              "ucfl streams=1": 1.0, "ucfl streams=4": 1.2, "ucfl streams=100": 2.0}  # fmt: skip


def make_run(tmp_path, scenario, finals, profiles=("wired",), rounds=4, round_time=None, dl=None):
    """A run whose accuracy rises linearly to ``finals[curve] = (avg, worst)`` by the last round."""
    rows, clients = [], []
    for profile, scale in zip(profiles, (1.0, 2.0, 3.0)):
        for curve, (avg, worst) in finals.items():
            algorithm, _, variant = curve.partition(" ")
            step = (round_time or ROUND_TIME).get(curve, 1.0) * scale
            for r in range(rounds + 1):
                row = dict.fromkeys(TRACE_COLUMNS, 0.0)
                row.update(
                    scenario=scenario, algorithm=algorithm, variant=variant, curve=curve, profile=profile, seed=0,
                    round=r, time=r * step, time_unit="T_dl", round_time=step if r else 0.0,
                    avg_acc=avg * r / rounds, worst_acc=worst * r / rounds,
                    cum_dl_payload=r * (dl or {}).get(curve, 1.0), participants=100,
                )  # fmt: skip
                rows.append(row)
            clients.append(dict(scenario=scenario, algorithm=algorithm, variant=variant, curve=curve,
                                profile=profile, seed=0, client=0, group=0, accuracy=worst))  # fmt: skip
    directory = tmp_path / scenario
    directory.mkdir()
    write_trace(directory, pd.DataFrame(rows), pd.DataFrame(clients))
    return directory


def verdicts(claims, run):
    return {claim.text: claim.check(run).holds for claim in claims if claim.scenario == run.scenario}


def test_covariate_claims_hold_and_fail_as_the_numbers_say(tmp_path):
    finals = {"fedavg": (0.60, 0.40), "local": (0.50, 0.30), "oracle": (0.80, 0.70), "cfl": (0.70, 0.55),
              "fedfomo": (0.65, 0.50), "ucfl streams=1": (0.60, 0.40), "ucfl streams=4": (0.79, 0.72),
              "ucfl streams=100": (0.75, 0.60)}  # fmt: skip
    run = Run.load(make_run(tmp_path, COVARIATE, finals))
    found = verdicts(CLAIMS, run)
    assert found["Oracle largely outperforms FedAvg (Fig. 2b)"] is True  # 80 vs 60
    assert found["UCFL with k >= 4 matches Oracle (Fig. 2b)"] is False  # k=100: 75 < 80 - 2
    assert found["UCFL has the highest worst user (Table I)"] is True  # 72 vs cfl 55
    assert found["CFL identifies the 4 clusters (Fig. 2b)"] is None  # no diagnostics.json


@pytest.mark.parametrize(
    ("splits", "holds", "evidence"),
    [
        ({"10": [0, 0, 1, 1, 2, 2, 3, 3]}, True, "CFL ends with 4 clusters, 4 of them within one group; adjusted Rand index 1.00"),
        ({"10": [0, 0, 1, 1, 2, 2, 3, 4]}, False,  # ARI by hand: (3 - 12/28) / (3.5 - 12/28) = 0.837
         "CFL ends with 5 clusters, 5 of them within one group; adjusted Rand index 0.84"),
        ({"10": [0, 0, 0, 0, 1, 1, 1, 1], "12": [0, 0, 1, 1, 2, 2, 2, 3]}, False, "CFL ends with 4 clusters, 3 of them within one group"),
        ({}, False, "CFL ends with 1 clusters, 0 of them within one group; adjusted Rand index 0.00"),
    ],
)
def test_cfl_clusters_are_compared_with_the_true_groups(tmp_path, splits, holds, evidence):
    directory = make_run(tmp_path, COVARIATE, {"cfl": (0.5, 0.4)})
    clients = pd.read_csv(directory / "clients.csv")
    row = clients.iloc[0].to_dict()
    table = pd.DataFrame([{**row, "client": i, "group": i // 2} for i in range(8)])
    write_trace(directory, pd.read_csv(directory / "trace.csv"), table)
    rounds = {"1": {"clusters": 1, "splits": []}}
    for r, assignment in splits.items():
        rounds[r] = {"clusters": len(set(assignment)), "splits": [{"split": True}], "assignment": assignment}
    (directory / "diagnostics.json").write_text(json.dumps({"seed0__cfl": rounds}))
    verdict = next(c for c in CLAIMS if c.text == "CFL identifies the 4 clusters (Fig. 2b)").check(Run.load(directory))
    assert verdict.holds is holds
    assert verdict.evidence.startswith(evidence)


def test_cfl_check_needs_the_assignment_once_clusters_split(tmp_path):
    directory = make_run(tmp_path, COVARIATE, {"cfl": (0.5, 0.4)})
    (directory / "diagnostics.json").write_text(json.dumps({"seed0__cfl": {"1": {"clusters": 1}, "10": {"clusters": 4}}}))
    verdict = next(c for c in CLAIMS if c.text == "CFL identifies the 4 clusters (Fig. 2b)").check(Run.load(directory))
    assert verdict.holds is None and "rerun cfl" in verdict.evidence


def test_fig3_claims_from_round_times(tmp_path):
    finals = {"fedavg": (0.60, 0.4), "local": (0.50, 0.3), "cfl": (0.6, 0.4), "fedfomo": (0.6, 0.4),
              "ucfl streams=1": (0.60, 0.4), "ucfl streams=4": (0.80, 0.6), "ucfl streams=100": (0.82, 0.6)}  # fmt: skip
    # streams cost little when the uplink is slow and a lot when wired: round times per profile
    times = {"slow-ul-unreliable": {"ucfl streams=1": 10.0, "ucfl streams=4": 10.3, "ucfl streams=100": 11.0},
             "wired": {"ucfl streams=1": 2.0, "ucfl streams=4": 2.3, "ucfl streams=100": 6.0}}  # fmt: skip
    directories = []
    for profile, by_curve in times.items():
        (tmp_path / profile).mkdir()
        directories.append(
            make_run(tmp_path / profile, COVARIATE, finals, (profile,), round_time={**ROUND_TIME, **by_curve},
                     dl={"fedfomo": 500.0, "ucfl streams=100": 100.0})  # fmt: skip
        )
    trace = pd.concat([pd.read_csv(d / "trace.csv") for d in directories])
    merged = tmp_path / "merged" / COVARIATE
    merged.mkdir(parents=True)
    write_trace(merged, trace, pd.read_csv(directories[0] / "clients.csv"))
    run = Run.load(merged)
    found = verdicts(FIG3_CLAIMS, run)
    assert found["rho = 4, unreliable nodes: UCFL reaches every accuracy level first"] is False  # FedAvg's rounds are 10x shorter here
    assert found["extra downlink streams are negligible when rho is large, not when rho = 1"] is True  # +10% vs +200%
    assert found["rho = 1 (wired): the right k beats unicast"] is True  # k=4 reaches 95% of 82% at 2.3*4 < 6*4
    assert found["rho = 2, reliable nodes: the right k beats unicast"] is None  # profile absent
    assert found["FedFomo incurs a large communication cost"] is True


def test_markdown_lists_paper_numbers_beside_ours_and_names_missing_scenarios(tmp_path):
    finals = {"fedavg": (0.60, 0.40), "local": (0.70, 0.50), "ucfl streams=4": (0.75, 0.45)}
    directory = make_run(tmp_path, "paper-cifar10-concept-shift", finals)
    text = reproduction_markdown([directory], "wirelessfl report X --reproduction Y", papers())
    assert "| fedavg | 19.6 | 40.0 | 60.0 |" in text
    assert "| ucfl streams=4 | 49.1 | 45.0 | 75.0 |" in text
    assert "Not run yet: `wirelessfl simulate scenarios/paper/emnist-label-shift.yaml`" in text
    assert "| CIFAR-10 concept shift | Local beats FedAvg: collaboration across permuted labels hurts (Fig. 2c) | holds |" in text
    assert "- CIFAR-10 concept shift: UCFL has the highest worst user (Table I)" in text  # 45 < local's 50


def test_report_cli_writes_the_page_and_rejects_other_scenarios(tmp_path):
    runner = CliRunner()
    good = make_run(tmp_path, "paper-cifar10-concept-shift", {"fedavg": (0.6, 0.4), "local": (0.7, 0.5)})
    out = tmp_path / "reproduction.md"
    result = runner.invoke(app, ["report", str(good), "--target", "0.5", "--reproduction", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("# Reproducing User-Centric Federated Learning")
    other = make_run(tmp_path, "my-scenario", {"fedavg": (0.6, 0.4)})
    result = runner.invoke(app, ["report", str(other), "--target", "0.5", "--reproduction", str(tmp_path / "x.md")])
    assert result.exit_code == 2
    assert "scenario 'my-scenario' is not one of the paper scenarios" in result.output
    assert not (tmp_path / "x.md").exists()


@pytest.mark.parametrize("claim", CLAIMS + FIG3_CLAIMS, ids=lambda c: c.text[:40])
def test_every_claim_says_not_checked_when_its_curves_are_missing(tmp_path, claim):
    directory = make_run(tmp_path, claim.scenario, {"unrelated": (0.5, 0.5)})
    assert claim.check(Run.load(directory)).holds is None


def test_diagnostics_notes_quote_the_measured_weights_and_fedfomo_moves(tmp_path):
    directory = make_run(tmp_path, "paper-emnist-label-shift", {"fedavg": (0.6, 0.4), "fedfomo": (0.4, 0.1)})
    diagnostics = {
        "seed0__ucfl_streams_4": {"1": {"estimated": True, "self_weight_mean": 0.25}},
        "seed0__ucfl_warmup_streams_4": {"16": {"estimated": True, "self_weight_mean": 0.125}},
        "seed0__fedfomo": {"1": {"federated": 0}, "2": {"federated": 90}, "4": {"federated": 3}},
        "seed0__cfl": {"4": {"clusters": 2}},
    }
    (directory / "diagnostics.json").write_text(json.dumps(diagnostics))
    text = reproduction_markdown([directory], "cmd", papers())
    assert (
        "mean self-weight: ucfl (estimated in round 1) w_ii = 0.250; ucfl+warmup (estimated in round 16) w_ii = 0.125 "
        "(1 would be Local; 0.010, uniform weights over 100 users" in text
    )
    assert "CFL ends with 2 cluster(s); FedFomo clients that mixed in peers' models: 90/100 in round 2, 3/100 in round 4" in text


def test_every_claim_is_checked_again_with_our_ucfl_variant(tmp_path):
    finals = {"fedavg": (0.60, 0.40), "local": (0.50, 0.30), "oracle": (0.80, 0.70), "cfl": (0.70, 0.55),
              "fedfomo": (0.65, 0.50), "ucfl streams=4": (0.62, 0.45), "ucfl streams=100": (0.64, 0.45),
              "ucfl+warmup streams=4": (0.79, 0.72), "ucfl+warmup streams=100": (0.81, 0.60)}  # fmt: skip
    run = Run.load(make_run(tmp_path, COVARIATE, finals))
    assert ucfl_curves(run) == {4: "ucfl streams=4", 100: "ucfl streams=100"}
    assert ucfl_curves(run.with_label(PAPER_UCFL, OUR_UCFL)) == {4: "ucfl+warmup streams=4", 100: "ucfl+warmup streams=100"}
    text = reproduction_markdown([run.directory], "cmd", papers())
    row = next(line for line in text.splitlines() if "UCFL with k >= 4 matches Oracle (Fig. 2b)" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "**does not hold**" and cells[4] == "holds"  # 62, 64 vs 80; 79, 81 vs 80
    assert "k=4: 79.0, k=100: 81.0" in cells[5]
    oracle_row = next(line for line in text.splitlines() if "Oracle largely outperforms FedAvg" in line)
    assert oracle_row.rstrip().endswith("| holds | same |")
    assert "With the paper's UCFL: 5 of 17 claims checked; 2 hold." in text  # Oracle gap, wired k=4 beats unicast
    assert "With ucfl+warmup in place of the paper's UCFL: 5 claims checked; 3 hold." in text


def test_a_run_without_our_variant_says_so(tmp_path):
    run = Run.load(make_run(tmp_path, COVARIATE, {"fedavg": (0.6, 0.4), "oracle": (0.8, 0.7)}))
    text = reproduction_markdown([run.directory], "cmd", papers())
    assert "| no ucfl+warmup run |  |" in text and "in place of the paper's UCFL" not in text


# ---- the registry and the other papers' modules --------------------------------------------------

def paper_trace(scenario, finals, seeds=(0,), rounds=2):
    """A trace whose every column in ``finals[curve]`` (one value, or one per seed) rises linearly to it.

    Columns not given follow avg_acc; unseen_acc is NaN unless given (no held-out clients).
    """
    rows = []
    for curve, columns in finals.items():
        for i, seed in enumerate(seeds):
            value = {c: (v[i] if isinstance(v, tuple) else v) for c, v in columns.items()}
            for r in range(rounds + 1):
                row = dict.fromkeys(TRACE_COLUMNS, 0.0)
                row.update(scenario=scenario, algorithm=curve, variant="", curve=curve, profile="wired", seed=seed,
                           round=r, time=float(r), time_unit="T_dl", participants=10, unseen_acc=float("nan"))  # fmt: skip
                for column in ("avg_acc", "worst_acc", "p10_acc", "unseen_acc"):
                    final = value.get(column, value["avg_acc"] if column != "unseen_acc" else None)
                    if final is not None:
                        row[column] = final * r / rounds
                rows.append(row)
    return pd.DataFrame(rows)


def write_paper_run(tmp_path, scenario, finals, seeds=(0,)):
    directory = tmp_path / scenario
    directory.mkdir()
    clients = pd.DataFrame([dict(scenario=scenario, algorithm="x", variant="", curve="x", profile="wired", seed=0,
                                 client=0, group=0, accuracy=0.5)])  # fmt: skip
    write_trace(directory, paper_trace(scenario, finals, seeds), clients)
    return directory


def claim(paper, text):
    return next(c for c in paper.PAPER.claims if c.text == text)


def test_registry_finds_each_paper_by_its_scenarios():
    assert set(papers()) == {"user-centric", "fedem", "adaptive-experts", "adaptive-experts-protocol", "pflego", "pflego-protocol"}
    every = [s for p in papers().values() for s in p.scenarios]
    assert len(every) == len(set(every))
    assert paper_of(papers(), "fedem-emnist").name == "fedem"
    assert paper_of(papers(), "experts-cifar10-p0.6").name == "adaptive-experts"
    assert paper_of(papers(), "experts-cifar10-p0.6-protocol").name == "adaptive-experts-protocol"
    assert paper_of(papers(), "pflego-emnist-k31").name == "pflego"
    assert paper_of(papers(), "pflego-emnist-k31-protocol").name == "pflego-protocol"
    assert paper_of(papers(), "paper-cifar10-concept-shift").name == "user-centric"
    assert paper_of(papers(), "fedem") is None
    with pytest.raises(ValueError) as err:
        get_paper(papers(), "fedme")
    assert str(err.value) == "--paper must be one of ['adaptive-experts', 'adaptive-experts-protocol', 'fedem', 'pflego', 'pflego-protocol', 'user-centric'], got 'fedme'"


def test_a_run_over_its_last_rounds_averages_each_seed_over_the_evaluated_rounds_among_them():
    trace = paper_trace("fedem-emnist", {"fedavg": {"avg_acc": (0.6, 0.9)}}, seeds=(0, 1), rounds=4)
    trace.loc[trace["round"] == 3, "avg_acc"] = float("nan")  # not evaluated
    assert Run.from_trace(trace).acc("fedavg") == pytest.approx(75.0)
    # seed 0: rounds 2 and 4 of the last 3 (3 is skipped): (0.3 + 0.6) / 2; seed 1: (0.45 + 0.9) / 2
    over3 = Run.from_trace(trace, last_rounds=3)
    assert over3.acc("fedavg") == pytest.approx(100 * (0.45 + 0.675) / 2)
    assert Run.from_trace(trace).over_last(3).final.equals(over3.final)
    assert int(over3.final.loc["fedavg", "round"]) == 4


def test_run_reads_missing_and_nan_columns_as_absent():
    run = Run.from_trace(paper_trace("fedem-emnist", {"fedavg": {"avg_acc": 0.5, "p10_acc": 0.25}}))
    assert run.acc("fedavg") == 50.0 and run.acc("fedavg", "p10_acc") == 25.0
    assert run.acc("fedavg", "unseen_acc") is None  # NaN: no held-out clients
    assert run.acc("fedem") is None
    without = Run.from_trace(paper_trace("fedem-emnist", {"fedavg": {"avg_acc": 0.5}}).drop(columns="unseen_acc"))
    assert without.acc("fedavg", "unseen_acc") is None


SYNTHETIC = {"fedem": {"avg_acc": 0.72, "p10_acc": 0.66}, "fedavg": {"avg_acc": 0.70, "p10_acc": 0.60},
             "local": {"avg_acc": 0.65, "p10_acc": 0.58}}  # fmt: skip


def test_fedem_synthetic_lead_on_average_and_bottom_decile():
    run = Run.from_trace(paper_trace("fedem-synthetic", SYNTHETIC))
    average = claim(fedem, "FedEM is clearly above FedAvg and Local on the average (Table 2)").check(run)
    assert average.holds is False  # 72 - 70 = 2 < 3
    assert average.evidence.startswith(
        "average accuracy: FedEM 72.0 vs FedAvg 70.0 and Local 65.0, a lead of 2.0 points (needs >= 3), on 1 seed(s); "
        "Table 2: 74.7 vs 68.2 and 65.7"
    )
    decile = claim(fedem, "FedEM is clearly above FedAvg and Local on the bottom decile (Table 2)").check(run)
    assert decile.holds is True  # 66 - 60 = 6
    assert "FedEM 66.0 vs FedAvg 60.0 and Local 58.0, a lead of 6.0 points" in decile.evidence


def test_fedem_claims_give_the_lead_seed_by_seed_when_the_intervals_do_not_overlap():
    finals = {"fedem": {"avg_acc": (0.84, 0.85, 0.86), "unseen_acc": (0.77, 0.78, 0.78)},
              "fedavg": {"avg_acc": (0.69, 0.70, 0.69), "unseen_acc": (0.68, 0.70, 0.69)},
              "local": {"avg_acc": (0.66, 0.66, 0.67)}}  # fmt: skip
    run = Run.from_trace(paper_trace("fedem-synthetic-protocol", finals, seeds=(0, 1, 2)))
    average = claim(fedem, "FedEM is clearly above FedAvg and Local on the average (Table 2)").check(run)
    # FedEM - FedAvg per seed: 15, 15, 17 -> mean 15.67, sd 1.155, t(0.975, 2) = 4.303: half-width 2.87
    assert average.holds is True
    assert "a lead of 15.7 points (needs >= 3) (FedEM - FedAvg seed by seed: +15.7 ± 2.9), on 3 seed(s); Table 2" in average.evidence
    unseen = claim(fedem, "FedEM's unseen clients are at least as good as FedAvg's global model (Table 3)").check(run)
    # per seed: 9, 8, 9 -> mean 8.67, sd 0.577, half-width 1.43
    assert "vs FedAvg's global model 69.0 ± 2.5 (FedEM - FedAvg seed by seed: +8.7 ± 1.4), on 3 seed(s); Table 3" in unseen.evidence


@pytest.mark.parametrize(("local", "holds"), [(0.76, True), (0.80, False)])
def test_fedem_emnist_local_far_below_and_fedem_not_below_fedavg_on_two_seeds(local, holds):
    finals = {"fedem": {"avg_acc": (0.82, 0.84)}, "fedavg": {"avg_acc": (0.83, 0.81)}, "fedavg_ft": {"avg_acc": 0.85},
              "local": {"avg_acc": local}}  # fmt: skip
    run = Run.from_trace(paper_trace("fedem-emnist", finals, seeds=(0, 1)))
    far = claim(fedem, "Local is far below every federated method (Table 2)").check(run)
    assert far.holds is holds  # closest federated method: FedAvg's 82.0, 6.0 or 2.0 above
    # with 2 seeds the 95% half-width is t(0.975, 1) = 12.7 times the two values' half-distance: 12.7 for 82/84
    assert f"Local {local * 100:.1f} ± 0.0 vs FedEM 83.0 ± 12.7, FedAvg 82.0 ± 12.7, FedAvg+ 85.0 ± 0.0" in far.evidence
    # seed by seed Local - FedEM is (L - 82, L - 84), Local - FedAvg (L - 83, L - 81): 2 apart, so 12.7 again
    why = ("" if holds else ". Why, from the trace: Table 2 has FedAvg - Local = +10.7; the gap narrows on Local's side: "
           "Local is +8.1 points from Table 2's 71.9, FedAvg -0.6 from its 82.6")  # no train_loss column: no losses
    assert far.evidence.endswith(
        f"the closest federated method, FedAvg, is {82 - local * 100:+.1f} points from Local (needs >= +5), on 2 seed(s); "
        f"within the 95% intervals: Local vs FedEM (Local - FedEM seed by seed: {local * 100 - 83:+.1f} ± "
        f"12.7), Local vs FedAvg (Local - FedAvg seed by seed: {local * 100 - 82:+.1f} ± 12.7); Table 2: Local 71.9 vs "
        "82.6 to 83.5" + why
    )
    not_below = claim(fedem, "FedEM is not below FedAvg (Table 2)").check(run)
    assert not_below.holds is True
    assert not_below.evidence.startswith(
        "average accuracy: FedEM 83.0 ± 12.7 vs FedAvg 82.0 ± 12.7, on 2 seed(s); within the 95% intervals: FedEM vs "
        "FedAvg (FedEM - FedAvg seed by seed: +1.0 ± 25.4); Table 2: 83.5 vs 82.6"
    )


def test_local_close_to_the_federated_methods_says_which_side_moved_from_table_2_and_how_each_fits():
    trace = paper_trace("fedem-emnist-protocol", {"fedem": {"avg_acc": 0.80}, "fedavg": {"avg_acc": 0.66},
                                                  "fedavg_ft": {"avg_acc": 0.68}, "local": {"avg_acc": 0.70}})  # fmt: skip
    last = trace["round"] == 2
    for curve, train, test in (("local", 0.26, 1.54), ("fedavg", 1.17, 1.19)):
        trace.loc[last & (trace["curve"] == curve), ["train_loss", "mean_loss"]] = [train, test]
    verdict = claim(fedem, "Local is far below every federated method (Table 2)").check(Run.from_trace(trace))
    assert verdict.holds is False  # FedAvg, the closest, is 4 points *below* Local
    # FedAvg 66.0 is 16.6 below Table 2's 82.6, Local 70.0 1.9 below its 71.9: the federated side moved more
    assert verdict.evidence.endswith(
        "the closest federated method, FedAvg, is -4.0 points from Local (needs >= +5), on 1 seed(s); Table 2: Local "
        "71.9 vs 82.6 to 83.5. Why, from the trace: Table 2 has FedAvg - Local = +10.7; the gap narrows on the "
        "federated side: FedAvg is -16.6 points from Table 2's 82.6, Local -1.9 from its 71.9; after the last round "
        "Local's training loss is 0.260 and its test NLL 1.540 and FedAvg's training loss is 1.170 and its test NLL 1.190"
    )
    for curve, final in (("fedavg", 82.0), ("fedavg_ft", 84.0), ("local", 79.0)):
        trace.loc[trace["curve"] == curve, "avg_acc"] *= final / trace.loc[last & (trace["curve"] == curve), "avg_acc"].iloc[0] / 100
    # FedEM 80.0, now the closest, is 3.5 below Table 2's 83.5; Local 79.0 is 7.1 above its 71.9
    assert "Table 2 has FedEM - Local = +11.6; the gap narrows on Local's side: Local is +7.1 points from Table 2's " \
           "71.9, FedEM -3.5 from its 83.5" in claim(fedem, "Local is far below every federated method (Table 2)").check(
               Run.from_trace(trace)).evidence  # fmt: skip


def test_fedem_below_fedavg_says_why_from_the_training_objective_and_the_mixture_weights():
    trace = paper_trace("fedem-emnist", {"fedem": {"avg_acc": (0.78, 0.80)}, "fedavg": {"avg_acc": (0.82, 0.83)}}, seeds=(0, 1))
    last = trace["round"] == 2
    trace.loc[last & (trace["curve"] == "fedem"), "train_loss"] = [0.6, 0.8]  # seeds 0 and 1: mean 0.7
    trace.loc[last & (trace["curve"] == "fedavg"), "train_loss"] = 0.5
    trace["mean_loss"] = 0.0
    text = ("average accuracy: FedEM 79.0 ± 12.7 vs FedAvg 82.5 ± 6.4, on 2 seed(s); within the 95% intervals: FedEM vs "
            "FedAvg (FedEM - FedAvg seed by seed: -3.5 ± 6.4); Table 2: 83.5 vs 82.6, with every "
            "federated method within 1 point of the others (seed noise can reverse such an ordering). Why, from the "
            "trace: after the last round FedEM's training objective (eq. 10: its mixture's NLL less KL(q || pi), so at "
            "most that NLL) is 0.700 against FedAvg's 0.500, so FedEM is the less trained of the two; on the test split "
            "FedEM's mixture NLL is 0.000 against FedAvg's 0.000")  # fmt: skip
    verdict = claim(fedem, "FedEM is not below FedAvg (Table 2)").check(Run.from_trace(trace))
    assert verdict == Verdict(False, text)
    # diagnostics.json (string round keys): the last round of each seed, 2.5 and 2.7 of 3 components
    mix = {"seed0__fedem": {"1": {"mixture_components_used": 3.0, "component_share": [0.4, 0.3, 0.3]},
                            "2": {"mixture_components_used": 2.5, "component_share": [0.5, 0.3, 0.2]}},
           "seed1__fedem": {"2": {"mixture_components_used": 2.7, "component_share": [0.4, 0.4, 0.2]}},
           "seed0__fedavg": {"2": {"unseen_acc": 0.5}}}  # fmt: skip
    verdict = claim(fedem, "FedEM is not below FedAvg (Table 2)").check(Run.from_trace(trace, diagnostics=mix))
    assert verdict.evidence == text + (
        "; its clients use 2.60 of the 3 components (exp of the entropy of their mixture weights, diagnostics.json, "
        "2 of 2 seed(s)), so each component learns from about 1/2.6 of every client's gradient"
    )
    del mix["seed1__fedem"]["2"]["mixture_components_used"]  # a seed run before the diagnostic existed
    verdict = claim(fedem, "FedEM is not below FedAvg (Table 2)").check(Run.from_trace(trace, diagnostics=mix))
    assert verdict.evidence.endswith("use 2.50 of the 3 components (exp of the entropy of their mixture weights, "
                                     "diagnostics.json, 1 of 2 seed(s)), so each component learns from about 1/2.5 of "
                                     "every client's gradient")  # fmt: skip
    trace.loc[last & (trace["curve"] == "fedem"), "train_loss"] = 0.4
    trace.loc[last, "mean_loss"] = [0.9, 0.7, 0.6, 0.6]  # fedem seeds 0 and 1, then fedavg
    assert claim(fedem, "FedEM is not below FedAvg (Table 2)").check(Run.from_trace(trace)).evidence.endswith(
        "is 0.400 against FedAvg's 0.500, which does not show FedEM less trained; on the test split FedEM's mixture "
        "NLL is 0.800 against FedAvg's 0.600"
    )


def test_fedem_ahead_of_fedavg_gives_each_seeds_lead_beside_its_mixture_and_the_settings_that_differ(tmp_path):
    trace = paper_trace("fedem-emnist-protocol", {"fedem": {"avg_acc": (0.80, 0.84)}, "fedavg": {"avg_acc": (0.79, 0.80)}},
                        seeds=(0, 1))  # fmt: skip
    mix = {"seed0__fedem": {"1": {"mixture_components_used": 1.0, "component_share": [0.2, 0.8]},
                            "2": {"mixture_components_used": 1.8, "component_share": [0.4, 0.6]}},
           "seed1__fedem": {"2": {"mixture_components_used": 1.01, "component_share": [0.0, 1.0]}},
           "seed0__fedavg": {"2": {"unseen_acc": 0.5}}}  # fmt: skip
    base = ("average accuracy: FedEM 82.0 ± 25.4 vs FedAvg 79.5 ± 6.4, on 2 seed(s); within the 95% intervals: FedEM vs "
            "FedAvg (FedEM - FedAvg seed by seed: +2.5 ± 19.1); Table 2: 83.5 vs 82.6, with every federated method within "
            "1 point of the others (seed noise can reverse such an ordering)")  # fmt: skip
    check = claim(fedem, "FedEM is not below FedAvg (Table 2)").check
    assert check(Run.from_trace(trace)) == Verdict(True, base)  # no diagnostics: nothing to add
    per_seed = (". What the lead is made of, per seed: FedEM - FedAvg, and the components FedEM's clients use (of 2; "
                "exp of the entropy of their mixture weights, diagnostics.json): seed 0 +1.0 with 1.80, seed 1 +4.0 "
                "with 1.01")  # fmt: skip
    assert check(Run.from_trace(trace, diagnostics=mix)) == Verdict(True, base + per_seed)
    scenario = {"training": {"lr": 0.01, "momentum": 0.9},
                "algorithms": [{"name": "fedem", "label": None, "training": {"lr": 0.05}},
                               {"name": "fedavg", "label": None}]}  # fmt: skip
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    assert check(Run.from_trace(trace, tmp_path, diagnostics=mix)).evidence == base + per_seed + (
        "; FedEM on one component is FedAvg exactly, here with FedEM's own training settings (lr 0.05 against 0.01), "
        "so a seed near 1 component leads by those settings, not by its mixture"
    )
    scenario["algorithms"][0]["training"] = {}  # the same settings: the lead is the mixture's
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    assert check(Run.from_trace(trace, tmp_path, diagnostics=mix)).evidence == base + per_seed


@pytest.mark.parametrize(
    ("fedem_unseen", "fedavg_unseen", "holds"),
    [(0.74, 0.70, True), (0.69, 0.70, False), (None, 0.70, None), (0.74, None, None)],
)
def test_fedem_unseen_clients_read_the_unseen_column(fedem_unseen, fedavg_unseen, holds):
    finals = {"fedem": {"avg_acc": 0.9}, "fedavg": {"avg_acc": 0.9}}
    if fedem_unseen is not None:
        finals["fedem"]["unseen_acc"] = fedem_unseen
    if fedavg_unseen is not None:
        finals["fedavg"]["unseen_acc"] = fedavg_unseen
    run = Run.from_trace(paper_trace("fedem-synthetic", finals))
    verdict = claim(fedem, "FedEM's unseen clients are at least as good as FedAvg's global model (Table 3)").check(run)
    assert verdict.holds is holds
    if holds is not None:
        expected = f"unseen clients: FedEM {fedem_unseen * 100:.1f} vs FedAvg's global model 70.0, on 1 seed(s); Table 3: 73.0 vs 68.6"
        if not holds:  # both 90.0 on their training clients: FedEM loses 21.0 to its unseen clients, FedAvg 20.0
            expected += (". Why, from the trace: from the training clients' average accuracy to the unseen clients' FedEM "
                         "loses 21.0 points and FedAvg 20.0, so fitting the unseen clients' mixture weights after training "
                         "costs FedEM 1.0 points more than FedAvg's global model loses")  # fmt: skip
        assert verdict.evidence == expected
    else:
        assert "unseen_acc" in verdict.evidence


def test_fedem_unseen_shortfall_that_fedem_already_has_on_its_training_clients():
    finals = {"fedem": {"avg_acc": 0.77, "unseen_acc": 0.72}, "fedavg": {"avg_acc": 0.80, "unseen_acc": 0.74}}
    verdict = claim(fedem, "FedEM's unseen clients are at least as good as FedAvg's global model (Table 3)").check(
        Run.from_trace(paper_trace("fedem-emnist", finals))
    )
    assert verdict.holds is False
    assert verdict.evidence.endswith(
        "FedEM loses 5.0 points and FedAvg 6.0, so FedEM's shortfall on the unseen clients is the one it has on the "
        "training clients (FedEM - FedAvg there: -3.0)"
    )


def experts_runs(by_p):
    """``{p: {curve: avg}}`` -> Runs by scenario name."""
    return {f"experts-cifar10-p{p}": Run.from_trace(paper_trace(f"experts-cifar10-p{p}", {c: {"avg_acc": v} for c, v in curves.items()}))
            for p, curves in by_p.items()}  # fmt: skip


def test_experts_claims_span_the_runs_of_every_p():
    runs = experts_runs({
        0.2: {"fedmoe": 0.72, "fedmoe-noexplore": 0.60, "ifca": 0.70, "local": 0.40},
        0.6: {"fedmoe": 0.75, "fedmoe-noexplore": 0.70, "ifca": 0.65, "local": 0.55},
        1.0: {"fedmoe": 0.90, "fedmoe-noexplore": 0.91, "ifca": 0.50, "local": 0.87},
    })  # fmt: skip
    ifca = claim(adaptive_experts, "MoE with ε-greedy beats IFCA at every p, by more as p grows (Table 2)").verdict(runs)
    assert ifca.holds is True  # gaps 2, 10, 40
    assert ifca.evidence.startswith("MoE vs IFCA average accuracy p=0.2: 72.0 vs 70.0 (+2.0); p=0.6: 75.0 vs 65.0 (+10.0); "
                                    "p=1.0: 90.0 vs 50.0 (+40.0), on 1 seed(s) per p; Table 2 at p = 0.2, 0.6, 1.0: +1.1, +13.8, +29.8")  # fmt: skip
    explore = claim(adaptive_experts, "ε-greedy exploration beats no exploration for MoE at every p (Table 2)").verdict(runs)
    assert explore.holds is False  # 90 < 91 at p = 1.0
    assert "p=1.0: 90.0 vs 91.0" in explore.evidence
    local = claim(adaptive_experts, "Local climbs from far below MoE (p = 0.2) to near it (p = 1.0) (Table 2)").verdict(runs)
    assert local.holds is True  # 32 below, then 3 below, rising 40 -> 55 -> 87
    assert local.evidence.startswith("p=0.2: Local 40.0 vs MoE 72.0; p=0.6: Local 55.0 vs MoE 75.0; p=1.0: Local 87.0 vs MoE 90.0")


def test_experts_claims_fail_or_wait_as_the_numbers_say():
    runs = experts_runs({0.2: {"fedmoe": 0.72, "ifca": 0.65, "local": 0.66}, 1.0: {"fedmoe": 0.90, "ifca": 0.86, "local": 0.75}})
    ifca = claim(adaptive_experts, "MoE with ε-greedy beats IFCA at every p, by more as p grows (Table 2)").verdict(runs)
    assert ifca.holds is False and "p=0.2: 72.0 vs 65.0 (+7.0); p=1.0: 90.0 vs 86.0 (+4.0)" in ifca.evidence  # the gap shrinks
    local = claim(adaptive_experts, "Local climbs from far below MoE (p = 0.2) to near it (p = 1.0) (Table 2)").verdict(runs)
    assert local.holds is False  # 6 below at p = 0.2, 15 below at p = 1.0
    assert "p=0.2: Local 66.0 vs MoE 72.0; p=1.0: Local 75.0 vs MoE 90.0" in local.evidence
    one_p = {k: v for k, v in runs.items() if k.endswith("p0.2")}
    assert claim(adaptive_experts, "MoE with ε-greedy beats IFCA at every p, by more as p grows (Table 2)").verdict(one_p).holds is None
    assert claim(adaptive_experts, "Local climbs from far below MoE (p = 0.2) to near it (p = 1.0) (Table 2)").verdict(one_p).holds is None
    none_run = claim(adaptive_experts, "ε-greedy exploration beats no exploration for MoE at every p (Table 2)").verdict({})
    assert none_run == Verdict(None, "no scenario of the claim run")


def test_experts_claims_give_each_gap_seed_by_seed_where_a_run_has_several_seeds():
    """MoE 72/70/74 vs IFCA 70/69/71 over 3 seeds: gaps 2, 1, 3 -> +2.0 ± t(0.975, 2) * 1 / sqrt(3) = ± 2.5;
    vs Local 40/42/44: gaps 32, 28, 30 -> +30.0 ± 4.303 * 2 / sqrt(3) = ± 5.0."""
    seeds = (0, 1, 2)
    runs = {
        "experts-cifar10-p0.2": Run.from_trace(paper_trace("experts-cifar10-p0.2", {
            "fedmoe": {"avg_acc": (0.72, 0.70, 0.74)}, "fedmoe-noexplore": {"avg_acc": (0.72, 0.70, 0.74)},
            "ifca": {"avg_acc": (0.70, 0.69, 0.71)}, "local": {"avg_acc": (0.40, 0.42, 0.44)}}, seeds)),
        "experts-cifar10-p1.0": Run.from_trace(paper_trace("experts-cifar10-p1.0", {
            "fedmoe": {"avg_acc": 0.90}, "fedmoe-noexplore": {"avg_acc": 0.91}, "ifca": {"avg_acc": 0.50}, "local": {"avg_acc": 0.87}})),
    }  # fmt: skip
    ifca = claim(adaptive_experts, "MoE with ε-greedy beats IFCA at every p, by more as p grows (Table 2)").verdict(runs)
    assert ifca.evidence.startswith("MoE vs IFCA average accuracy p=0.2: 72.0 vs 70.0 (+2.0 ± 2.5 seed by seed); "
                                    "p=1.0: 90.0 vs 50.0 (+40.0), on 1/3 seed(s) per p")  # fmt: skip
    explore = claim(adaptive_experts, "ε-greedy exploration beats no exploration for MoE at every p (Table 2)").verdict(runs)
    assert "p=0.2: 72.0 vs 72.0 (+0.0 ± 0.0 seed by seed); p=1.0: 90.0 vs 91.0," in explore.evidence
    local = claim(adaptive_experts, "Local climbs from far below MoE (p = 0.2) to near it (p = 1.0) (Table 2)").verdict(runs)
    assert local.evidence.startswith("p=0.2: Local 42.0 vs MoE 72.0 (MoE - Local +30.0 ± 5.0 seed by seed); p=1.0: Local 87.0 vs MoE 90.0 (needs")


@pytest.mark.parametrize(
    ("scenario", "text", "finals", "holds", "evidence"),
    [
        ("pflego-emnist-k2", "PFLEGO >= FedPer >= FedAvg with high personalization (Table 1)",
         {"pflego": 0.985, "fedper": 0.98, "fedavg": 0.98}, True,
         "average accuracy PFLEGO 98.5 / FedPer 98.0 / FedAvg 98.0, on 1 seed(s); Table 1: 98.5 / 97.8 / 97.3"),
        ("pflego-emnist-k31", "PFLEGO >= FedPer >= FedAvg with medium personalization (Table 1)",
         {"pflego": 0.75, "fedper": 0.70, "fedavg": 0.72}, False,
         "average accuracy PFLEGO 75.0 / FedPer 70.0 / FedAvg 72.0, on 1 seed(s); Table 1: 74.4 / 74.2 / 68.8"),
        ("pflego-emnist-k62", "FedAvg is the best with no personalization (Table 1)",
         {"pflego": 0.60, "fedper": 0.50, "fedavg": 0.58}, False,
         "average accuracy FedAvg 58.0 vs PFLEGO 60.0 and FedPer 50.0, on 1 seed(s); Table 1: 69.4 / 55.4 / 48.1"),
    ],
)  # fmt: skip
def test_pflego_orderings(scenario, text, finals, holds, evidence):
    run = Run.from_trace(paper_trace(scenario, {c: {"avg_acc": v} for c, v in finals.items()}))
    verdict = claim(pflego, text).check(run)
    assert verdict == Verdict(holds, evidence)


def test_pflego_protocol_checks_fedavg_at_k62_on_the_authors_rate_curves():
    """At K = 62 the protocol's FedAvg claim reads the ``*-lr0.007`` curves, each named with the paper's method."""
    finals = {"fedavg-lr0.007": 0.70, "fedavg-after-local-steps-lr0.007": 0.55, "pflego-authors-code": 0.56,
              "fedper-lr0.007": 0.49}  # fmt: skip
    run = Run.from_trace(paper_trace("pflego-emnist-k62-protocol", {c: {"avg_acc": v} for c, v in finals.items()}))
    at_rate = claim(pflego_protocol, "FedAvg is the best with no personalization, at the authors' client rate and as "
                                     "their code runs PFLEGO (Table 1)").check(run)  # fmt: skip
    assert at_rate == Verdict(
        True,
        "average accuracy FedAvg (fedavg-lr0.007) 70.0 vs PFLEGO (pflego-authors-code) 56.0 and FedPer (fedper-lr0.007) "
        "49.0, on 1 seed(s); Table 1: 69.4 / 55.4 / 48.1",
    )
    evaluated = claim(pflego_protocol, "FedAvg is the best with no personalization, evaluated as the authors' code "
                                       "evaluates it, at their client rate (Table 1)").check(run)  # fmt: skip
    assert evaluated.holds is False and evaluated.evidence.startswith(
        "average accuracy FedAvg (fedavg-after-local-steps-lr0.007) 55.0 vs PFLEGO (pflego-authors-code) 56.0"
    )
    assert claim(pflego_protocol, "FedAvg is the best with no personalization (Table 1)").check(run) == Verdict(
        None, "needs fedavg, pflego, fedper"
    )


@pytest.mark.parametrize("paper", [fedem, adaptive_experts, pflego], ids=lambda m: m.PAPER.name)
def test_new_papers_claims_say_not_checked_when_their_curves_are_missing(paper):
    runs = {s: Run.from_trace(paper_trace(s, {"unrelated": {"avg_acc": 0.5}})) for s in paper.PAPER.scenarios}
    for c in paper.PAPER.claims:
        assert c.verdict(runs).holds is None, c.text
    text = paper.PAPER.markdown(runs, "cmd")
    assert f"0 of {len(paper.PAPER.claims)} claims checked; 0 hold. {len(paper.PAPER.claims)} not checked" in text


def test_fedem_page_lists_both_tables_and_the_verdicts(tmp_path):
    finals = {**SYNTHETIC, "fedem": {**SYNTHETIC["fedem"], "unseen_acc": 0.74}, "fedavg": {**SYNTHETIC["fedavg"], "unseen_acc": 0.70}}
    text = reproduction_markdown([write_paper_run(tmp_path, "fedem-synthetic", finals)], "wirelessfl report X --reproduction Y", papers())
    assert text.startswith("# Reproducing FedEM: Federated Multi-Task Learning under a Mixture of Distributions (Tables 2 and 3)")
    assert "| fedem (FedEM) | 74.7 | 66.7 | 72.0 | 66.0 | 72.0 |" in text  # worst_acc follows avg_acc in this trace
    assert "| fedavg_ft (FedAvg+) | 68.9 | 60.2 | n/a | n/a | n/a |" in text
    assert "| fedem (FedEM) | 73.0 | 74.0 |" in text
    assert "| fedavg (FedAvg's global model) | 68.6 | 70.0 |" in text
    assert "Not run yet: simulate scenario `fedem-emnist`, then add the run directory to the report command." in text
    assert ("| Synthetic (Table 2, Table 3) | FedEM is clearly above FedAvg and Local on the average (Table 2) | **does not hold** | "
            "average accuracy: FedEM 72.0 vs FedAvg 70.0 and Local 65.0") in text  # fmt: skip
    assert "Not run yet: simulate scenario `fedem-emnist-protocol`, then add the run directory to the report command." in text
    assert "Not run yet: simulate scenario `fedem-synthetic-protocol`, then add the run directory to the report command." in text
    assert "3 of 12 claims checked; 2 hold. 9 not checked" in text
    assert "Not reproduced:\n\n- Synthetic (Table 2, Table 3): FedEM is clearly above FedAvg and Local on the average (Table 2)\n" in text
    assert text.endswith(
        "\n\nWhy they do not hold, measured from these runs: each claim's evidence ('Why, from the trace'), and "
        "docs/research/reproduction-seed-notes.md, sections 'FedEM (Tables 2 and 3)' and 'The papers' own protocols, at their "
        "budgets (runs in progress)'.\n"
    )


def test_every_seed_notes_section_a_page_points_to_exists():
    """``Paper.why`` names headings of docs/research/reproduction-seed-notes.md: a renamed heading must not leave a page
    pointing nowhere."""
    notes = Path(__file__).parents[2] / "docs" / "research" / "reproduction-seed-notes.md"
    headings = [line.lstrip("#").strip() for line in notes.read_text().splitlines() if line.startswith("#")]
    pointing = {name: paper.why for name, paper in papers().items() if "reproduction-seed-notes.md" in paper.why}
    assert {"fedem", "pflego", "pflego-protocol", "adaptive-experts", "adaptive-experts-protocol"} <= set(pointing)
    for name, why in pointing.items():
        tail = why.split("reproduction-seed-notes.md", 1)[1]
        named = [h for h in headings if f"'{h}'" in tail]
        for heading in named:
            tail = tail.replace(f"'{heading}'", "")
        assert named and "'" not in tail, f"{name}: {why!r} names a section that is not a heading of {notes.name}"


def test_experts_page_has_one_section_per_p_and_one_row_per_multi_run_claim(tmp_path):
    dirs = [write_paper_run(tmp_path, f"experts-cifar10-p{p}", {"fedmoe": {"avg_acc": m}, "ifca": {"avg_acc": i}})
            for p, m, i in ((0.2, 0.72, 0.70), (1.0, 0.90, 0.50))]  # fmt: skip
    text = reproduction_markdown(dirs, "cmd", papers())
    assert "## CIFAR-10, majority class fraction p = 1.0 (Table 2, J = 6)" in text
    assert "(the paper: 14 trials with ε-greedy, 6 without)" in text
    assert "| fedmoe (MoE, ε-greedy) | 90.76 | 90.0 | 90.0 | 90.0 |" in text
    assert "| ifca (IFCA) | 60.97 | 50.0 | 50.0 | 50.0 |" in text
    assert "| fedavg (FedAvg, not in Table 2) | - | n/a | n/a | n/a |" in text
    assert "Table 2's IFCA with ε-greedy cluster selection reaches 48.8 at this p." in text
    assert "Not run yet: simulate scenario `experts-cifar10-p0.6`" in text
    rows = [line for line in text.splitlines() if line.startswith("| CIFAR-10, p = 0.2, 0.6, 1.0 |")]
    assert [r.split(" | ")[2] for r in rows] == ["holds", "not checked", "not checked"]
    assert "1 of 3 claims checked; 1 holds. 2 not checked" in text
    assert "Why they do not hold" not in text  # none checked fails


def test_pflego_protocol_page_reads_fedavg_after_its_local_steps_beside_the_papers_fedavg(tmp_path):
    finals = {"pflego": {"avg_acc": 0.96}, "fedper": {"avg_acc": 0.97}, "fedavg": {"avg_acc": 0.5},
              "fedavg-after-local-steps": {"avg_acc": 0.94}, "pflego-authors-code": {"avg_acc": 0.98}}  # fmt: skip
    text = reproduction_markdown([write_paper_run(tmp_path, "pflego-emnist-k2-protocol", finals)], "cmd", papers())
    # rounds 0-2 rising linearly: the last-10 mean is half the final value
    assert "| fedavg-after-local-steps (FedAvg after its tau local steps, as the authors' code evaluates it) | 97.29 | 0.54 | 47.0 |" in text
    assert "| pflego-authors-code (PFLEGO as the authors' code runs it: Adam on the server) | 98.49 | 0.43 | 49.0 |" in text
    rows = {line.split(" | ")[1]: line.split(" | ")[2] for line in text.splitlines() if line.startswith("| EMNIST, high")}
    assert rows == {
        "PFLEGO >= FedPer >= FedAvg with high personalization (Table 1)": "**does not hold**",
        "PFLEGO >= FedPer >= FedAvg with high personalization, FedAvg evaluated after its local steps (Table 1)":
            "**does not hold**",
        "PFLEGO >= FedPer >= FedAvg with high personalization, as the authors' code runs PFLEGO and evaluates FedAvg "
        "(Table 1)": "holds",
    }  # fmt: skip
    assert "average accuracy PFLEGO 48.0 / FedPer 48.5 / FedAvg (fedavg-after-local-steps) 47.0, on 1 seed(s)" in text
    assert ("average accuracy PFLEGO (pflego-authors-code) 49.0 / FedPer 48.5 / FedAvg (fedavg-after-local-steps) 47.0, "
            "on 1 seed(s)") in text  # fmt: skip
    assert "Not run yet: simulate scenario `pflego-emnist-k31-protocol`" in text
    assert text.endswith("\n\nWhy they do not hold, measured from these runs: docs/research/reproduction-seed-notes.md, section "
                         "'The papers' own protocols, at their budgets (runs in progress)'.\n")  # fmt: skip


def test_experts_protocol_page_checks_the_claims_over_the_protocol_runs_only(tmp_path):
    dirs = [write_paper_run(tmp_path, f"experts-cifar10-p{p}-protocol", {"fedmoe": {"avg_acc": m}, "ifca": {"avg_acc": i}})
            for p, m, i in ((0.2, 0.72, 0.70), (1.0, 0.90, 0.50))]  # fmt: skip
    text = reproduction_markdown(dirs, "cmd", papers())
    assert "## CIFAR-10, majority class fraction p = 1.0 (Table 2, J = 6)" in text
    assert "Not run yet: simulate scenario `experts-cifar10-p0.6-protocol`" in text
    assert "MoE vs IFCA average accuracy p=0.2: 72.0 vs 70.0 (+2.0); p=1.0: 90.0 vs 50.0 (+40.0)" in text


def test_pflego_page_and_cli_selecting_the_paper(tmp_path):
    good = write_paper_run(tmp_path, "pflego-emnist-k62", {"pflego": {"avg_acc": 0.55}, "fedper": {"avg_acc": 0.5}, "fedavg": {"avg_acc": 0.6}})
    out = tmp_path / "pflego.md"
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(good), "--target", "0.5", "--reproduction", str(out), "--paper", "pflego"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert f"Written by `wirelessfl report {good} --reproduction {out} --paper pflego`" in text
    # Table 1 averages the final 10 rounds, and so does the page: this trace rises linearly over rounds 0-2,
    # so each curve reads as the mean of 0, half and all of its final value
    assert "as each seed's mean over the evaluated rounds among the last 10" in text
    assert "| fedavg (FedAvg) | 69.40 | 0.10 | 30.0 | 30.0 | 30.0 |" in text
    assert ("| EMNIST, no personalization: every client has all 62 classes (Table 1) | FedAvg is the best with no "
            "personalization (Table 1) | holds | average accuracy FedAvg 30.0 vs PFLEGO 27.5 and FedPer 25.0") in text  # fmt: skip
    wrong = runner.invoke(app, ["report", str(good), "--target", "0.5", "--reproduction", str(tmp_path / "x.md"), "--paper", "fedem"])
    assert wrong.exit_code == 2 and "scenario 'pflego-emnist-k62' belongs to paper 'pflego', not 'fedem'" in wrong.output
    unknown = runner.invoke(app, ["report", str(good), "--target", "0.5", "--reproduction", str(tmp_path / "x.md"), "--paper", "nope"])
    assert unknown.exit_code == 2 and "--paper must be one of" in unknown.output
    other = write_paper_run(tmp_path, "fedem-emnist", {"fedavg": {"avg_acc": 0.6}})
    mixed = runner.invoke(app, ["report", str(good), str(other), "--target", "0.5", "--reproduction", str(tmp_path / "x.md")])
    assert mixed.exit_code == 2 and "the runs belong to several papers (fedem, pflego)" in mixed.output
    alone = runner.invoke(app, ["report", str(good), "--target", "0.5", "--paper", "pflego"])
    assert alone.exit_code == 2 and "--paper needs --reproduction FILE" in alone.output
    assert not (tmp_path / "x.md").exists()


def test_tables_show_the_95_percent_interval_over_seeds_when_a_run_has_several(tmp_path):
    finals = {"fedavg": {"avg_acc": (0.60, 0.64)}, "local": {"avg_acc": (0.50, 0.50)}}
    two = Run.from_trace(paper_trace("fedem-emnist", finals, seeds=(0, 1)))
    # 60 and 64: std 2 * sqrt(2) (ddof 1), half-width t(0.975, 1) * std / sqrt(2) = 12.706 * 2 = 25.4
    assert two.acc_text("fedavg") == "62.0 ± 25.4" and two.interval("fedavg") == pytest.approx(25.412, abs=1e-3)
    assert two.acc_text("local") == "50.0 ± 0.0"
    assert two.acc_text("fedem") == "n/a"
    one = Run.from_trace(paper_trace("fedem-emnist", {"fedavg": {"avg_acc": 0.6}}))
    assert one.acc_text("fedavg") == "60.0"
    page = reproduction_markdown([write_paper_run(tmp_path, "fedem-emnist", finals, seeds=(0, 1))], "cmd", papers())
    assert "| 62.0 ± 25.4 |" in page


def test_user_centric_table_shows_the_interval_over_seeds(tmp_path):
    finals = {"fedavg": {"avg_acc": (0.60, 0.64), "worst_acc": (0.40, 0.40)}, "local": {"avg_acc": 0.5}}
    page = reproduction_markdown([write_paper_run(tmp_path, "paper-emnist-label-shift", finals, seeds=(0, 1))], "cmd", papers())
    assert "| fedavg | 68.9 | 40.0 ± 0.0 | 62.0 ± 25.4 |" in page  # 95% interval of 60 and 64
    assert "| local | 58.8 | 50.0 ± 0.0 | 50.0 ± 0.0 |" in page


@pytest.mark.parametrize(("scenario", "source"), [("pflego-emnist-k62", "pflego.txt"), (COVARIATE, "user-centric-fl.txt")])
def test_the_page_names_the_papers_text_in_the_papers_folder_setting(tmp_path, monkeypatch, scenario, source):
    directory = write_paper_run(tmp_path, scenario, {"fedavg": {"avg_acc": 0.6}})
    monkeypatch.delenv("WIRELESSFL_PAPERS", raising=False)
    assert f"Paper: ../shared/papers/{source}. " in reproduction_markdown([directory], "cmd", papers())
    monkeypatch.setenv("WIRELESSFL_PAPERS", "/data/papers/")
    assert f"Paper: /data/papers/{source}. " in reproduction_markdown([directory], "cmd", papers())


def test_an_ordering_claim_names_the_gaps_inside_the_95_percent_intervals():
    """Three seeds: PFLEGO 95/96/97 and FedPer 95.5/96/96.5 overlap (gap 0, half-widths 2.5 and 1.2); FedAvg at
    50/50/51 is clear of both; the verdict still reads the means, the evidence says which gaps are noise."""
    from wirelessfl_papers import pflego_protocol

    finals = {
        "pflego": {"avg_acc": (0.95, 0.96, 0.97)},
        "fedper": {"avg_acc": (0.955, 0.96, 0.965)},
        "fedavg": {"avg_acc": (0.50, 0.50, 0.51)},
        "fedavg-after-local-steps": {"avg_acc": (0.90, 0.91, 0.92)},
    }
    run = Run.from_trace(paper_trace("pflego-emnist-k2-protocol", finals, seeds=(0, 1, 2)))
    check = claim(pflego_protocol, "PFLEGO >= FedPer >= FedAvg with high personalization (Table 1)")
    verdict = check.verdict({"pflego-emnist-k2-protocol": run})
    assert verdict.holds
    assert "PFLEGO 96.0 ± 2.5 / FedPer 96.0 ± 1.2 / FedAvg 50.3 ± 1.4, on 3 seed(s)" in verdict.evidence
    # seed by seed PFLEGO - FedPer is -0.5, 0, +0.5: mean 0, half-width t(0.975, 2) x 0.5 / sqrt(3) = 1.2
    assert "; within the 95% intervals: PFLEGO vs FedPer (PFLEGO - FedPer seed by seed: +0.0 ± 1.2);" in verdict.evidence


def test_paired_difference_separates_what_two_overlapping_intervals_do_not():
    """Seeds move both curves by 10 points (intervals 12.4 wide overlap), but a is 1 point above b in every
    seed: seed by seed +1.0 ± 0.0. With one seed shared there is no paired interval."""
    finals = {"fedem": {"avg_acc": (0.50, 0.60, 0.70)}, "fedavg": {"avg_acc": (0.49, 0.59, 0.69)}}
    run = Run.from_trace(paper_trace("fedem-emnist", finals, seeds=(0, 1, 2)))
    assert run.interval("fedem") == pytest.approx(4.302652729911275 * 10 / math.sqrt(3))
    mean, half = run.paired("fedem", "fedavg")
    assert mean == pytest.approx(1.0) and half == pytest.approx(0.0, abs=1e-9)
    assert run.paired("fedem", "missing") is None
    one = Run.from_trace(paper_trace("fedem-emnist", finals | {"fedavg": {"avg_acc": 0.5}}, seeds=(0,)))
    assert one.paired("fedem", "fedavg") is None


@pytest.mark.parametrize(
    "data, start",
    [
        ({"dataset": "cifar10", "clients": 20}, "cifar10, 20 users,"),
        ({"dataset": "emnist", "options": {"split": "byclass"}, "clients": 100}, "emnist {'split': 'byclass'}, 100 users,"),
    ],
)
def test_setup_line_names_the_dataset_and_its_options_without_a_stray_space(tmp_path, data, start):
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({"data": data, "model": {"name": "mlp"}, "training": {"lr": 0.1}}))
    assert setup_line(tmp_path).startswith(start)
