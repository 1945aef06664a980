"""docs/outputs.md names every file a run writes and every column of its tables: a small run with a
physical profile (so streams_link.csv is written) and eval_train (so fit_acc is) is checked against it."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from wirelessfl.config import parse_scenario
from wirelessfl.results.run_outputs import write_run_outputs
from wirelessfl.simulate import simulate

PAGE = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"

SCENARIO = {
    "name": "outputs", "rounds": 1, "device": "cpu", "eval_train": True,
    "data": {"dataset": "digits", "clients": 4, "samples": {"per_client": 30}, "partition": [{"name": "iid"}]},
    "model": {"name": "mlp", "options": {"hidden": [8]}}, "algorithms": [{"name": "fedavg"}],
    "networks": [{"preset": "wired"}, {"name": "cell", "t_min": 0.05, "physical": {}}],
}  # fmt: skip


def _named(text: str) -> set[str]:
    """Every name the page writes in backticks, split at commas (``a, b`` names a and b)."""
    names = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        names.update(part.strip() for part in quoted.split(","))
    return names


def test_every_file_and_column_of_a_run_is_on_the_outputs_page(tmp_path):
    scenario = parse_scenario(SCENARIO)
    write_run_outputs(tmp_path, scenario, simulate(scenario), 1.0, figures="png")
    text = PAGE.read_text(encoding="utf-8")
    named = _named(text)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "streams_link.csv" in files and "trace.csv" in files
    undocumented = [name for name in files if name not in text]
    assert undocumented == []
    for table in ("trace.csv", "clients.csv", "streams_link.csv", "client_rounds.parquet"):
        path = tmp_path / table
        columns = pd.read_parquet(path).columns if table.endswith(".parquet") else pd.read_csv(path, nrows=0).columns
        assert [c for c in columns if c not in named] == [], table
