"""Scheduling and compression on personalised methods (docs/levers.md): FedPer's shared part, UCFL's model
uploads, FedProx's uploads. Exactness through ``simulate`` (k = all and lossless compressors give today's trace),
the payload of FedPer's compressed body by hand, UCFL's weight round asking every available client, and FedPer's
lever state across a checkpoint and resume."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wirelessfl.algorithms.compression import Compression
from wirelessfl.checkpoint import load_checkpoint
from wirelessfl.config import parse_scenario
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.run.curves import curves_of
from wirelessfl.run.keys import unit_fingerprint
from wirelessfl.simulate import simulate

from levers_cell import curve_frame, lever_scenario

SCENARIO = lever_scenario("personalised-levers")
UNCHANGED = {
    "k-all-random": {"scheduling": {"policy": "random", "k": 6}},
    "k-all-best": {"scheduling": {"policy": "best_channel", "k": 6}},
    "k-all-importance": {"scheduling": {"policy": "importance", "k": 6}},
    "qsgd-32": {"compression": {"method": "qsgd", "bits": 32}},
    "top-all": {"compression": {"method": "top_k", "fraction": 1.0}},
}


@pytest.mark.parametrize("method", ["fedper", "ucfl", "fedprox"])
def test_levers_that_change_nothing_give_todays_trace_exactly(method):
    algorithms = [{"name": method, "label": "today"}] + [
        {"name": method, "label": label, "training": training} for label, training in UNCHANGED.items()
    ]
    trace = simulate(parse_scenario({**SCENARIO, "algorithms": algorithms})).trace
    today = curve_frame(trace, "today")
    for label in UNCHANGED:
        pd.testing.assert_frame_equal(curve_frame(trace, label), today, check_exact=True)


def test_fedper_compresses_its_body_and_pays_for_the_body_alone():
    """The upload is the body's update: qsgd at 4 bits sends 4·d_B + 32 bits, payload (4·d_B + 32) / (32·d)."""
    algorithms = [
        {"name": "fedper", "label": "plain"},
        {"name": "fedper", "label": "q4", "training": {"compression": {"method": "qsgd", "bits": 4}}},
        {"name": "fedper", "label": "top", "training": {"compression": {"method": "top_k", "fraction": 0.1}, "scheduling": {"policy": "importance", "k": 3}}},
    ]
    trace = simulate(parse_scenario({**SCENARIO, "algorithms": algorithms})).trace
    plain, rounds = curve_frame(trace, "plain"), slice(1, None)
    d = 64 * 200 + 200 + 200 * 10 + 10  # the digits MLP: 64 inputs, one hidden layer of 200, 10 classes
    d_body = 64 * 200 + 200
    assert plain["ul_bits"].iloc[1] == pytest.approx(6 * 32 * d_body, rel=1e-12)
    q4, top = curve_frame(trace, "q4"), curve_frame(trace, "top")
    np.testing.assert_allclose(q4["ul_bits"].iloc[rounds], 6 * (4 * d_body + 32), rtol=1e-12)
    np.testing.assert_allclose(q4["ul_payload"].iloc[rounds], 6 * (4 * d_body + 32) / (32 * d), rtol=1e-12)
    np.testing.assert_allclose(top["ul_bits"].iloc[rounds], 3 * Compression("top_k", fraction=0.1).payload_bits(d_body), rtol=1e-12)
    assert (top["participants"].iloc[rounds] == 3).all()
    assert (q4["round_time"].iloc[rounds] < plain["round_time"].iloc[rounds]).all()
    assert not np.array_equal(q4["mean_loss"].to_numpy(), plain["mean_loss"].to_numpy())


def test_ucfl_asks_everybody_in_its_weight_round_and_schedules_and_compresses_its_model_rounds():
    algorithms = [{"name": "ucfl", "params": {"streams": 2}, "training": {
        "scheduling": {"policy": "random", "k": 2}, "compression": {"method": "qsgd", "bits": 8},
    }}]
    trace = curve_frame(simulate(parse_scenario({**SCENARIO, "algorithms": algorithms})).trace, "ucfl")
    d = 64 * 200 + 200 + 200 * 10 + 10
    assert trace["participants"].tolist()[1:] == [6, 2, 2]
    assert trace["ul_payload"].iloc[1] == 6.0  # the gradients at theta-hat, uncompressed
    np.testing.assert_allclose(trace["ul_payload"].iloc[2:], 2 * (8 * d + 32) / (32 * d), rtol=1e-12)


