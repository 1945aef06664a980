"""The cost preview's note when a physical profile's round is mostly the default compute floor t_min = 1 s
(wirelessfl/network/compute_floor.py): printed by validate and simulate, never a change to any trace."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app
from wirelessfl.config import parse_scenario
from wirelessfl.cost import compute_floor_notes
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.compute_floor import compute_floor_note, compute_floor_share
from wirelessfl.seam import CommPlan

MLP_PARAMS = 4810  # mlp with hidden [64] on 8x8 digits: 64*64+64 + 64*10+10

SCENARIO = {
    "name": "floor", "rounds": 1, "device": "cpu",
    "data": {"dataset": "digits", "clients": 10, "samples": {"per_client": 30}},
    "model": {"name": "mlp", "options": {"hidden": [64]}}, "algorithms": [{"name": "fedavg"}],
    "networks": [
        {"name": "cell", "physical": {"bandwidth_hz": 20.0e6}},
        {"name": "cell-fast-devices", "t_min": 0.01, "physical": {"bandwidth_hz": 20.0e6}},
        {"preset": "wired"},
        {"name": "narrowband", "physical": {"bandwidth_hz": 1.0e5}},
    ],
}  # fmt: skip


def test_the_share_is_what_the_round_loses_without_compute_time():
    profile = SystemProfile.from_dict({"name": "cell", "physical": {"bandwidth_hz": 20.0e6}})
    round_s, share = compute_floor_share(profile, 10, MLP_PARAMS)
    plan = CommPlan.broadcast(range(10), model_params=MLP_PARAMS)
    free = dataclasses.replace(profile, t_min=0.0, mu=math.inf)
    transfers = NetworkModel(free, 10, np.random.default_rng(0)).time_round(plan, np.random.default_rng(1)).t_end
    assert round_s == pytest.approx(1.0 + transfers, rel=1e-12)  # phased, mu = inf: compute is exactly t_min = 1 s
    assert share == pytest.approx(1.0 - transfers / round_s, rel=1e-12) and share > 0.9


def test_only_a_physical_profile_with_t_min_left_out_and_dominant_gets_a_note():
    scenario = parse_scenario(SCENARIO)
    notes = compute_floor_notes(scenario, 10, MLP_PARAMS)
    assert notes == (
        "networks[0] (cell): the compute floor t_min = 1 s (not set in this entry; seconds in physical mode) is 94% of "
        "a FedAvg round of 1.06 s, so round times differ little between methods; set t_min to your devices' compute "
        "time per round (docs/scenario-reference.md, Networks)",
    )
    narrowband = scenario.profiles()[3]
    assert compute_floor_share(narrowband, 10, MLP_PARAMS)[1] < 0.5  # transfers dominate: no note
    given = {"name": "cell", "t_min": 1.0, "physical": {"bandwidth_hz": 20.0e6}}
    assert compute_floor_note(0, given, SystemProfile.from_dict(given), 10, MLP_PARAMS) is None  # set on purpose


def test_validate_prints_the_note_after_the_cost_line(tmp_path):
    path = tmp_path / "floor.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    result = CliRunner().invoke(app, ["validate", str(path), "--build"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[1].startswith("estimated memory for the run ")
    assert lines[2:] == [
        "note: networks[0] (cell): the compute floor t_min = 1 s (not set in this entry; seconds in physical mode) is "
        "94% of a FedAvg round of 1.06 s, so round times differ little between methods; set t_min to your devices' "
        "compute time per round (docs/scenario-reference.md, Networks)"
    ]


def test_only_the_preview_computes_the_notes():
    """A sweep checks each unit with ``probe=False``: no note is worked out there (it would be printed nowhere)."""
    from wirelessfl.cost import check_run

    assert check_run(parse_scenario(SCENARIO), probe=False).notes == ()
