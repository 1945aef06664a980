"""Trace guard: small runs write the very bytes they wrote before the run package was split out of simulate.py.

The golden hashes in ``tests/data/golden/hashes.json`` were recorded from the
unmodified code (main at 95511f8) on the development machine: x86-64 Linux,
2 CPU cores, torch on CPU, the project's locked venv; re-recorded once when two
outputs changed on purpose (streams_link.csv gives Mbit/s and the link model:
every other file kept its hash; scenario.yaml, which now writes every default,
is checked by the fingerprint its checkpoints carry) on the same machine. Floats in the tables
depend on the CPU and the library builds (docs/results.md "Reproducibility"),
so on another machine re-record them from a commit known to be right:
``python tests/test_golden_outputs.py``.

The runs cover the paths the round loop takes: the quickstart (train once,
replay through three analytic profiles), a physical cell (uma-cell), a
follower riding with its trainer under a deadline (training per profile,
checkpoints every round, an interruption and its resumption), a battery budget
(the energy ledger decides who arrives), and a run extended from 2 to 3 rounds.
Only deterministic files are hashed: not ``runtime.json``, ``summary.md``
(wall times) nor ``checkpoints/`` (wall times inside).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
HASHES = GOLDEN / "hashes.json"
DETERMINISTIC = (
    "trace.csv", "clients.csv", "client_rounds.parquet", "diagnostics.json", "provenance.json",
    "streams_link.csv",
)  # fmt: skip
#: scenario.yaml writes every field with its default, so it grows with the schema; what must not change is the
#: fingerprint its checkpoints are stamped with (``config.canonical``), recorded in its place.
FINGERPRINT = "scenario fingerprint"
RUNS = {
    "quickstart": (ROOT / "scenarios" / "quickstart.yaml", {"rounds": 2, "seeds": [0]}),
    "uma-cell": (ROOT / "scenarios" / "uma-cell.yaml", {"rounds": 2, "seeds": [0]}),
    "followers-deadline": (GOLDEN / "followers-deadline.yaml", {}),
    "battery-budget": (GOLDEN / "battery-budget.yaml", {}),
}


def _hashes(run_dir: Path) -> dict[str, str]:
    from wirelessfl.config import load_scenario, scenario_fingerprint

    found = {
        name: hashlib.sha256((run_dir / name).read_bytes()).hexdigest()
        for name in DETERMINISTIC
        if (run_dir / name).is_file()
    }
    found[FINGERPRINT] = scenario_fingerprint(load_scenario(run_dir / "scenario.yaml"))
    return found


def _write(run_dir: Path, scenario, result) -> dict[str, str]:
    from wirelessfl.config import dump_scenario
    from wirelessfl.results.io import atomic_write_text
    from wirelessfl.results.run_outputs import write_run_outputs

    atomic_write_text(run_dir / "scenario.yaml", dump_scenario(scenario))
    write_run_outputs(run_dir, scenario, result, 0.0, figures="none")
    return _hashes(run_dir)


def run(name: str, run_dir: Path) -> dict[str, str]:
    """The hashes of the deterministic files ``name``'s run writes into ``run_dir``."""
    from wirelessfl.config import load_scenario
    from wirelessfl.simulate import simulate

    path, overrides = RUNS[name]
    scenario = load_scenario(path, overrides)
    return _write(run_dir, scenario, simulate(scenario, run_dir, device="cpu"))


def run_interrupted(run_dir: Path) -> dict[str, str]:
    """followers-deadline stopped after 4 trained rounds, then resumed from its checkpoints."""
    from wirelessfl.config import load_scenario
    from wirelessfl.simulate import simulate

    scenario = load_scenario(GOLDEN / "followers-deadline.yaml")
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir, device="cpu", stop_after_rounds=4)
    return _write(run_dir, scenario, simulate(scenario, run_dir, device="cpu"))


def run_extended(run_dir: Path) -> dict[str, str]:
    """followers-deadline run for 2 rounds keeping its models, then extended to its 3 rounds."""
    from wirelessfl.config import dump_scenario, load_scenario
    from wirelessfl.results.io import atomic_write_text
    from wirelessfl.run.extend import extend_run
    from wirelessfl.simulate import simulate

    shorter = load_scenario(GOLDEN / "followers-deadline.yaml", {"rounds": 2})
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "scenario.yaml", dump_scenario(shorter))
    simulate(shorter, run_dir, device="cpu", keep_models=True)
    longer = extend_run(run_dir, 3)
    return _write(run_dir, longer, simulate(longer, run_dir, device="cpu", keep_models=True))


def record_all(work: Path) -> dict[str, dict[str, str]]:
    found = {name: run(name, work / name) for name in RUNS}
    found["followers-deadline extended"] = run_extended(work / "extended")
    return found


@pytest.fixture(scope="module")
def golden() -> dict[str, dict[str, str]]:
    return json.loads(HASHES.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_run_writes_its_golden_bytes(name, golden, tmp_path):
    assert run(name, tmp_path) == golden[name]


def test_an_interrupted_run_resumes_to_the_golden_bytes(golden, tmp_path):
    assert run_interrupted(tmp_path) == golden["followers-deadline"]


def test_an_extended_run_writes_its_golden_bytes(golden, tmp_path):
    assert run_extended(tmp_path) == golden["followers-deadline extended"]


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as work:
        recorded = record_all(Path(work))
    HASHES.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {HASHES}")
