"""Compressed uploads (wirelessfl/algorithms/compression.py, docs/levers.md): QSGD against Alistarh et al.'s
unbiasedness and variance bound, top-k and scaled sign with error feedback by hand, the payload in bits, the
exactness cases through ``simulate``, and the error-feedback residual across a checkpoint and resume."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.algorithms.compression import Compression, Compressor, qsgd, qsgd_bound, qsgd_variance, scaled_sign, top_k
from wirelessfl.checkpoint import load_checkpoint
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.run.curves import curves_of
from wirelessfl.run.keys import unit_fingerprint
from wirelessfl.simulate import simulate

from levers_cell import curve_frame, lever_scenario

SCENARIO = lever_scenario("compression")


@pytest.mark.parametrize("bits", [2, 3, 5, 8])
def test_qsgd_is_unbiased_and_its_variance_is_the_exact_one_within_the_papers_bound(bits):
    d, draws = 500, 4000
    v = torch.randn(1, d, generator=torch.Generator().manual_seed(bits), dtype=torch.float64)
    v[0, :50] *= 10.0  # uneven magnitudes: many coordinates between levels
    generator = torch.Generator().manual_seed(100 + bits)
    samples = qsgd(v.expand(draws, d).contiguous(), bits, generator)
    exact = float(qsgd_variance(v, bits)[0])
    # unbiased: the mean of the draws is off from v by what their variance allows (E||mean - v||^2 = Var / draws)
    assert float(((samples.mean(0) - v[0]) ** 2).sum()) < 3.0 * exact / draws
    # the measured variance is the exact one, which is within Lemma 3.1's min(d / s^2, sqrt(d) / s) ||v||^2
    measured = float(((samples - v) ** 2).sum(1).mean())
    assert measured == pytest.approx(exact, rel=0.05)
    assert exact <= float(qsgd_bound(v, bits)[0])
    # every value is a level: ||v|| * l / s for an integer l in 0..s
    s = 2 ** (bits - 1) - 1
    levels = samples.abs() * s / torch.linalg.vector_norm(v)
    assert torch.allclose(levels, levels.round(), atol=1e-9) and float(levels.max()) <= s + 1e-9


def test_payload_bits_by_hand():
    d = 1000
    assert Compression("qsgd", bits=8).payload(d) == (8 * 1000 + 32) / 32000
    assert Compression("qsgd", bits=2).payload_bits(d) == 2032
    # top 1%: 10 float32 values and 10 indices of ceil(log2 1000) = 10 bits (shorter than a 1000-bit mask)
    assert Compression("top_k", fraction=0.01).payload_bits(d) == 10 * 32 + 10 * 10
    # top 50%: 500 values and a 1000-bit mask (shorter than 500 indices of 10 bits)
    assert Compression("top_k", fraction=0.5).payload_bits(d) == 500 * 32 + 1000
    # top 99%: the dense vector is shorter than values and positions
    assert Compression("top_k", fraction=0.99).payload_bits(d) == 32 * 1000
    assert Compression("sign").payload_bits(d) == 1000 + 32
    assert Compression("qsgd", bits=32).payload(d) == 1.0 and Compression("top_k", fraction=1.0).payload(d) == 1.0


def test_top_k_with_error_feedback_carries_the_residual_by_hand():
    compressor = Compressor(Compression("top_k", fraction=0.5), num_clients=2, params=4)
    start = torch.zeros(1, 4)
    sent = compressor.apply(np.array([1]), start, torch.tensor([[3.0, -1.0, 0.5, -4.0]]), torch.Generator())
    assert sent.tolist() == [[3.0, 0.0, 0.0, -4.0]]
    assert compressor.residual.full().tolist() == [[0.0] * 4, [0.0, -1.0, 0.5, 0.0]]
    # next round: p = delta + residual = [0.2, -0.8, 0.7, 0.2]; the two largest are sent, the rest is kept
    sent = compressor.apply(np.array([1]), start, torch.full((1, 4), 0.2), torch.Generator())
    assert torch.allclose(sent, torch.tensor([[0.0, -0.8, 0.7, 0.0]]))
    assert torch.allclose(compressor.residual.full()[1], torch.tensor([0.2, 0.0, 0.0, 0.2]))
    assert compressor.residual.full()[0].tolist() == [0.0] * 4  # a client that did not upload keeps its residual


def test_scaled_sign_and_top_k_by_hand():
    v = torch.tensor([[1.0, -3.0, 0.0, 2.0]])
    assert scaled_sign(v).tolist() == [[1.5, -1.5, 1.5, 1.5]]  # ||v||_1 / d = 6 / 4; zero sent as +
    assert top_k(v, 2).tolist() == [[0.0, -3.0, 0.0, 2.0]]


def test_uncompressed_levers_give_the_uncompressed_trace_exactly():
    """top_k keeping every coordinate and qsgd at 32 bits (the float32 value itself), with or without error
    feedback, through ``simulate``: the same models, times, bits and energy as no compression."""
    algorithms = [
        {"name": "fedavg", "label": "plain"},
        {"name": "fedavg", "label": "top-all", "training": {"compression": {"method": "top_k", "fraction": 1.0}}},
        {"name": "fedavg", "label": "qsgd-32", "training": {"compression": {"method": "qsgd", "bits": 32}}},
        {"name": "fedavg", "label": "qsgd-32-ef",
         "training": {"compression": {"method": "qsgd", "bits": 32, "error_feedback": True}}},
    ]
    trace = simulate(parse_scenario({**SCENARIO, "algorithms": algorithms})).trace
    for curve in ("top-all", "qsgd-32", "qsgd-32-ef"):
        pd.testing.assert_frame_equal(curve_frame(trace, curve), curve_frame(trace, "plain"), check_exact=True)


def test_a_compressed_upload_is_shorter_on_air_and_changes_the_models():
    algorithms = [
        {"name": "fedavg", "label": "plain"},
        {"name": "fedavg", "label": "q4", "training": {"compression": {"method": "qsgd", "bits": 4}}},
        {"name": "fedavg", "label": "sign", "training": {"compression": {"method": "sign"}}},
    ]
    scenario = parse_scenario({**SCENARIO, "algorithms": algorithms})
    trace = simulate(scenario).trace
    plain, rounds = curve_frame(trace, "plain"), slice(1, None)
    d = int(plain["ul_bits"].iloc[1]) // (6 * 32)  # six float32 models a round uncompressed
    assert plain["ul_bits"].iloc[1] == 6 * 32 * d and d > 1000
    for curve, spec in (("q4", Compression("qsgd", bits=4)), ("sign", Compression("sign"))):
        ours = curve_frame(trace, curve)
        assert (ours["ul_payload"].iloc[rounds] == sum([spec.payload(d)] * 6)).all()
        np.testing.assert_allclose(ours["ul_bits"].iloc[rounds], 6 * spec.payload_bits(d), rtol=1e-12)
        assert (ours["round_time"].iloc[rounds] < plain["round_time"].iloc[rounds]).all()
        assert (ours["energy_j"].iloc[rounds] < plain["energy_j"].iloc[rounds]).all()
        assert not np.array_equal(ours["mean_loss"].to_numpy(), plain["mean_loss"].to_numpy())


def test_the_error_feedback_residual_survives_a_checkpoint_and_resume_byte_for_byte(tmp_path):
    doc = {
        **SCENARIO, "rounds": 4, "checkpoint_every": 1, "networks": [{"preset": "wired"}],
        "algorithms": [{"name": "fedavg", "training": {
            "compression": {"method": "top_k", "fraction": 0.05}, "scheduling": {"policy": "age", "k": 4},
        }}],
    }
    scenario = parse_scenario(doc)
    whole = simulate(scenario, run_dir=tmp_path / "whole", keep_models=True)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir=tmp_path / "cut", keep_models=True, stop_after_rounds=3)
    partial = _state(tmp_path / "cut", scenario, "partial")
    assert partial["records"][-1].round == 2 and float(partial["algorithm"]["compressor"]["residual"].abs().sum()) > 0
    resumed = simulate(scenario, run_dir=tmp_path / "cut")
    pd.testing.assert_frame_equal(resumed.trace, whole.trace, check_exact=True)
    ours, theirs = _state(tmp_path / "cut", scenario, "done"), _state(tmp_path / "whole", scenario, "done")
    for lever, name in (("compressor", "residual"), ("scheduler", "last_upload")):
        a, b = ours["algorithm"][lever][name], theirs["algorithm"][lever][name]
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert np.asarray(theirs["algorithm"]["scheduler"]["last_upload"]).tolist() == [4, 4, 3, 3, 4, 4]


def _state(run_dir, scenario, kind):
    (curve,) = curves_of(scenario)
    stamp = unit_fingerprint(scenario, curve, 0)
    return load_checkpoint(run_dir / "checkpoints" / f"seed0__fedavg.{kind}.safetensors", CHECKPOINT_TYPES, (stamp,), PROVENANCE)


@pytest.mark.parametrize(("compression", "message"), [
    ({"method": "qsgd", "bits": 40}, "training.compression.bits: must be from 1 to 32 bits per value, got 40"),
    ({"method": "qsgd", "bits": 0}, "training.compression.bits: must be from 1 to 32 bits per value, got 0"),
    ({"method": "qsgd", "bits": 1},
     "training.compression.bits: qsgd needs 2 to 32 bits per value (one is the sign), got 1; one bit per value is method: sign"),
    ({"method": "qsgd"}, "training.compression: qsgd needs bits: (2 to 32 bits per value)"),
    ({"method": "sign", "bits": 4}, "training.compression: bits: only qsgd takes bits (sign sends 1 bit per value)"),
    ({"method": "top_k", "fraction": 0.0},
     "training.compression.fraction: must be in (0, 1] (the fraction of the coordinates sent), got 0.0"),
    ({"method": "top_k"}, "training.compression: top_k needs fraction: (the fraction of the coordinates sent, in (0, 1])"),
])
def test_bad_compression_fields_are_one_line(compression, message):
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}], "training": {"compression": compression}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == f"scenario: {message}"


def test_a_method_that_uploads_no_model_refuses_compression_in_one_line():
    doc = {**SCENARIO, "networks": [{"preset": "wired"}],
           "algorithms": [{"name": "local", "training": {"compression": {"method": "sign"}}}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: algorithms[0]: local: training.compression does not apply to local; it applies to fedavg, fedavg_ft, fedper, fedprox, oracle, ucfl"
    )


def test_qsgd_bound_is_the_papers_min():
    v = torch.ones(1, 100, dtype=torch.float64)
    s = 2 ** (4 - 1) - 1
    assert float(qsgd_bound(v, 4)[0]) == pytest.approx(min(100 / s**2, math.sqrt(100) / s) * 100)
