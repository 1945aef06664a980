"""Device energy through whole runs: each algorithm family's round against the hand formula, who pays,
batteries, the timeline adding up to the trace's round time, and bad settings refused."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from wirelessfl.algorithms.base import FORWARD_COST
from wirelessfl.cli import run as cli_run
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.results.timeline import round_table
from wirelessfl.run.build import build_units
from wirelessfl.simulate import simulate

ENERGY = {"kappa": 2e-28, "cycles_per_sample": [1e4, 3e4], "cpu_hz": 1e9, "p_tx_w": 2.0, "p_rx_w": 1.0,
          "p_idle_w": 0.5, "seconds_per_unit": 0.1}
M, TAU, COMPONENTS, EPOCHS = 2, 3, 2, 2
SCENARIO = {
    "name": "energy",
    "rounds": 2,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 6, "samples": {"per_client": 30}},
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05, "local_epochs": EPOCHS},
    "algorithms": [
        {"name": "fedavg"},
        {"name": "fedfomo", "params": {"models_per_client": M}},
        {"name": "pflego", "params": {"tau": TAU}},
        {"name": "fedem", "params": {"components": COMPONENTS}},
    ],
    "networks": [{"name": "wired", "rho": 2.0, "t_min": 1.0, "energy": ENERGY}],
}


@pytest.fixture(scope="module")
def run():
    scenario = parse_scenario(SCENARIO)
    unit = build_units(scenario, 0)[0]
    return simulate(scenario), unit.data, unit.algorithm.ctx.arch


def hand_samples(algorithm: str, n_train: float, n_val: float, round: int, arch) -> float:
    """What each family computes per round, written out from the papers' descriptions."""
    if algorithm == "fedavg":
        return EPOCHS * n_train
    if algorithm == "fedfomo":  # local training, plus forward passes over the validation split: base, own, M downloads
        return EPOCHS * n_train + (FORWARD_COST * (2 + M) * n_val if round > 1 else 0.0)
    if algorithm == "pflego":  # joint pass, a feature pass and tau - 1 head steps on the cached features
        return n_train * (1 + FORWARD_COST + (TAU - 1) * arch.head_size / arch.param_count)
    return COMPONENTS * EPOCHS * n_train  # fedem: every component trained


@pytest.mark.parametrize("algorithm", ["fedavg", "fedfomo", "pflego", "fedem"])
def test_each_familys_round_costs_the_hand_formula(run, algorithm):
    result, data, arch = run
    rounds, trace = result.client_rounds, result.trace
    body = arch.param_count - arch.head_size
    for r in (1, 2):
        rows = rounds[(rounds["algorithm"] == algorithm) & (rounds["round"] == r)].set_index("client")
        round_time = trace[(trace["algorithm"] == algorithm) & (trace["round"] == r)]["round_time"].item()
        assert sorted(rows.index) == list(range(6))
        for client, row in rows.iterrows():
            streams, payload, upload = {
                "fedavg": (1, 1.0, 1.0),
                "fedfomo": (M if r > 1 else 1, 1.0, 1.0),
                "pflego": (1, body / arch.param_count, body / arch.param_count),
                "fedem": (1, COMPONENTS, COMPONENTS),
            }[algorithm]
            receive, compute, transmit = streams * payload, 1.0, upload * 2.0
            n_train, n_val = float(data.train_sizes[client]), float(len(data.clients[client].y_val))
            joules_per_sample = 2e-28 * (1e4 if client < 3 else 3e4) * 1e9**2
            expected = joules_per_sample * hand_samples(algorithm, n_train, n_val, r, arch) + 0.1 * (
                1.0 * receive + 2.0 * transmit + 0.5 * (round_time - receive - compute - transmit)
            )
            assert row["streams_received"] == streams
            assert row["energy_j"] == pytest.approx(expected, rel=1e-9), (algorithm, r, client)


