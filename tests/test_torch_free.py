"""Reading a scenario loads no torch: ``wirelessfl.config``, ``validate``, ``list`` and ``--help`` answer in a
second because they read the algorithms' declarations (``wirelessfl/algorithms/specs``) and the data and model
catalogs, never the implementations. Each check runs in a fresh interpreter, whose ``sys.modules`` it reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sklearn", "scipy.stats", "scipy.integrate")


def _loaded_after(body: str) -> dict:
    """``{"heavy": [...], "out": ...}``: which of ``HEAVY`` a fresh interpreter loaded running ``body``."""
    code = f"""
import io, json, sys
from contextlib import redirect_stdout
out = io.StringIO()
with redirect_stdout(out):
{chr(10).join("    " + line for line in body.strip().splitlines())}
print(json.dumps({{"heavy": [m for m in {HEAVY!r} if m in sys.modules], "out": out.getvalue()}}))
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_reading_a_scenario_loads_no_torch():
    seen = _loaded_after("""
from wirelessfl.config import load_scenario
scenario = load_scenario("scenarios/quickstart.yaml")
print(len(scenario.profiles()))
""")
    assert seen["heavy"] == []
    assert seen["out"].strip() == "3"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["validate", "scenarios/quickstart.yaml"], "ok quickstart: digits, 20 clients, 30 rounds, 6 curves"),
        (["list"], "ucfl"),
        (["--help"], "validate"),
    ],
)
def test_the_quick_commands_load_no_torch(argv, expected):
    seen = _loaded_after(f"""
from wirelessfl.cli import app
try:
    app({argv!r})
except SystemExit as done:
    assert done.code in (0, None), done.code
""")
    assert seen["heavy"] == []
    assert expected in seen["out"]


def test_a_schema_error_loads_no_torch(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text((ROOT / "scenarios" / "quickstart.yaml").read_text().replace("temperature: 0.03", "temperature: -1"))
    seen = _loaded_after(f"""
from wirelessfl.config import ScenarioError, load_scenario
try:
    load_scenario({str(path)!r})
except ScenarioError as err:
    print(err)
""")
    assert seen["heavy"] == []
    assert seen["out"].strip() == f"{path}: algorithms[3].params.temperature: must be a positive finite number, got -1"
