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

from wirelessfl.algorithms.over_the_air import analog_aggregate, noise_std
from wirelessfl.cli import app
from wirelessfl.config import parse_scenario
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.over_the_air import truncated_inversion
from wirelessfl.seam import AnalogAggregation, CommPlan
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

DRAWS = [pytest.param(4_000, 0.065, id="4k-draws"), pytest.param(40_000, 0.02, id="40k-draws", marks=pytest.mark.slow)]
"""Draws and relative tolerance: by default 4,000 draws within 6.5% (the 2% of 40,000 draws times sqrt(10), still
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
    (OTA, "fedavg", [{**CELL, "physical": {**CELL["physical"], "coherence_s": 0.01}}],
     "training.aggregation.mode: over_the_air holds each device's channel for the round; networks[0] ('cell') sets "
     "block fading (physical.coherence_s or ue_speed_mps)"),
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
