"""Bad lever fields through the command line: one line naming the field and what is allowed, exit 2, nothing written."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.cli import app

runner = CliRunner()

SCENARIO = {
    "name": "levers",
    "rounds": 1,
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 30}},
    "model": {"name": "mlp"},
    "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}],
}


@pytest.mark.parametrize(("training", "algorithm", "line"), [
    ({"scheduling": {"policy": "random", "k": 5}}, "fedavg",
     "training.scheduling.k: 5 is more than the clients (data.clients = 4); at most 4"),
    ({"compression": {"method": "qsgd", "bits": 33}}, "fedavg",
     "training.compression.bits: must be from 1 to 32 bits per value, got 33"),
    ({"compression": {"method": "top_k", "fraction": 0.1}}, "local",
     "algorithms[0]: local: training.compression does not apply to local; it applies to fedavg, fedavg_ft, fedper, fedprox, oracle, ucfl"),
])
def test_a_bad_lever_is_one_line_exit_2_and_writes_nothing(tmp_path, training, algorithm, line):
    source = tmp_path / "levers.yaml"
    source.write_text(yaml.safe_dump({**SCENARIO, "training": training, "algorithms": [{"name": algorithm}]}))
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(source), "--out", str(out), "--quiet"])
    assert result.exit_code == 2 and not out.exists()
    assert result.output.strip().splitlines() == [f"error: {source}: {line}"]
