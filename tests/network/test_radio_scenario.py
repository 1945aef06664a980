"""The realistic cell's opt-in fields from a scenario YAML to a timed round: ``scenarios/nr-multicell.yaml`` with
faded interference and EESM parses, validates on the command line and times a round; bad values are one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.network import NetworkModel, nr
from wirelessfl.seam import CommPlan

pytestmark = pytest.mark.skipif(nr.find_sionna() is None, reason="sionna-no-rt is not installed (pip install -e .)")

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "nr-multicell.yaml"


def _opted_in(**physical) -> dict:
    raw = yaml.safe_load(SCENARIO.read_text())
    for network in raw["networks"]:
        network["physical"] = {**network["physical"], **physical}
    return raw


def test_nr_multicell_with_faded_interference_and_eesm_runs_from_yaml(tmp_path):
    layout = {"layout": "hexgrid", "rings": 1, "isd_m": 500, "sectors": 3, "wraparound": True, "load": 0.5,
              "users": "center", "downtilt_deg": 12, "interference": "faded"}
    raw = _opted_in(topology=layout, subband_mapping="eesm")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    scenario = parse_scenario(raw)
    for profile in scenario.profiles():
        assert profile.physical.topology.interference == "faded" and profile.physical.subband_mapping == "eesm"
        network = NetworkModel(profile, 20, np.random.default_rng(0))
        timing = network.time_round(CommPlan.broadcast(range(20), model_params=10_000), np.random.default_rng(1))
        assert math.isfinite(timing.t_end) and timing.arrived == frozenset(range(20))


def test_a_bad_mapping_in_yaml_names_the_field():
    with pytest.raises(ScenarioError, match=r"physical\.subband_mapping must be one of 'mean', 'eesm'"):
        parse_scenario(_opted_in(subband_mapping="eesm2"))
