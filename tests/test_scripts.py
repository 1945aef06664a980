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
    assert {n for n in names if not n.startswith("bench_")} <= {"profile_step.py", "profile_cuda.py", "as_avx2.py"}


def test_channel_aware_pairs_by_hand():
    """Two seeds of one cell: channel-aware rounds take 2 s and 3 s against 4 s and 4 s data-only (ratios
    0.5, 0.75: mean 0.625 with a t interval of half-width 12.706·0.125), target reached at 4 s vs 8 s."""
    import pandas as pd

    spec = importlib.util.spec_from_file_location("channel_aware_nr", ROOT / "scripts" / "channel_aware_nr.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for seed, aware_round in ((0, 2.0), (1, 3.0)):
        for variant, step in (("channel_tiers=1", 4.0), ("channel_tiers=2", aware_round)):
            for r, acc in ((0, 0.1), (1, 0.5), (2, 0.8)):
                rows.append({"profile": "cell", "seed": seed, "variant": variant, "round": r, "time": r * step,
                             "round_time": step if r else 0.0, "avg_acc": acc})
    pairs = module.paired(pd.DataFrame(rows), target=0.7)
    assert pairs["round_time_ratio"].tolist() == [0.5, 0.75]
    assert pairs["time_to_target_ratio"].tolist() == [0.5, 0.75]
    (summary,) = module.summarise(pairs).to_dict("records")
    mean, low, high = summary["round_time_ratio"]
    assert mean == 0.625 and high - mean == pytest.approx(12.7062047 * 0.125, rel=1e-6)
    assert "| cell | 2 | 4 | 0.625 [" in module.markdown(module.summarise(pairs))
