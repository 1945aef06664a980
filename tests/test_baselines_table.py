"""scripts/baselines_table.py and scripts/merge_tuned.py on tiny hand-made runs: every number of the table by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import yaml

from wirelessfl.results.io import TRACE_COLUMNS, write_trace

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = {"data": {"clients": 4}, "model": {"name": "lenet5"}, "networks": [{"name": "a"}, {"name": "b"}],
            "rounds": 2, "eval_every": 1, "target_accuracy": 0.55}  # fmt: skip
# per curve: final avg acc per seed, final worst acc per seed, round-1 avg acc per seed
CURVES = {
    "fedavg": ((0.50, 0.52, 0.54), (0.30, 0.30, 0.30), (0.40, 0.40, 0.40)),
    "best": ((0.70, 0.71, 0.72), (0.50, 0.50, 0.50), (0.40, 0.40, 0.40)),
    "oracle": ((0.90, 0.90, 0.90), (0.80, 0.80, 0.80), (0.40, 0.40, 0.40)),
    "new": ((0.60, 0.62, 0.64), (0.30, 0.33, 0.36), (0.56, 0.56, 0.56)),
}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(directory: Path, curves: list[str], scenario: dict = SCENARIO, seeds=(0, 1, 2)) -> Path:
    """Rounds 0-2 on profiles a and b; round r of seed s at time (s + 1) * 10 * r on a (twice that on b) and
    cumulative energy 100 * r * (s + 1) J."""
    rows = []
    for curve in curves:
        finals, worsts, firsts = CURVES[curve]
        for profile, scale in (("a", 1), ("b", 2)):
            for seed in seeds:
                for r, acc, worst in ((0, 0.01, 0.0), (1, firsts[seed], 0.1), (2, finals[seed], worsts[seed])):
                    rows.append({**dict.fromkeys(TRACE_COLUMNS, 0.0), "scenario": "s", "algorithm": curve, "variant": "",
                                 "curve": curve, "profile": profile, "seed": seed, "round": r, "time_unit": "T_dl",
                                 "time": scale * (seed + 1) * 10.0 * r, "avg_acc": acc, "worst_acc": worst,
                                 "cum_energy_j": 100.0 * r * (seed + 1), "fit_acc": finals[seed] + 0.2})  # fmt: skip
    clients = pd.DataFrame([dict(scenario="s", algorithm=curves[0], variant="", curve=curves[0], profile="a", seed=0,
                                 client=0, group=0, accuracy=0.5)])  # fmt: skip
    directory.mkdir()
    write_trace(directory, pd.DataFrame(rows), clients)
    (directory / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return directory


def test_table_by_hand(tmp_path):
    """new - fedavg: +10 in every seed, ± 0; new - best (the oracle is left out): -10, -9, -8, mean -9, sd 1,
    oracle - fedavg 40, 38, 36: sd 2, half-width 4.97;
    half-width t(0.975, 2) / sqrt(3) = 2.48; new's worst 30, 33, 36: 33 ± 3 x 2.484 = 7.45. new reaches 55% at
    round 1 in every seed: on a at 10, 20, 30 (20 ± 24.8), energy 100, 200, 300 J (200 ± 248); fedavg in no seed
    (50, 52 and 54% < 55%). Fit = final + 20 points; 10 rounds back is before round 0: n/a."""
    module = _load("baselines_table")
    text = module.render([_run(tmp_path / "one", ["fedavg", "best", "oracle"]), _run(tmp_path / "two", ["new"])],
                         reference="fedavg", best=None, target=None)  # fmt: skip
    assert "best curve of the first run (the oracle left out): best; target 55%" in text
    assert "| new | new | 3 | 62.0 ± 5.0 | 33.0 ± 7.5 | +10.0 ± 0.0 | -9.0 ± 2.5 | 82.0 ± 5.0 | n/a |" in text
    assert "| best | committed | 3 | 71.0 ± 2.5 | 50.0 ± 0.0 | +19.0 ± 2.5 | — | 91.0 ± 2.5 | n/a |" in text
    assert "| oracle | committed | 3 | 90.0 ± 0.0 | 80.0 ± 0.0 | +38.0 ± 5.0 | +19.0 ± 2.5 |" in text
    assert "| new | 20 ± 25 (round 1) | 40 ± 50 (round 1) |" in text
    assert "| new | 200 ± 248 (round 1) | 200 ± 248 (round 1) |" in text
    assert "| fedavg | not reached (0 of 3 seeds) | not reached (0 of 3 seeds) |" in text
    assert "| new - best | -10.0, -9.0, -8.0 | -9.0 ± 2.5 |" in text


def test_a_curve_split_by_seed_over_runs_gives_the_same_table(tmp_path):
    module = _load("baselines_table")
    one = _run(tmp_path / "one", ["fedavg", "best", "oracle"])
    whole = module.render([one, _run(tmp_path / "new", ["new"])], reference="fedavg", best=None, target=None)
    split = [_run(tmp_path / f"new{s}", ["new"], seeds=(s,)) for s in (2, 0, 1)]
    assert module.render([one, *split], reference="fedavg", best=None, target=None).split("\n")[1:] == whole.split("\n")[1:]
    (tmp_path / "new3" / "checkpoints").mkdir(parents=True)  # a seed still training: left out, and said so
    text = module.render([one, *split, tmp_path / "new3"], reference="fedavg", best=None, target=None)
    assert text.split("\n")[0].endswith(f"target 55%. Still training, left out: `{tmp_path / 'new3'}`.")
    assert text.split("\n")[1:] == whole.split("\n")[1:]


def test_runs_that_do_not_pair_are_refused(tmp_path):
    module = _load("baselines_table")
    one = _run(tmp_path / "one", ["fedavg", "best"])
    other = _run(tmp_path / "two", ["new"], {**SCENARIO, "rounds": 3})
    with pytest.raises(SystemExit, match=r"two: scenario field 'rounds' differs from .*one's; its seeds do not pair$"):
        module.render([one, other], reference="fedavg", best=None, target=None)
    again = _run(tmp_path / "three", ["best"])
    with pytest.raises(SystemExit, match=r"^error: seed 0 of curve 'best' is in more than one run; rename one \(label:\)$"):
        module.render([one, again], reference="fedavg", best=None, target=None)
    with pytest.raises(SystemExit, match=r"^error: --reference fedprox: no such curve; curves: best, fedavg$"):
        module.render([one], reference="fedprox", best=None, target=None)


def test_merge_tuned_takes_each_folders_curves(tmp_path):
    module = _load("merge_tuned")
    for name, alg in (("a", {"name": "fedprox", "label": "fedprox", "params": {"mu": 0.1}}),
                      ("b", {"name": "ditto", "label": "ditto", "params": {"lambda": 1.0}})):  # fmt: skip
        (tmp_path / name).mkdir()
        (tmp_path / name / "tuned.yaml").write_text(yaml.safe_dump({"name": "x-tuned", "algorithms": [alg]}))
    out = module.merged({"name": "base", "rounds": 150, "algorithms": [{"name": "fedavg"}]}, [tmp_path / "a", tmp_path / "b"], "new")
    assert out == {"name": "new", "rounds": 150, "algorithms": [{"name": "fedprox", "label": "fedprox", "params": {"mu": 0.1}},
                                                               {"name": "ditto", "label": "ditto", "params": {"lambda": 1.0}}]}  # fmt: skip
    with pytest.raises(SystemExit, match=r"^error: curve 'fedprox' is tuned in more than one folder$"):
        module.merged({}, [tmp_path / "a", tmp_path / "a"], "new")
    (tmp_path / "c").mkdir()
    with pytest.raises(SystemExit, match=r"c: no tuned.yaml \(has its study finished\?\)$"):
        module.merged({}, [tmp_path / "c"], "new")


def test_figure_draws_the_chosen_curves(tmp_path):
    """--figure: one panel per profile, the chosen curves only, over the finished runs; bad names in one line."""
    module = _load("baselines_table")
    one, two = _run(tmp_path / "one", ["fedavg", "best", "oracle"]), _run(tmp_path / "two", ["new"])
    (tmp_path / "three" / "checkpoints").mkdir(parents=True)  # still training: left out
    html = tmp_path / "fig.html"
    module.main([str(one), str(two), str(tmp_path / "three"), "--figure", str(html), "--curves", "new,fedavg", "--out", str(tmp_path / "t.md")])
    text = html.read_text()
    assert '"name":"new"' in text and '"name":"fedavg"' in text and '"name":"best"' not in text
    assert text.count('"text":"a"') + text.count('"text":"b"') == 2  # the two profiles' panel titles
    png = tmp_path / "fig.png"
    module.main([str(one), str(two), "--figure", str(png), "--out", str(tmp_path / "t.md")])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit, match=r"^error: --curves ditto: no such curve; curves: best, fedavg, new, oracle$"):
        module.main([str(one), str(two), "--figure", str(png), "--curves", "ditto,new"])
    with pytest.raises(SystemExit, match=r"^error: --figure .*fig\.jpg: the name must end in one of \.png, \.pdf, \.svg, \.html$"):
        module.main([str(one), "--figure", str(tmp_path / "fig.jpg")])
    with pytest.raises(SystemExit, match=r"^error: --curves chooses the curves of --figure; give --figure too$"):
        module.main([str(one), "--curves", "new"])


def test_a_window_of_rounds_averages_them_seed_by_seed(tmp_path):
    """--rounds 1:2: new (56 + 60) / 2, (56 + 62) / 2, (56 + 64) / 2 = 58, 59, 60; fedavg (40 + 50) / 2 ... = 45, 46, 47:
    +13 in every seed; a span without an evaluated round and a malformed one are one line."""
    module = _load("baselines_table")
    runs = [_run(tmp_path / "one", ["fedavg", "best", "oracle"]), _run(tmp_path / "two", ["new"])]
    text = module.render(runs, reference="fedavg", best=None, target=None, window=(1, 2))
    assert "Accuracy, mean of the evaluated rounds 1-2, mean over seeds ± 95% interval; gaps paired by seed:" in text
    assert "| new | new | 3 | 59.0 ± 2.5 |" in text and "| new - fedavg | +13.0, +13.0, +13.0 | +13.0 ± 0.0 |" in text
    assert module.render(runs, reference="fedavg", best=None, target=None, window=(2, 2)) .split("\n")[3:] != text.split("\n")[3:]
    with pytest.raises(SystemExit, match=r"^error: --rounds 5:9: no evaluated round in it$"):
        module.render(runs, reference="fedavg", best=None, target=None, window=(5, 9))
    for bad in ("9:5", "1-2", "a:2"):
        with pytest.raises(SystemExit, match=rf"^error: --rounds {bad}: expected FIRST:LAST, two round numbers with FIRST <= LAST \(e\.g\. 98:116\)$"):
            module.main([str(runs[0]), "--rounds", bad])
