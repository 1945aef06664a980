"""The wireless levers' fields as sweep axes and as tunables (docs/levers.md): a tiny sweep over one lever axis
(its lossless point equals the uncompressed curve exactly, its lossy point pays the compressed bits), the
per-entry axis keeping the block's other fields, one-line refusals, and a tuning search over a lever field."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

import wirelessfl
from wirelessfl.algorithms import get_algorithm
from wirelessfl.algorithms.search_space import tunables
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.sweep import plan_sweep
from wirelessfl.sweep.grid import SweepError
from wirelessfl.tune.study import check_tunable, endpoint_scenario, targets, trial_scenario
from wirelessfl.tune.space import split_trial

CLIENTS, HIDDEN = 4, 16
TINY = {
    "name": "lever-axes",
    "rounds": 3,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": CLIENTS, "samples": {"per_client": 40}},
    "model": {"name": "mlp", "options": {"hidden": [HIDDEN]}},
    "training": {"batch_size": 8, "lr": 0.05},
    "algorithms": [
        {"name": "fedavg"},
        {"name": "fedavg", "label": "fedavg-q", "training": {"compression": {"method": "qsgd", "bits": 8}}},
    ],
    "networks": [{"preset": "wired"}],
}
D = 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10  # the MLP's parameters
AXIS = "algorithms.fedavg-q.training.compression.bits"


def test_a_tiny_sweep_over_one_lever_axis(tmp_path):
    swept = wirelessfl.sweep(TINY, {AXIS: [4, 32]}, out=tmp_path / "sw", executor="local")
    assert set(swept.table.status) == {"ok"} and sorted(swept.table[AXIS].unique()) == [4, 32]
    columns = ["round", "avg_acc", "worst_acc", "mean_loss", "time", "ul_bits", "aggregated"]
    trace = swept.trace.sort_values(["point", "curve", "round"])
    lossless = trace[trace["point"] == f"{AXIS}=32"]
    plain = lossless[lossless.curve == "fedavg"][columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(lossless[lossless.curve == "fedavg-q"][columns].reset_index(drop=True), plain, check_exact=True)
    four = trace[(trace["point"] == f"{AXIS}=4") & (trace.curve == "fedavg-q")]
    assert four["ul_bits"].iloc[1:].tolist() == pytest.approx([CLIENTS * (4 * D + 32)] * 3, rel=1e-12)
    assert plain["ul_bits"].iloc[1] == pytest.approx(CLIENTS * 32 * D, rel=1e-12)


def test_a_per_entry_lever_axis_keeps_the_blocks_other_fields():
    doc = {**TINY, "training": {**TINY["training"], "scheduling": {"policy": "random", "k": 3}}}
    plan = plan_sweep(parse_scenario(doc), {"algorithms.fedavg.training.scheduling.k": [1, 2]})
    assert [u.label for u in plan.units] == ["algorithms.fedavg.training.scheduling.k=1", "algorithms.fedavg.training.scheduling.k=2"]
    first = plan.units[0].scenario
    # both entries are named fedavg: each gets the scenario's block with k set, and fedavg-q keeps its compression
    assert first.algorithms[0].training == {"scheduling": {"policy": "random", "k": 1}}
    assert first.algorithms[1].training == {"compression": {"method": "qsgd", "bits": 8}, "scheduling": {"policy": "random", "k": 1}}
    assert first.training.scheduling.k == 3
    plan = plan_sweep(parse_scenario(doc), {"training.scheduling.k": [2, 4]})
    assert [u.scenario.training.scheduling.k for u in plan.units] == [2, 4]


@pytest.mark.parametrize(("grid", "message"), [
    ({"training.compression.bits": [2, 8]},
     "--grid training.compression.bits: training.compression is not set, so its bits cannot be swept; "
     "set training.compression in the scenario (docs/levers.md)"),
    ({"algorithms.fedavg.training.scheduling.k": [2]},
     "--grid algorithms.fedavg.training.scheduling.k: algorithms[0].training.scheduling is not set, so its k cannot be swept; "
     "set algorithms[0].training.scheduling in the scenario (docs/levers.md)"),
    ({AXIS: [1]}, "--grid algorithms.fedavg-q.training.compression.bits=1: algorithms[1].training.compression.bits: "
                  "qsgd needs 2 to 32 bits per value (one is the sign), got 1; one bit per value is method: sign"),
    ({"algorithms.nobody.training.compression.bits": [2]},
     "--grid algorithms.nobody.training.compression.bits: no algorithm entry named 'nobody' (by label or name); entries: fedavg, fedavg-q"),
])
def test_a_bad_lever_axis_is_one_line(grid, message):
    with pytest.raises(SweepError) as err:
        plan_sweep(parse_scenario(TINY), grid)
    assert str(err.value) == message


def test_lever_fields_are_tunables_of_the_methods_they_apply_to():
    assert {"training.scheduling.k", "training.compression.bits", "training.compression.fraction",
            "training.aggregation.truncation_db"} <= set(tunables(get_algorithm("fedavg")))
    assert "training.aggregation.truncation_db" not in tunables(get_algorithm("fedper"))
    assert not any(name.count(".") == 2 for name in tunables(get_algorithm("local")))
    assert split_trial({"training.compression.bits": 3, "training.lr": 0.1, "mu": 1}) == (
        {"mu": 1}, {"compression": {"bits": 3}, "lr": 0.1}
    )


def test_a_trial_varies_the_lever_field_inside_the_block_the_curve_runs_with():
    doc = {**TINY, "algorithms": [TINY["algorithms"][0]],
           "training": {**TINY["training"], "scheduling": {"policy": "random", "k": 2}},
           "tune": {"trials": 2, "algorithms": {"fedavg": {"training.scheduling.k": {"low": 1, "high": CLIENTS}}}}}
    scenario = parse_scenario(doc)
    check_tunable(scenario)
    (target,) = targets(scenario)
    assert target.training == {"scheduling": {"policy": "random", "k": 2}}
    trial = trial_scenario(scenario, target, {"training.scheduling.k": 3, "training.lr": 0.01})
    assert trial.algorithms[0].training == {"scheduling": {"policy": "random", "k": 3}, "lr": 0.01}
    assert [a.training["scheduling"]["k"] for a in endpoint_scenario(scenario).algorithms] == [1, CLIENTS]


def test_an_async_buffer_and_its_staleness_decay_are_tunables_searched_inside_the_async_block():
    assert {"training.aggregation.buffer", "training.aggregation.a", "training.aggregation.alpha"} <= set(tunables(get_algorithm("fedavg")))
    block = {"mode": "async", "buffer": 2, "staleness": "polynomial", "a": 0.5}
    doc = {**TINY, "algorithms": [TINY["algorithms"][0]], "training": {**TINY["training"], "aggregation": block},
           "tune": {"trials": 2, "algorithms": {"fedavg": {"training.aggregation.buffer": {"low": 1, "high": CLIENTS},
                                                           "training.aggregation.a": {"low": 0.1, "high": 2.0}}}}}
    scenario = parse_scenario(doc)
    check_tunable(scenario)
    (target,) = targets(scenario)
    trial = trial_scenario(scenario, target, {"training.aggregation.buffer": 3, "training.aggregation.a": 1.5})
    searched = trial.algorithms[0].training["aggregation"]
    assert {key: searched[key] for key in block} == {**block, "buffer": 3, "a": 1.5}
    assert [a.training["aggregation"]["buffer"] for a in endpoint_scenario(scenario).algorithms] == [1, CLIENTS]
    too_big = {**doc, "tune": {"trials": 2, "algorithms": {"fedavg": {"training.aggregation.buffer": {"low": 1, "high": CLIENTS + 1}}}}}
    with pytest.raises(ScenarioError, match=r"^tune.algorithms.fedavg: an end of the search space of 'fedavg' is refused: "
                                            r"algorithms\[0\].training.aggregation.buffer: 5 is more than the clients"):
        endpoint_scenario(parse_scenario(too_big))


@pytest.mark.parametrize(("doc_training", "space", "message"), [
    ({}, {"training.compression.bits": {"low": 2, "high": 8}},
     "tune.algorithms.fedavg: training.compression.bits searches the compression block of 'fedavg', which has none; "
     "set training.compression (or the curve's own) in the scenario (docs/levers.md)"),
    ({"scheduling": {"policy": "random", "k": 2}}, {"training.scheduling.k": {"low": 1, "high": CLIENTS + 1}},
     "tune.algorithms.fedavg: an end of the search space of 'fedavg' is refused: algorithms[0].training.scheduling.k: 5 is more "
     "than the clients (data.clients = 4); at most 4"),
])
def test_a_lever_search_that_cannot_run_is_one_line(doc_training, space, message):
    doc = {**TINY, "algorithms": [TINY["algorithms"][0]], "training": {**TINY["training"], **doc_training},
           "tune": {"trials": 2, "algorithms": {"fedavg": space}}}
    with pytest.raises(ScenarioError) as err:
        scenario = parse_scenario(doc)
        check_tunable(scenario)
        endpoint_scenario(scenario)
    assert str(err.value) == message


def test_a_tuning_search_over_a_lever_field_runs_and_writes_it_into_the_tuned_scenario(tmp_path):
    doc = {**TINY, "algorithms": [TINY["algorithms"][1]],
           "tune": {"trials": 2, "batch": 2, "startup_trials": 2, "warmup_rounds": 1, "last_rounds": 2,
                    "algorithms": {"fedavg": {"training.compression.bits": {"choices": [2, 4]}, "training.lr": None,
                                              "training.local_epochs": None}}}}
    result = wirelessfl.tune(doc, tmp_path / "t")
    assert len(result.table) == 2 and set(result.table["param training.compression.bits"]) <= {2, 4}
    tuned = yaml.safe_load((tmp_path / "t" / "tuned.yaml").read_text())
    assert tuned["algorithms"][0]["training"]["compression"]["method"] == "qsgd"
    assert tuned["algorithms"][0]["training"]["compression"]["bits"] in (2, 4)
