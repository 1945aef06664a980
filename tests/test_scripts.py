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


def test_channel_aware_pairs_multicast_policies_and_counts_who_was_left_out():
    """One curve, cell c, two seeds: coverage rounds take 2 s and 3 s against 4 s worst-user (ratios 0.5, 0.75);
    18 of 20 users scheduled every round (0.1 not scheduled); seed 0 aggregates 9 of 18, seed 1 18 of 18 under
    worst-user (not aggregated 0.5 and 0: mean 0.25)."""
    import pandas as pd

    spec = importlib.util.spec_from_file_location("channel_aware_nr", ROOT / "scripts" / "channel_aware_nr.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for seed, cover_round, arrived in ((0, 2.0, 9), (1, 3.0, 18)):
        for profile, step in (("c-worst", 4.0), ("c-cover", cover_round)):
            for r, acc in ((0, 0.1), (1, 0.5), (2, 0.8)):
                rows.append({"curve": "u", "variant": "", "profile": profile, "seed": seed, "round": r, "time": r * step,
                             "round_time": step if r else 0.0, "avg_acc": acc, "participants": 18 if r else 0,
                             "aggregated": (arrived if profile == "c-worst" else 18) if r else 0})
    trace = pd.DataFrame(rows)
    pairs = module.paired_policies(trace, 0.7, "worst", "cover")
    assert pairs["profile"].tolist() == ["u, c", "u, c"]
    assert pairs["round_time_ratio"].tolist() == [0.5, 0.75]
    assert pairs["time_to_target_ratio"].tolist() == [0.5, 0.75]
    assert pairs["final_accuracy_points"].tolist() == [0.0, 0.0]
    shares = module.left_out(trace, clients=20).set_index("profile")
    assert shares.loc["c-worst", "not scheduled"][0] == pytest.approx(0.1)
    assert shares.loc["c-worst", "not aggregated"][0] == pytest.approx(0.25)
    assert shares.loc["c-cover", "not aggregated"][0] == 0.0


def test_deadline_rule_user_round_times_by_hand():
    """Streams end at 1 s and 3 s (participant 0 in the first, 1 and 2 in the second), compute 0.4 s, uploads
    alone 0.1, 0.2, 0.3 s shared by 3: 1 + 0.4 + 0.3, 3 + 0.4 + 0.6, 3 + 0.4 + 0.9."""
    import numpy as np

    spec = importlib.util.spec_from_file_location("deadline_rule", ROOT / "scripts" / "deadline_rule.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    times = module.user_round_times(np.array([1.0, 3.0]), (np.array([0]), np.array([1, 2])), np.array([0.1, 0.2, 0.3]), 0.4)
    np.testing.assert_allclose(times, [1.7, 4.0, 4.3], rtol=1e-12)


def test_paired_gaps_pair_curves_of_two_runs_by_seed(tmp_path):
    """Run 1 holds curve a, run 2 curve b, seeds 0-2; each seed's last-2-round mean: a 80, 82, 84; b 70, 71, 72.
    a - b per seed 10, 11, 12: mean 11, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.303 / 1.732 = 2.48."""
    import pandas as pd

    from wirelessfl.results.io import TRACE_COLUMNS, write_trace

    spec = importlib.util.spec_from_file_location("paired_gaps", ROOT / "scripts" / "paired_gaps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dirs = []
    for name, curve, finals, scenario in (("one", "a", (0.80, 0.82, 0.84), "s"), ("two", "b", (0.70, 0.71, 0.72), "s"),
                                          ("other", "c", (0.5, 0.5, 0.5), "t")):  # fmt: skip
        rows = []
        for seed, final in enumerate(finals):
            for r, acc in ((1, 0.1), (2, final - 0.01), (3, final + 0.01)):  # last 2 rounds average to final
                rows.append({**dict.fromkeys(TRACE_COLUMNS, 0.0), "scenario": scenario, "algorithm": curve, "variant": "",
                             "curve": curve, "profile": "wired", "seed": seed, "round": r, "time_unit": "T_dl",
                             "avg_acc": acc})  # fmt: skip
        clients = pd.DataFrame([dict(scenario=scenario, algorithm=curve, variant="", curve=curve, profile="wired", seed=0,
                                     client=0, group=0, accuracy=0.5)])  # fmt: skip
        (tmp_path / name).mkdir()
        write_trace(tmp_path / name, pd.DataFrame(rows), clients)
        dirs.append(tmp_path / name)
    values = module.per_seed(dirs[:2], last=2, column="avg_acc")
    line = module.gap_line(values, "a", "b")
    assert line.startswith("a - b: +11.00 points, ± 2.48 (seed 0: +10.00, seed 1: +11.00, seed 2: +12.00)")
    assert module.gap_line(values.loc[[0]], "a", "b") == "a - b: +10.00 points, no interval with one seed (seed 0: +10.00)"
    with pytest.raises(SystemExit, match="different scenarios"):
        module.per_seed(dirs, last=2, column="avg_acc")


def test_personal_vs_global_reads_the_trace_s_models_and_sees_no_gap_where_there_is_none(tmp_path):
    """The clients' models score what the trace's last round says; APFL with alpha 0 mixes nothing personal in, so
    its clients' models are the global one exactly; pFedMe's are not."""
    import numpy as np

    from wirelessfl.config import parse_scenario
    from wirelessfl.simulate import simulate

    spec = importlib.util.spec_from_file_location("simulated_scenarios", ROOT / "tests" / "algorithms" / "simulated.py")
    simulated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(simulated)
    spec = importlib.util.spec_from_file_location("personal_vs_global", ROOT / "scripts" / "personal_vs_global.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw = simulated.scenario([{"name": "apfl", "params": {"alpha": 0.0}}, {"name": "pfedme", "params": {"inner_steps": 2}}])
    result = simulate(parse_scenario(raw), tmp_path / "run", keep_models=True)
    for curve in ("apfl", "pfedme"):
        measured = module.measure(parse_scenario(raw), 0, curve, tmp_path / "run" / "checkpoints" / f"seed0__{curve}.done.safetensors")
        last = result.trace[(result.trace["curve"] == curve) & (result.trace["round"] == raw["rounds"])].iloc[0]
        assert measured["round"][0] == raw["rounds"]
        assert np.isclose(measured["clients' models on test"][0], 100 * last["avg_acc"], rtol=0, atol=1e-9)
        same = measured["clients' models on test"] == measured["global model on test"]
        assert same == (curve == "apfl") and (measured["clients' models on train"] == measured["global model on train"]) == same
    lean = tmp_path / "lean"
    simulate(parse_scenario(raw), lean)
    with pytest.raises(SystemExit, match=r"no models in it; re-run the scenario with `wirelessfl simulate --keep-models`$"):
        module.measure(parse_scenario(raw), 0, "apfl", lean / "checkpoints" / "seed0__apfl.done.safetensors")
