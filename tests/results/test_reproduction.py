"""The paper comparison computes its verdicts from the traces: hand-made traces with known answers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from wirelessfl.cli import app
from wirelessfl.results.io import TRACE_COLUMNS, write_trace
from wirelessfl.results.reproduction import CLAIMS, FIG3_CLAIMS, Run, reproduction_markdown

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
    text = reproduction_markdown([directory], "wirelessfl report X --reproduction Y")
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
    text = reproduction_markdown([directory], "cmd")
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
    assert run.ucfl() == {4: "ucfl streams=4", 100: "ucfl streams=100"}
    assert run.with_ucfl("ucfl+warmup").ucfl() == {4: "ucfl+warmup streams=4", 100: "ucfl+warmup streams=100"}
    text = reproduction_markdown([run.directory], "cmd")
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
    text = reproduction_markdown([run.directory], "cmd")
    assert "| no ucfl+warmup run |  |" in text and "in place of the paper's UCFL" not in text
