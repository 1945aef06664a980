"""One writer for a run directory: the CLI, the Python API and sweep units get the same files and summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

import wirelessfl
from wirelessfl.config import parse_scenario
from wirelessfl.results.io import atomic_write_json
from wirelessfl.results.run_outputs import write_run_outputs
from wirelessfl.simulate import simulate
from wirelessfl.sweep.executors import is_done

RUN = {
    "name": "streams-run",
    "rounds": 2,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 6,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp", "options": {"hidden": [16]}},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "ucfl", "params": {"streams": 2}}],
    "networks": [{"preset": "wired"}],
}


@pytest.fixture(scope="module")
def run():
    scenario = parse_scenario(RUN)
    return scenario, simulate(scenario)


@pytest.mark.parametrize(
    ("figures", "present", "absent"),
    [
        ("html", {"fig3.html", "streams.html"}, {"fig3.png"}),
        ("none", set(), {"fig3.html", "streams.html", "plotly.min.js"}),
    ],
)
def test_every_run_directory_gets_diagnostics_runtime_streams_section_and_trace(tmp_path, run, figures, present, absent):
    scenario, result = run
    write_run_outputs(tmp_path, scenario, result, 1.5, figures=figures, notes=["first note."])
    names = {p.name for p in tmp_path.iterdir()}
    assert {"diagnostics.json", "runtime.json", "summary.md", "trace.parquet", "clients.parquet"} | present <= names
    assert not absent & names
    assert is_done(tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    assert "## Streams and clusters" in summary and "| ucfl | 0 | 1 | 2 |" in summary
    assert summary.index("- first note.") < summary.index("- diagnostics.json:")
    assert "2 training runs (trained once per curve and seed, replayed through every profile); wall time 1.5 s." in summary
    assert set(json.loads((tmp_path / "runtime.json").read_text())) == set(result.runtime)


def test_bad_figures_value_is_one_line(tmp_path, run):
    scenario, result = run
    with pytest.raises(ValueError, match=r"^figures must be one of png, html, none, got 'pdf'$"):
        write_run_outputs(tmp_path, scenario, result, 1.0, figures="pdf")
    assert not any(tmp_path.iterdir())


def test_python_api_and_sweep_units_write_the_streams_too(tmp_path):
    api = wirelessfl.simulate(RUN, out=tmp_path / "api")
    assert "## Streams and clusters" in (api.dir / "summary.md").read_text()
    assert (api.dir / "diagnostics.json").is_file() and (api.dir / "streams.html").is_file()
    swept = wirelessfl.sweep(RUN, {"rho": [1, 4]}, out=tmp_path / "sweep")
    (unit,) = (swept.dir / "units").iterdir()
    assert "## Streams and clusters" in (unit / "summary.md").read_text()
    assert not (unit / "streams.html").exists()


def test_json_writer_reads_back_plain_values(tmp_path):
    back = atomic_write_json(tmp_path / "d.json", {"a": np.float32(0.5), "b": np.arange(2), "c": (1, 2), "d": {3}})
    assert back == {"a": 0.5, "b": [0, 1], "c": [1, 2], "d": [3]}
    assert json.loads((tmp_path / "d.json").read_text()) == back
