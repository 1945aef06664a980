"""The analysis scripts in scripts/ still import (a moved module breaks them without any other test noticing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
assert SCRIPTS, "scripts/ holds no script"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_imports_and_has_a_main(path):
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.main)


def test_benchmarks_measure_speed_only():
    """benchmarks/ holds timing scripts (bench_*) and the profiler tools the engine notes quote, no analysis."""
    names = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert {n for n in names if not n.startswith("bench_")} <= {"profile_step.py", "as_avx2.py"}