def test_trace_and_client_totals_add_up(run):
    result = run[0]
    rounds = result.client_rounds
    per_round = rounds.groupby(["curve", "round"])["energy_j"].sum()
    trace = result.trace[result.trace["round"] > 0].set_index(["curve", "round"])
    np.testing.assert_allclose(trace["energy_j"].loc[per_round.index], per_round.to_numpy(), rtol=1e-12)
    per_client = rounds.groupby(["curve", "client"])["energy_j"].sum()
    clients = result.clients.set_index(["curve", "client"])["energy_j"]
    np.testing.assert_allclose(clients.loc[per_client.index], per_client.to_numpy(), rtol=1e-12)
    last = result.trace.groupby("curve")["cum_energy_j"].last()
    np.testing.assert_allclose(last.loc[per_client.index.levels[0]], per_client.groupby(level=0).sum(), rtol=1e-12)


def test_a_device_not_selected_in_a_round_spends_nothing_in_it():
    scenario = parse_scenario({**SCENARIO, "rounds": 4, "training": {"participation": 0.5}, "algorithms": [{"name": "fedavg"}]})
    result = simulate(scenario)
    rounds = result.client_rounds
    unit = build_units(scenario, 0)[0]
    for r in range(1, 5):
        planned = sorted(unit.algorithm.plan(r).participants)
        assert sorted(rounds[rounds["round"] == r]["client"]) == planned
    taken = rounds.groupby("client").size().reindex(range(6), fill_value=0)
    assert result.clients.set_index("client")["rounds_taken_part"].tolist() == taken.tolist()
    assert (taken < 4).any()
    spent = rounds.groupby("client")["energy_j"].sum().reindex(range(6), fill_value=0.0)
    np.testing.assert_allclose(result.clients.set_index("client")["energy_j"], spent, rtol=1e-12)


def test_budgets_stop_devices_exactly_when_their_budget_is_spent():
    """Budgets of 1.3 rounds (a round costs about 1 J) for the first group: they run out in round 2 and take no part afterwards."""
    energy = {**ENERGY, "budget_j": [1.3, 1000.0]}
    scenario = parse_scenario({**SCENARIO, "rounds": 4, "algorithms": [{"name": "fedavg"}],
                               "networks": [{"name": "wired", "rho": 2.0, "t_min": 1.0, "energy": energy}]})
    result = simulate(scenario)
    rounds, clients = result.client_rounds, result.clients.set_index("client")
    first_round = rounds[rounds["round"] == 1].set_index("client")["energy_j"]
    assert (first_round.loc[[0, 1, 2]] < 1.3).all() and (2 * first_round.loc[[0, 1, 2]] > 1.3).all()
    for client in (0, 1, 2):
        assert clients.loc[client, "depleted_round"] == 2
        assert clients.loc[client, "energy_j"] == pytest.approx(1.3, rel=1e-12)
        assert rounds[rounds["client"] == client]["round"].tolist() == [1, 2]
        assert not rounds[(rounds["client"] == client) & (rounds["round"] == 2)]["arrived"].item()
    assert (clients.loc[[3, 4, 5], "depleted_round"] == 0).all()
    trace = result.trace.set_index("round")
    assert trace["depleted"].tolist() == [0, 0, 3, 3, 3]
    assert trace.loc[2, "aggregated"] == 3 and trace.loc[3, "participants"] == 3


def test_budgets_make_the_run_train_per_profile_and_resume_to_the_same_tables(tmp_path):
    energy = {**ENERGY, "budget_j": [1.3, 1000.0]}
    doc = {**SCENARIO, "rounds": 4, "checkpoint_every": 1, "algorithms": [{"name": "fedavg"}],
           "networks": [{"name": "wired", "rho": 2.0, "t_min": 1.0, "energy": energy}]}
    whole = simulate(parse_scenario(doc))
    assert not whole.replayed
    with pytest.raises(KeyboardInterrupt):
        simulate(parse_scenario(doc), run_dir=tmp_path, stop_after_rounds=3)
    resumed = simulate(parse_scenario(doc), run_dir=tmp_path)
    pd.testing.assert_frame_equal(whole.trace, resumed.trace)
    pd.testing.assert_frame_equal(whole.client_rounds, resumed.client_rounds)