def test_ucfl_estimation_clients_scheduled_asks_only_the_scheduled_clients_in_its_weight_round():
    """``estimation_clients: scheduled``: the weight round asks the k scheduled clients (a gradient each, payload 2)."""
    algorithms = [{"name": "ucfl", "params": {"streams": 2, "estimation_clients": "scheduled"},
                   "training": {"scheduling": {"policy": "random", "k": 2}}}]
    trace = curve_frame(simulate(parse_scenario({**SCENARIO, "algorithms": algorithms})).trace, "ucfl")
    assert trace["participants"].tolist()[1:] == [2, 2, 2]
    assert trace["ul_payload"].iloc[1] == 2.0


def test_fedpers_lever_state_survives_a_checkpoint_and_resume_byte_for_byte(tmp_path):
    """The body's error-feedback residual ``[m, d_B]`` and the importance scheduler's norms are checkpointed."""
    doc = {**SCENARIO, "rounds": 4, "checkpoint_every": 1, "algorithms": [{"name": "fedper", "training": {
        "compression": {"method": "top_k", "fraction": 0.05}, "scheduling": {"policy": "importance", "k": 4},
    }}]}
    scenario = parse_scenario(doc)
    whole = simulate(scenario, run_dir=tmp_path / "whole", keep_models=True)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir=tmp_path / "cut", keep_models=True, stop_after_rounds=3)
    resumed = simulate(scenario, run_dir=tmp_path / "cut")
    pd.testing.assert_frame_equal(resumed.trace, whole.trace, check_exact=True)
    ours, theirs = _lever_state(tmp_path / "cut", scenario), _lever_state(tmp_path / "whole", scenario)
    assert tuple(theirs["compressor"]["residual"].shape) == (6, 64 * 200 + 200)
    assert np.isfinite(np.asarray(theirs["scheduler"]["norms"])).all()  # by round 4 every client has been heard
    for lever, name in (("compressor", "residual"), ("scheduler", "norms"), ("scheduler", "last_upload")):
        assert np.asarray(ours[lever][name]).tobytes() == np.asarray(theirs[lever][name]).tobytes()


def _lever_state(run_dir, scenario):
    (curve,) = curves_of(scenario)
    (path,) = (run_dir / "checkpoints").glob("seed0__fedper*.done.safetensors")
    state = load_checkpoint(path, CHECKPOINT_TYPES, (unit_fingerprint(scenario, curve, 0),), PROVENANCE)
    return state["algorithm"]


TRACE_FILES = ("trace.csv", "clients.csv", "client_rounds.parquet", "diagnostics.json")


@pytest.mark.parametrize(("method", "params", "policy"), [
    ("fedper", {}, "importance"),
    pytest.param("fedper", {}, "age", marks=pytest.mark.slow),
    pytest.param("ucfl", {"streams": 2}, "importance", marks=pytest.mark.slow),
    ("ucfl", {"streams": 2}, "age"),
])
def test_a_run_interrupted_with_lever_state_resumes_with_the_cli_to_the_same_files(tmp_path, method, params, policy):
    """Interrupted after round 2 (the scheduler's state and the top-k residuals nonzero in the partial checkpoint),
    ``wirelessfl simulate --resume`` writes the trace and client tables of an uninterrupted run byte for byte."""
    from typer.testing import CliRunner

    from wirelessfl.cli import app
    from wirelessfl.config import dump_scenario
    from wirelessfl.results.run_outputs import write_run_outputs

    doc = {**SCENARIO, "rounds": 4, "checkpoint_every": 1, "algorithms": [{"name": method, "params": params, "training": {
        "compression": {"method": "top_k", "fraction": 0.05}, "scheduling": {"policy": policy, "k": 3},
    }}]}
    scenario = parse_scenario(doc)
    (tmp_path / "whole").mkdir()
    write_run_outputs(tmp_path / "whole", scenario, simulate(scenario), 0.0, figures="none")  # uninterrupted
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "scenario.yaml").write_text(dump_scenario(scenario))
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, cut, stop_after_rounds=3)
    (partial,) = (cut / "checkpoints").glob(f"seed0__{method}*.partial.safetensors")
    (curve,) = curves_of(scenario)
    state = load_checkpoint(partial, CHECKPOINT_TYPES, (unit_fingerprint(scenario, curve, 0),), PROVENANCE)
    assert state["records"][-1].round == 2
    algorithm = state["algorithm"]
    assert float(algorithm["compressor"]["residual"].abs().sum()) > 0
    assert np.asarray(algorithm["scheduler"]["last_upload"]).max() >= 1
    resumed = CliRunner().invoke(app, ["simulate", "--resume", str(cut), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    written = [name for name in TRACE_FILES if (tmp_path / "whole" / name).is_file()]
    assert "trace.csv" in written and written == [name for name in TRACE_FILES if (cut / name).is_file()]
    for name in written:
        assert (cut / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
