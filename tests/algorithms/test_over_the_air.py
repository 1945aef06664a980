"""Over-the-air aggregation (network/over_the_air.py, algorithms/over_the_air.py, docs/levers.md): the aggregate's
mean squared error against the closed form over Rayleigh draws, truncation and the alignment SNR by hand, the
analog round's timing (d / B), digital FedAvg's trace exactly at infinite SNR without truncation, the
participation lost to truncation per round, and the refusals in one line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from scipy.special import exp1
from scipy.stats import binom
from typer.testing import CliRunner

from wirelessfl.algorithms.over_the_air import analog_aggregate, noise_std, truncated_share
from wirelessfl.cli import app
from wirelessfl.config import parse_scenario
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network import physical as phy
from wirelessfl.network.over_the_air import analog_cells, cell_count, truncated_inversion
from wirelessfl.seam import AnalogAggregation, AnalogCell, CommPlan
from wirelessfl.run.seeds import network_rng, static_rng
from wirelessfl.simulate import simulate

from levers_cell import CELL, lever_scenario

SCENARIO = lever_scenario("ota")
LEARNING = ["avg_acc", "worst_acc", "avg_val_acc", "mean_loss", "train_loss", "aggregated", "participants"]


def _closed_form_mse(n: int, mean_snr: float, threshold: float, r: float) -> float:
    """E[||Δ̂ - Δ_K||² | K not empty] for n devices of equal weight and update norm r under Rayleigh fading of mean
    SNR mean_snr, truncation at threshold: |K| ~ Binomial(n, p = exp(-threshold / mean_snr)); given |K| = k the
    passing SNRs are threshold + Exp(mean mean_snr) (memoryless), so eta = threshold + Exp(mean mean_snr / k) and
    E[1/eta] = λ e^{λθ} E1(λθ), λ = k / mean_snr; the error given k is r² / k² · E[1/eta]."""
    p = math.exp(-threshold / mean_snr)
    total = 0.0
    for k in range(1, n + 1):
        lam = k / mean_snr
        inverse_eta = lam * math.exp(lam * threshold) * exp1(lam * threshold)
        total += binom.pmf(k, n, p) * r**2 / k**2 * inverse_eta
    return total / (1.0 - (1.0 - p) ** n)


SNRS = [(10.0, 0.0), (10.0, 10.0), (20.0, 10.0), (0.0, -10.0), (5.0, 5.0)]
"""(mean SNR, truncation threshold) in dB of the closed-form checks."""

DRAWS = [pytest.param(2_000, 0.09, id="2k-draws"), pytest.param(40_000, 0.02, id="40k-draws", marks=pytest.mark.slow)]
"""Draws and relative tolerance: by default 2,000 draws within 9% (the 2% of 40,000 draws times sqrt(20), still
far below the factor of 2 or more of a missing weight, sqrt or eta); 40,000 within 2% under ``-m slow``."""


@pytest.mark.parametrize(("draws", "tolerance"), DRAWS)
@pytest.mark.parametrize(("mean_snr_db", "threshold_db"), SNRS)
def test_the_aggregates_mean_squared_error_matches_the_closed_form(mean_snr_db, threshold_db, draws, tolerance):
    n, d, r = 20, 64, 3.0
    mean_snr, threshold = 10 ** (mean_snr_db / 10), 10 ** (threshold_db / 10)
    rng = np.random.default_rng(7)
    gen = torch.Generator().manual_seed(7)
    start = torch.zeros(d)
    updates = torch.randn(n, d, generator=gen, dtype=torch.float64)
    updates = (r * updates / torch.linalg.vector_norm(updates, dim=1, keepdim=True)).float()
    weights = torch.full((n,), 1.0 / n, dtype=torch.float64)
    scheduled = np.arange(n)
    errors, truncated = [], 0
    for _ in range(draws):
        analog = truncated_inversion(mean_snr * rng.standard_exponential(n), scheduled, threshold_db)
        truncated += len(analog.truncated)
        if not analog.passed:
            continue
        uploads = {k: updates[k] for k in sorted(analog.passed)}
        digital = updates[sorted(analog.passed)].double().mean(dim=0).float()
        received = analog_aggregate(digital, start, uploads, weights, analog, gen)
        errors.append(float(((received.double() - digital.double()) ** 2).sum()))
    expected = _closed_form_mse(n, mean_snr, threshold, r)
    assert abs(np.mean(errors) / expected - 1) < tolerance, np.mean(errors) / expected - 1
    # the participation lost to truncation: 1 - exp(-θ / mean SNR) of the scheduled devices
    lost = 1 - math.exp(-threshold / mean_snr)
    assert abs(truncated / (n * draws) - lost) < tolerance * max(lost, 0.05), (truncated / (n * draws), lost)


def test_truncation_leaves_out_the_deep_fades_and_eta_is_the_weakest_that_passed():
    snr = np.array([0.5, 2.0, 10.0, 4.0])
    analog = truncated_inversion(snr, np.array([0, 1, 2]), 3.0, airtime_s=0.25)  # 3 dB = 1.995
    assert analog == AnalogAggregation(frozenset({1, 2}), frozenset({0}), 1 / 2.0, 0.25)
    assert truncated_inversion(snr, np.array([0, 1, 2]), None).noise_var == 1 / 0.5  # no truncation: the weakest sets eta
    assert truncated_inversion(snr, np.array([0, 1, 2]), None, noise=False).noise_var == 0.0
    nobody = truncated_inversion(snr, np.array([0, 1]), 20.0)
    assert nobody.passed == frozenset() and nobody.truncated == {0, 1} and nobody.noise_var == 0.0


def test_the_noise_standard_deviation_by_hand():
    start = torch.zeros(4)
    uploads = {0: torch.tensor([2.0, 0, 0, 0]), 2: torch.tensor([0, 0, 0, 1.0])}
    weights = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    # s = max(0.25·2, 0.25·1) / sqrt(4) = 0.25; W_K = 0.5; std = s / W_K · sqrt(1/eta) with 1/eta = 0.16
    assert noise_std(start, uploads, weights, 0.16) == pytest.approx(0.25 / 0.5 * 0.4, rel=1e-12)
    assert noise_std(start, uploads, weights, 0.0) == 0.0


def test_the_analog_round_uses_the_rounds_uplink_draws_and_lasts_d_over_b():
    profile = SystemProfile.from_dict(CELL)
    network = NetworkModel(profile, 6, np.random.default_rng(3))
    plan = CommPlan.broadcast(range(6), model_params=10_000)
    analog = network.analog_aggregation(network_rng(0, "cell", 2), np.arange(6), 0.0, True, 10_000)
    snr = np.asarray(network.uplink_channel(network_rng(0, "cell", 2)).snr)
    assert analog.passed == frozenset(np.flatnonzero(snr >= 1.0).tolist()) and analog.truncated == frozenset(np.flatnonzero(snr < 1.0).tolist())
    assert analog.noise_var == 1 / snr[snr >= 1.0].min()
    assert analog.airtime_s == 10_000 / 1.0e6  # d symbols over B Hz
    digital = network.time_round(plan, network_rng(0, "cell", 2))
    timing = network.time_analog_round(plan, network_rng(0, "cell", 2), analog)
    assert timing.t_computed == digital.t_computed and timing.arrived == analog.passed
    start = max(timing.t_computed[c] for c in analog.passed)
    for c in range(6):
        if c in analog.passed:
            assert (timing.t_upload_start[c], timing.t_uploaded[c], timing.airtime[c]) == (start, start + 0.01, 0.01)
        else:
            assert timing.airtime[c] == 0.0 and timing.t_uploaded[c] == math.inf
    assert timing.t_end == max(max(timing.t_computed.values()), start + 0.01)


def _analog(training: dict) -> dict:
    return {"name": "fedavg", "label": "ota", "training": {"aggregation": {"mode": "over_the_air", **training}}}


def test_noiseless_untruncated_over_the_air_gives_digital_fedavgs_trace_exactly():
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}, _analog({"receiver_noise": False})]}
    result = simulate(parse_scenario(doc))
    trace = result.trace.set_index(["seed", "round"])
    digital, ota = trace[trace["curve"] == "fedavg"], trace[trace["curve"] == "ota"]
    pd.testing.assert_frame_equal(ota[LEARNING], digital[LEARNING], check_exact=True)
    assert (ota["aggregated"].iloc[1:] == 6).all()
    # the time is the analog round's: one transmission of d symbols, not six digital uploads
    assert not np.array_equal(ota["round_time"].to_numpy()[1:], digital["round_time"].to_numpy()[1:])
    assert all(row["truncated"] == 0 and row["noise_var"] == 0.0 for row in result.diagnostics["seed0__ota__cell"].values())


def test_the_participation_lost_to_truncation_is_reported_per_round():
    doc = {**SCENARIO, "algorithms": [_analog({"truncation_db": 0.0})]}
    scenario = parse_scenario(doc)
    result = simulate(scenario)
    rounds = result.trace[result.trace["round"] > 0].set_index("round")
    reported = result.diagnostics["seed0__ota__cell"]
    network = NetworkModel(scenario.profiles()[0], 6, static_rng(0, scenario.profiles()[0]))
    lost = 0
    for r, row in reported.items():
        analog = network.analog_aggregation(network_rng(0, "cell", r), np.arange(6), 0.0, True, 1)
        assert row["truncated"] == len(analog.truncated) == rounds.loc[r, "participants"] - rounds.loc[r, "aggregated"]
        assert row["noise_var"] == analog.noise_var
        lost += row["truncated"]
    assert lost > 0  # the threshold bites in this cell


runner = CliRunner()
WIRED = {**SCENARIO, "rounds": 1, "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 30}}}
OTA = {"aggregation": {"mode": "over_the_air", "truncation_db": 0.0}}


@pytest.mark.parametrize(("training", "algorithm", "networks", "line"), [
    (OTA, "fedavg", [{"preset": "wired"}],
     "training.aggregation.mode: over_the_air needs a physical uplink, which networks[0] ('wired') does not model "
     "(it needs physical: and backend: des)"),
    (OTA, "fedper", [CELL],
     "algorithms[0]: fedper: training.aggregation does not apply to fedper; it applies to fedavg, fedavg_ft"),
    ({**OTA, "compression": {"method": "qsgd", "bits": 8}}, "fedavg", [CELL],
     "training.aggregation.mode: over_the_air sends each update in analog, uncompressed; remove training.compression"),
    (OTA, "fedavg", [{**CELL, "deadline": 5.0}],
     "training.aggregation.mode: over_the_air transmits every update together; networks[0] ('cell') sets a deadline, "
     "which it does not model"),
    (OTA, "fedavg", [{**CELL, "physical": {**CELL["physical"], "coherence_s": 1e-5, "subbands": 64}}],
     "training.aggregation.mode: over_the_air on networks[0] ('cell'): the model's 15010 analog symbols span 1501 "
     "fading blocks x 64 subbands = 96064 cells; at most 65536 (set a longer physical.coherence_s, a lower "
     "ue_speed_mps or fewer physical.subbands)"),
    ({"aggregation": {"mode": "digital", "truncation_db": 3.0}}, "fedavg", [CELL],
     "training.aggregation: truncation_db and receiver_noise: only mode: over_the_air takes them"),
])
def test_bad_over_the_air_is_one_line_exit_2_and_writes_nothing(tmp_path, training, algorithm, networks, line):
    source = tmp_path / "ota.yaml"
    source.write_text(yaml.safe_dump({**WIRED, "training": training, "algorithms": [{"name": algorithm}], "networks": networks}))
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(source), "--out", str(out), "--quiet"])
    assert result.exit_code == 2 and not out.exists()
    assert result.output.strip().splitlines() == [f"error: {source}: {line}"]


# -- per fading block and subband (Zhu, Wang, Huang, Sec. V: truncation and alignment per sub-channel) ------------


def test_per_cell_truncation_and_eta_by_hand():
    snr = np.array([[0.5, 2.0, 10.0, 4.0],   # cell 0: client 0 truncated, eta = 2
                    [9.0, 9.0, 9.0, 9.0],    # an empty cell (stop repeated): dropped
                    [5.0, 1.0, 0.5, 4.0]])   # cell 2: only client 0 of the scheduled passes, eta = 5
    analog = truncated_inversion(snr, np.array([0, 1, 2]), 3.0, airtime_s=0.25, stops=np.array([6, 6, 10]))
    assert [(c.stop, c.passed, c.noise_var) for c in analog.cells] == [(6, {1, 2}, 1 / 2.0), (10, {0}, 1 / 5.0)]
    assert analog.passed == {0, 1, 2} and analog.truncated == frozenset()
    assert analog.noise_var == pytest.approx((6 / 2.0 + 4 / 5.0) / 10, rel=1e-15)  # mean over the sent coordinates
    nobody = truncated_inversion(snr, np.array([1, 2]), 20.0, stops=np.array([6, 6, 10]))
    assert nobody.passed == frozenset() and nobody.truncated == {1, 2} and nobody.noise_var == 0.0
    assert [c.passed for c in nobody.cells] == [frozenset(), frozenset()]
    assert truncated_share(analog, [0, 1, 2]) == pytest.approx((6 * 1 + 4 * 2) / (10 * 3), rel=1e-15)


def test_one_cell_is_todays_aggregation_to_the_last_bit():
    """A transmission of one block and one subband: the same devices, eta and aggregate, bit for bit."""
    rng = np.random.default_rng(1)
    snr = 3.0 * rng.standard_exponential(8)
    scheduled = np.arange(8)
    held = truncated_inversion(snr, scheduled, 0.0, airtime_s=0.5)
    cell = truncated_inversion(snr[None, :], scheduled, 0.0, airtime_s=0.5, stops=np.array([32]))
    assert (cell.passed, cell.truncated, cell.noise_var, cell.airtime_s) == (held.passed, held.truncated, held.noise_var, held.airtime_s)
    assert len(cell.cells) == 1 and held.cells == ()
    gen = torch.Generator().manual_seed(3)
    start = torch.randn(32, generator=gen)
    models = start + 0.1 * torch.randn(8, 32, generator=gen)
    weights = torch.as_tensor(rng.dirichlet(np.ones(8)))
    uploads = {k: models[k] for k in sorted(held.passed)}
    digital = (weights[sorted(held.passed)] / weights[sorted(held.passed)].sum()).float() @ models[sorted(held.passed)]
    ours = analog_aggregate(digital, start, uploads, weights, cell, torch.Generator().manual_seed(5))
    todays = analog_aggregate(digital, start, uploads, weights, held, torch.Generator().manual_seed(5))
    assert not torch.equal(todays, digital) and torch.equal(ours, todays)


def test_the_cells_of_a_transmission_by_hand():
    """B·T_c symbols a block (4,000 at 1 MHz and 4 ms), three subbands a block, coordinates block by block."""
    channel = SystemProfile.from_dict({**CELL, "physical": {**CELL["physical"], "coherence_s": 0.004, "subbands": 3}}).physical
    assert analog_cells(channel, 10_000).tolist() == [1333, 2666, 4000, 5333, 6666, 8000, 8666, 9333, 10_000]
    assert cell_count(channel, 10_000) == 9 and cell_count(channel, 8_000) == 6
    tdd = SystemProfile.from_dict({**CELL, "physical": {**CELL["physical"], "coherence_s": 0.004, "tdd_pattern": "DU"}}).physical
    assert analog_cells(tdd, 10_000).tolist() == [2000, 4000, 6000, 8000, 10_000]  # the uplink's half of the time


def test_each_cell_is_aggregated_over_its_own_devices_by_hand():
    start = torch.zeros(6)
    models = torch.tensor([[1.0, 1, 1, 1, 1, 1], [3.0, 3, 3, 3, 3, 3], [8.0, 8, 8, 8, 8, 8]])
    weights = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    uploads = {k: models[k] for k in range(3)}
    digital = (weights.float() @ models)
    cells = (AnalogCell(2, {0, 1}, 0.0), AnalogCell(4, {0, 1, 2}, 0.0), AnalogCell(5, {2}, 0.0), AnalogCell(6, set(), 0.0))
    analog = AnalogAggregation(frozenset({0, 1, 2}), frozenset(), 0.0, 0.1, cells)
    out = analog_aggregate(digital, start, uploads, weights, analog, torch.Generator().manual_seed(0))
    # cell 0: (1 + 3) / 2; cell 1: FedAvg's own value; cell 2: client 2 alone; cell 3: nobody, the received model
    assert out.tolist() == [2.0, 2.0, digital[2].item(), digital[3].item(), 8.0, 0.0]
    # noise: s = max_k w_k ||Δ_k|| / sqrt(d) = 0.5·8·sqrt(6) / sqrt(6) = 4; std_c = s / W_c · sqrt(1/eta_c)
    noisy = AnalogAggregation(analog.passed, frozenset(), 0.3, 0.1, tuple(AnalogCell(c.stop, c.passed, v) for c, v in zip(cells, (0.16, 0.25, 0.04, 0.0))))
    out = analog_aggregate(digital, start, uploads, weights, noisy, torch.Generator().manual_seed(9))
    z = torch.randn(6, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    std = torch.tensor([4 / 0.5 * 0.4] * 2 + [4 / 1.0 * 0.5] * 2 + [4 / 0.5 * 0.2, 0.0], dtype=torch.float64)
    base = torch.tensor([2.0, 2.0, digital[2].item(), digital[3].item(), 8.0, 0.0], dtype=torch.float64)
    assert torch.equal(out, (base + std * z).float())


def _cell_mse(n: int, mean_snr: float, threshold: float, r: float) -> float:
    """E[error of one cell's coordinates, as a share d_c / d of r²]: the closed form per cell without conditioning
    on K_c (a cell nobody sends has no noise): r² Σ_{k>=1} P(|K_c| = k) E[1/eta | k] / k²."""
    p = math.exp(-threshold / mean_snr)
    return _closed_form_mse(n, mean_snr, threshold, r) * (1.0 - (1.0 - p) ** n)


@pytest.mark.parametrize(("draws", "tolerance"), [pytest.param(500, 0.09, id="500-draws-x4-cells"),
                                                  pytest.param(10_000, 0.02, id="10k-draws-x4-cells", marks=pytest.mark.slow)])
@pytest.mark.parametrize(("mean_snr_db", "threshold_db"), SNRS)
def test_the_per_cell_aggregates_mean_squared_error_matches_the_closed_form(mean_snr_db, threshold_db, draws, tolerance):
    """Four cells of 16 coordinates with independent Rayleigh fading per device and cell: the error over the whole
    model against each cell's noiseless aggregate over its own devices is the sum of the cells' closed forms."""
    n, d, r, cells = 20, 64, 3.0, 4
    mean_snr, threshold = 10 ** (mean_snr_db / 10), 10 ** (threshold_db / 10)
    rng = np.random.default_rng(7)
    gen = torch.Generator().manual_seed(7)
    updates = torch.randn(n, d, generator=gen, dtype=torch.float64)
    updates = (r * updates / torch.linalg.vector_norm(updates, dim=1, keepdim=True)).float()
    uploads_all = {k: updates[k] for k in range(n)}
    weights = torch.full((n,), 1.0 / n, dtype=torch.float64)
    stops = np.arange(1, cells + 1) * (d // cells)
    scheduled, errors, truncated = np.arange(n), [], 0
    for _ in range(draws):
        analog = truncated_inversion(mean_snr * rng.standard_exponential((cells, n)), scheduled, threshold_db, stops=stops)
        truncated += sum(n - len(c.passed) for c in analog.cells)
        if not analog.passed:
            errors.append(0.0)
            continue
        uploads = {k: uploads_all[k] for k in sorted(analog.passed)}
        digital = updates[sorted(analog.passed)].double().mean(dim=0).float()
        received = analog_aggregate(digital, torch.zeros(d), uploads, weights, analog, gen).double()
        exact = torch.zeros(d, dtype=torch.float64)
        for start, cell in zip(np.r_[0, stops[:-1]], analog.cells):
            if cell.passed:
                exact[start:cell.stop] = updates[sorted(cell.passed), start:cell.stop].double().mean(dim=0)
        errors.append(float(((received - exact) ** 2).sum()))
    expected = _cell_mse(n, mean_snr, threshold, r)
    assert abs(np.mean(errors) / expected - 1) < tolerance, np.mean(errors) / expected - 1
    lost = 1 - math.exp(-threshold / mean_snr)  # of every (device, cell)
    assert abs(truncated / (n * cells * draws) - lost) < tolerance * max(lost, 0.05), (truncated / (n * cells * draws), lost)


BLOCKS = {**CELL, "name": "blocks", "physical": {**CELL["physical"], "coherence_s": 0.005, "subbands": 4}}
"""1 MHz, 5 ms blocks of 5,000 symbols, 4 subbands: the digits MLP's 15,010 parameters span 4 blocks, 16 cells."""


def test_the_networks_cells_fade_independently_with_each_devices_mean_snr():
    """Through ``NetworkModel.analog_aggregation``: each device is truncated in a cell with probability
    1 - exp(-theta / mean SNR) (Rayleigh), over 300 rounds x 16 cells; its cells follow ``analog_cells``."""
    profile = SystemProfile.from_dict(BLOCKS)
    network = NetworkModel(profile, 6, np.random.default_rng(3))
    mean = phy.link_snr(profile.physical, "ul", network.uplink_loss_db)
    threshold_db = float(10 * np.log10(np.median(mean)))
    stops = analog_cells(profile.physical, 15_010)
    assert len(stops) == 16
    lost, rounds = np.zeros(6), 300
    for r in range(rounds):
        analog = network.analog_aggregation(network_rng(0, "blocks", r), np.arange(6), threshold_db, True, 15_010)
        assert [c.stop for c in analog.cells] == stops.tolist()
        for cell in analog.cells:
            lost[sorted(set(range(6)) - cell.passed)] += 1
    expected = 1 - np.exp(-(10 ** (threshold_db / 10)) / mean)
    se = np.sqrt(expected * (1 - expected) / (16 * rounds))
    assert (np.abs(lost / (16 * rounds) - expected) < 4 * se + 1e-9).all(), (lost / (16 * rounds), expected)
    again = network.analog_aggregation(network_rng(0, "blocks", 7), np.arange(6), threshold_db, True, 15_010)
    assert again == network.analog_aggregation(network_rng(0, "blocks", 7), np.arange(6), threshold_db, True, 15_010)


def test_over_the_air_per_cell_through_simulate():
    """One scenario, three cells: fading held for the round and one block of one subband (no small-scale fading,
    so both see the same SNRs) give the same learning columns exactly; 16 cells report their cells and the
    share truncated per round; noiseless and untruncated, 16 cells give digital FedAvg's trace exactly."""
    still = {**CELL["physical"], "fading": "none", "drop": "common"}  # the same users in both
    networks = [
        {**CELL, "name": "held", "physical": still},
        {**CELL, "name": "oneblock", "physical": {**still, "coherence_s": 1.0}},
        BLOCKS,
    ]
    doc = {**SCENARIO, "rounds": 2, "networks": networks, "algorithms": [
        {"name": "fedavg"}, _analog({"truncation_db": 15.0}),
        {"name": "fedavg", "label": "clean", "training": {"aggregation": {"mode": "over_the_air", "receiver_noise": False}}},
    ]}
    scenario = parse_scenario(doc)
    result = simulate(scenario)
    trace = result.trace.set_index(["profile", "curve", "seed", "round"]).sort_index()
    held, oneblock = trace.loc[("held", "ota")], trace.loc[("oneblock", "ota")]
    pd.testing.assert_frame_equal(oneblock[LEARNING], held[LEARNING], check_exact=True)
    assert (held["aggregated"].iloc[1:] < 6).any()  # 15 dB truncates someone in this cell
    diagnostics = result.diagnostics
    for r, row in diagnostics["seed0__ota__oneblock"].items():
        assert row == {**diagnostics["seed0__ota__held"][r], "cells": 1, "truncated_share": row["truncated"] / 6}
    pd.testing.assert_frame_equal(trace.loc[("blocks", "clean")][LEARNING], trace.loc[("blocks", "fedavg")][LEARNING], check_exact=True)
    blocks = trace.loc[("blocks", "ota")]
    network = NetworkModel(scenario.profiles()[2], 6, static_rng(0, scenario.profiles()[2]))
    for r, row in diagnostics["seed0__ota__blocks"].items():
        analog = network.analog_aggregation(network_rng(0, "blocks", int(r)), np.arange(6), 15.0, True, 15_010)
        assert row == {"truncated": len(analog.truncated), "noise_var": analog.noise_var, "cells": 16,
                       "truncated_share": truncated_share(analog, range(6))}
        assert row["truncated"] == blocks.loc[(0, int(r)), "participants"] - blocks.loc[(0, int(r)), "aggregated"]
    assert 0 < np.mean([row["truncated_share"] for row in diagnostics["seed0__ota__blocks"].values()]) < 1


def test_a_sweep_point_of_too_many_cells_is_refused_in_one_line_before_anything_runs():
    from wirelessfl.sweep import plan_sweep
    from wirelessfl.sweep.grid import SweepError
    from wirelessfl.sweep.run import preflight

    doc = {**WIRED, "training": OTA, "algorithms": [{"name": "fedavg"}],
           "networks": [{**CELL, "physical": {**CELL["physical"], "coherence_s": 0.005, "subbands": 64}}]}
    plan = plan_sweep(parse_scenario(doc), {"physical.coherence_s": [0.005, 1e-5]})
    with pytest.raises(SweepError) as err:
        preflight(plan, None)
    assert str(err.value) == (
        "training.aggregation.mode: over_the_air on networks[1] ('cell physical.coherence_s=1e-05'): the model's 15010 "
        "analog symbols span 1501 fading blocks x 64 subbands = 96064 cells; at most 65536 (set a longer "
        "physical.coherence_s, a lower ue_speed_mps or fewer physical.subbands)"
    )