def test_the_timeline_adds_up_to_the_traces_round_time_for_every_client(run):
    result = run[0]
    for r in (1, 2):
        table = round_table(result.client_rounds, result.trace, r)
        table = table.assign(length=table["end"] - table["start"])
        totals = table.groupby(["curve", "profile", "client"])["length"].sum()
        times = result.trace[result.trace["round"] == r].set_index(["curve", "profile"])["round_time"]
        for (curve, profile, _), total in totals.items():
            assert total == pytest.approx(times[(curve, profile)], rel=1e-12)
        for _, rows in table.groupby(["curve", "profile", "client"]):
            assert rows["start"].iloc[0] == 0.0 and (rows["start"].to_numpy()[1:] == rows["end"].to_numpy()[:-1]).all()


@pytest.mark.parametrize(
    ("energy", "message"),
    [
        ({"p_idle_w": -0.5}, "networks[0]: energy.p_idle_w must be a finite number >= 0, got -0.5"),
        ({"kappa": 0.0}, "networks[0]: energy.kappa must be a finite number > 0, got 0"),
        ({"budget_j": [1.0, 2.0, 3.0]}, "networks[0]: energy.budget_j lists 3 values but t_min/mu give 2 device groups"),
    ],
)
def test_bad_energy_settings_name_the_field(energy, message):
    doc = {**SCENARIO, "networks": [{"name": "n", "rho": 1.0, "t_min": [1.0, 2.0], "energy": energy}]}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(doc)
    assert message in str(error.value)


def _command(monkeypatch, capsys, *args: str) -> SimpleNamespace:
    """``wirelessfl ARGS`` in this process (the console entry point): its exit code, stdout and stderr."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["wirelessfl", *args])
    try:
        cli_run()
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def test_the_cli_refuses_bad_energy_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    doc = {**SCENARIO, "networks": [{"name": "n", "rho": 1.0, "energy": {"p_tx_w": -1}}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    done = _command(monkeypatch, capsys, "simulate", str(path), "--out", str(out), "--quiet")
    assert done.returncode == 2
    assert "networks[0]: energy.p_tx_w must be a finite number >= 0, got -1" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_sweep_over_an_energy_setting_replays_and_maps_energy_to_target(tmp_path):
    import wirelessfl

    doc = {**SCENARIO, "rounds": 4, "target_accuracy": 0.15, "algorithms": [{"name": "fedavg"}, {"name": "fedem", "params": {"components": 2}}],
           "networks": [{"name": "wired", "rho": 2.0, "t_min": 1.0}]}
    result = wirelessfl.sweep(doc, {"energy.p_tx_w": [1.0, 4.0]}, out=tmp_path / "sweep", executor="local")
    table = result.table
    assert result.trained_units == 2  # one unit, each curve trained once: the energy axis is timed by replay
    reached = table.dropna(subset=["energy_to_target"]).set_index(["curve", "energy.p_tx_w"])["energy_to_target"]
    for curve in ("fedavg", "fedem"):
        assert reached[(curve, 4.0)] > reached[(curve, 1.0)]
    assert (table["total_energy"] > 0).all()
    for name in ("energy_to_target.html", "best_method_energy.html"):
        assert (tmp_path / "sweep" / name).is_file()


def test_plot_timeline_remakes_one_round_and_refuses_a_round_the_run_lacks(tmp_path, monkeypatch, capsys):
    import wirelessfl

    run = wirelessfl.simulate({**SCENARIO, "algorithms": [{"name": "fedavg"}, {"name": "fedfomo", "params": {"models_per_client": M}}]},
                              out=tmp_path / "run")
    assert (tmp_path / "run" / "timeline.html").is_file() and (tmp_path / "run" / "client_rounds.parquet").is_file()
    assert set(run.figures(target=0.5)) >= {"energy", "timeline", "energy_pareto"}
    (tmp_path / "run" / "timeline.html").unlink()
    done = _command(monkeypatch, capsys, "plot", str(tmp_path / "run"), "--timeline", "2")
    assert done.returncode == 0 and (tmp_path / "run" / "timeline.html").is_file()
    html = (tmp_path / "run" / "timeline.html").read_text(encoding="utf-8")
    assert "Round 2" in html and "fedfomo | wired" in html
    for bad, message in (("7", "--timeline: round 7 is not in this run; rounds are 1..2"),
                         ("0", "--timeline must be a round >= 1, got 0")):
        done = _command(monkeypatch, capsys, "plot", str(tmp_path / "run"), "--timeline", bad)
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_energy_to_target_takes_the_first_round_at_target_and_needs_every_seed():
    from wirelessfl.results.energy import energy_to_target, pareto_mask

    rows = []
    for seed, accuracies in ((0, [0.1, 0.5, 0.9]), (1, [0.1, 0.8, 0.9])):
        for r, acc in enumerate(accuracies):
            rows.append({"curve": "a", "profile": "p", "seed": seed, "round": r, "time": 2.0 * r, "time_unit": "s",
                         "avg_acc": acc, "cum_energy_j": 10.0 * r * (seed + 1), "cum_energy_max_j": 3.0 * r})
    trace = pd.DataFrame(rows)
    reached = energy_to_target(trace, 0.8).iloc[0]
    assert (reached["energy"], reached["worst_device"], reached["round"]) == ((20.0 + 20.0) / 2, (6.0 + 3.0) / 2, 1.5)
    assert np.isnan(energy_to_target(trace, 0.95).iloc[0]["energy"])
    assert pareto_mask([1.0, 2.0, 3.0, np.nan], [3.0, 1.0, 2.0, 0.0]).tolist() == [True, True, False, False]


def test_the_reproduction_pages_energy_table_names_every_method(run):
    from wirelessfl.results.energy import energy_comparison_md

    lines = energy_comparison_md(run[0].trace, 0.5)
    table = "\n".join(lines)
    assert "J per participant per round" in table and "to 50% J" in table
    for curve in ("fedavg", "fedfomo", "pflego", "fedem"):
        assert f"| {curve} | wired |" in table
    assert energy_comparison_md(run[0].trace.drop(columns=["energy_j"]), 0.5) == []


def test_a_run_too_large_for_the_per_client_round_table_skips_it_with_a_note(tmp_path, monkeypatch):
    import wirelessfl
    import wirelessfl.accounting as accounting
    import wirelessfl.simulate as simulate_module

    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}]}  # 2 rounds x 6 clients x 1 curve x 1 profile x 1 seed
    monkeypatch.setattr(simulate_module, "CLIENT_ROUNDS_LIMIT", 11)
    monkeypatch.setattr(accounting, "CLIENT_ROUNDS_LIMIT", 11)
    run = wirelessfl.simulate(doc, out=tmp_path / "run")
    assert run.client_rounds is None and not (tmp_path / "run" / "client_rounds.parquet").exists()
    assert "no client_rounds.parquet and timeline.html: the run has up to 12 participant-rounds, more than 11" in (
        tmp_path / "run" / "summary.md"
    ).read_text(encoding="utf-8")
    assert run.trace["energy_j"].iloc[1] > 0


def test_the_timeline_shows_at_most_max_clients_bars(run, monkeypatch):
    import wirelessfl.results.timeline as timeline

    monkeypatch.setattr(timeline, "MAX_CLIENTS", 3)
    fig = timeline.fig_timeline(run[0].client_rounds, run[0].trace, 1)
    shown = {y for trace in fig.data for y in trace.y}
    assert shown == {"0", "1", "2"} and "the 3 participants with the lowest ids" in fig.layout.title.text
