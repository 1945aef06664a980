"""Every size a scenario controls is refused before it is allocated, in every command; nonsense is said in one line.

The allocation cases run the command line in one child process under an address-space limit
(``RLIMIT_AS``) and with the available memory fixed per command (``learning.data.guard.available_ram``), so a
regression fails with a MemoryError instead of driving the machine into its OOM killer, and the estimate's verdict
does not depend on the machine's memory. The child imports torch once and runs every such command in turn
(the ``guarded`` fixture); each test reads its commands' exit codes and output.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import wirelessfl.cost as cost
from wirelessfl.learning.data import guard as data_guard
from wirelessfl import cli
from wirelessfl.cli import app
from wirelessfl.config import MAX_ROUNDS, parse_scenario
from wirelessfl.learning.data import datasets, sizes
from wirelessfl.learning.data.sizes import data_size
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.physical import OUTAGE_S, in_outage, shannon_rate
from wirelessfl.results import io
from wirelessfl.results.links import outage_warnings
from wirelessfl.results.tables import loss_warnings
from wirelessfl.run.seeds import static_rng

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
ADDRESS_SPACE = 8 * 2**30
AVAILABLE = 16_000_000_000
OK = {
    "name": "ok",
    "rounds": 2,
    "seeds": [0],
    "device": "cpu",
    "data": {"dataset": "digits", "clients": 3, "samples": {"per_client": 20}},
    "model": {"name": "mlp", "options": {"hidden": [4]}},
    "training": {"batch_size": 10},
    "algorithms": [{"name": "fedavg"}],
}
CHILD = """
import contextlib, importlib, io, json, os, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
import wirelessfl.learning.data.guard
from wirelessfl.cli import run

def stub_png():
    import wirelessfl.results.static as static
    static.render = lambda fig, image_format="png": b"a stand-in: this child does not draw its static figures"

jobs_file, results_file = sys.argv[1:3]
results = []
for job in json.load(open(jobs_file)):
    os.chdir(job["cwd"])
    sys.path.insert(0, job["cwd"])
    importlib.invalidate_caches()
    wirelessfl.learning.data.guard.available_ram = lambda available=job["available"]: available
    if job["no_png"]:
        stub_png()
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if job["code"] is not None:
                exec(job["code"], {{}})
            else:
                sys.argv = ["wirelessfl", *job["args"]]
                run()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    sys.path.remove(job["cwd"])
    results.append({{"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}})
json.dump(results, open(results_file, "w"))
"""
API_BODY = """
import yaml, wirelessfl
doc = yaml.safe_load(open("ok.yaml"))
bomb = {**doc, "data": {"dataset": "synthetic", "clients": 10, "options": {"dim": 1000000000}}}
for call in (lambda: wirelessfl.simulate(bomb, "run"), lambda: wirelessfl.sweep(bomb, {"rho": [1, 2]}, "sweep"),
             lambda: wirelessfl.tune(bomb, "tuning"),
             lambda: wirelessfl.sweep(doc, {"model.options.hidden": [[100000000]]}, "sweep")):
    try:
        call()
    except ValueError as err:
        print(str(err).split(" about ")[0])
"""


def _children(jobs: list[dict], scratch: Path) -> list[SimpleNamespace]:
    """Run each job (a command line, or Python code) in turn in one child under the address-space limit;
    each gets its folder as working directory and on ``sys.path``, and its own available memory."""
    (scratch / "jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
    code = CHILD.format(limit=ADDRESS_SPACE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, str(scratch / "jobs.json"), str(scratch / "results.json")],
                          cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [SimpleNamespace(**r) for r in json.loads((scratch / "results.json").read_text(encoding="utf-8"))]


def _job(folder: Path, args: list[str] | None = None, code: str | None = None, available: int = AVAILABLE, no_png: bool = False) -> dict:
    return {"cwd": str(folder), "args": args, "code": code, "available": available, "no_png": no_png}


def _refused(result: subprocess.CompletedProcess, start: str) -> str:
    """Exit 2, one line on stderr starting with ``start``, nothing on stdout."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr[-3000:])
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), result.stderr[-3000:]
    assert result.stdout == ""
    return lines[0]


def _folder(tmp_path: Path, doc: dict = OK) -> Path:
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return tmp_path


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


DATA_BOMBS = [
    # (the probe's data block, the sizes the refusal names); the peak by hand in test_synthetic_sizes_by_hand
    ({"dataset": "synthetic", "clients": 10, "options": {"dim": 1_000_000_000}}, "1,600 TB", "a pool of 100,000 samples of 1x1x1000000000, 3 components"),
    ({"dataset": "synthetic", "clients": 10, "options": {"num_samples": 1_000_000_000}}, "2.4 TB", "a pool of 1,000,000,000 samples of 1x1x150, 3 components"),
    ({"dataset": "synthetic", "clients": 10, "options": {"components": 100_000_000}}, "120 GB", "a pool of 100,000 samples of 1x1x150, 100,000,000 components"),
]


OUTAGE_DOC = {**OK, "data": {**OK["data"], "clients": 10},
              "networks": [{"preset": "wired", "physical": {"fading": "none", "ue_power_dbm": -14, "bs_power_dbm": 0, "cell_radius_m": 5000}}]}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> dict[str, tuple[Path, list[SimpleNamespace]]]:
    """Every command of this file that must run under the address-space limit, run in one child: per case, its
    folder and its commands' results, in order. The outage run goes first, so no earlier command has shown
    (and so silenced) a warning it must keep from the user."""
    cases: dict[str, tuple[Path, list[dict]]] = {}
    folder = _folder(tmp_path_factory.mktemp("outage"), OUTAGE_DOC)
    cases["outage"] = folder, [_job(folder, ["simulate", "ok.yaml", "--out", "run", "--quiet"], no_png=True)]
    for i, (data, _, _) in enumerate(DATA_BOMBS):
        folder = _folder(tmp_path_factory.mktemp(f"bomb{i}"))
        cases[f"bomb{i}"] = folder, [_job(folder, ["validate", "ok.yaml", "--build", "--set", f"data={data}"])]
    folder, bomb = _folder(tmp_path_factory.mktemp("every")), f"data={DATA_BOMBS[0][0]}"
    cases["every"] = folder, [
        _job(folder, ["simulate", "ok.yaml", "--set", bomb, "--out", "run", "--quiet"]),
        _job(folder, ["tune", "ok.yaml", "--set", bomb, "--out", "tuning", "--quiet"]),
        _job(folder, ["sweep", "ok.yaml", "--set", bomb, "--grid", "rho=1,2", "--out", "sweep", "--quiet"]),
        _job(folder, ["sweep", "ok.yaml", "--grid", "data.options.dim=1000000000,150", "--set", "data.dataset=synthetic",
                      "--out", "sweep", "--quiet"]),
    ]
    folder = _folder(tmp_path_factory.mktemp("unit"))
    cases["unit"] = folder, [_job(folder, ["sweep", "ok.yaml", "--grid", "model.options.hidden=[100000000],[16]", "--out", "s", "--quiet"])]
    folder = _folder(tmp_path_factory.mktemp("api"))
    cases["api"] = folder, [_job(folder, code=API_BODY)]
    folder = _folder(tmp_path_factory.mktemp("extend"))
    with _cwd(folder):
        assert runner.invoke(app, ["simulate", "ok.yaml", "--out", "run", "--quiet", "--keep-models"]).exit_code == 0
    cases["extend"] = folder, [_job(folder, ["simulate", "--resume", "run", "--rounds", "100000", "--quiet"], available=100_000_000)]
    extend_before = _files(folder / "run")
    folder = _folder(tmp_path_factory.mktemp("factory"), {**OK, "model": {"name": "guards_models:leave"}})
    (folder / "guards_models.py").write_text(MODULE)
    (folder / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    cases["factory"] = folder, [
        _job(folder, ["validate", "ok.yaml", "--build"]),
        _job(folder, ["validate", "ok.yaml", "--set", "model.name=exits_on_import:f"]),
    ]
    results = iter(_children([job for _, jobs in cases.values() for job in jobs], tmp_path_factory.mktemp("children")))
    done = {name: (folder, [next(results) for _ in jobs]) for name, (folder, jobs) in cases.items()}
    done["extend_before"] = extend_before
    return done


# --------------------------------------------------------------------------- the data's own sizes


def test_synthetic_sizes_by_hand():
    """1,000 samples of 10 features, 3 components, 3 clients x 20 samples dealt.
    Loading: theta 8 x 3 x 10 = 240; x (float64) and theta[latent] 2 x 8 x 1,000 x 10 = 160,000; latent, noise,
    logits, labels and the inner products 5 x 8 x 1,000 = 40,000: 200,240 B.
    Federating: the float32 pool 1,000 x 10 x 4 = 40,000; the 60 dealt samples twice 2 x 60 x 10 x 4 = 4,800;
    indices 4 x 8 x 1,060 = 33,920: 78,720 B."""
    size = data_size("synthetic", None, {"num_samples": 1000, "dim": 10, "components": 3}, 3, {"per_client": 20})
    assert (size.pool_samples, size.input_shape, size.loading, size.federating, size.peak) == (1000, (1, 1, 10), 200_240, 78_720, 200_240)


def test_digits_sizes_by_hand_and_the_pool_is_the_loaders():
    """1,797 images of 8x8 uint8: loading 4 x 1,797 x 64 = 460,032 B; federating the pool 1,797 x 64 = 115,008,
    60 dealt twice as stored (uint8: the engine normalises where it gathers) 2 x 60 x 64 = 7,680, indices
    4 x 8 x 1,857 = 59,424: 182,112 B."""
    size = data_size("digits", None, {}, 3, {"per_client": 20})
    assert (size.pool_samples, size.input_shape, size.loading, size.federating) == (1797, (1, 8, 8), 460_032, 182_112)
    pool = datasets.load_pool("digits")
    assert (len(pool), pool.input_shape) == (size.pool_samples, size.input_shape)
    assert data_size("digits", None, {}, 3, {"total": "all"}).federating == 1797 * 64 + 2 * 1797 * 64 + 32 * 2 * 1797


def test_a_reused_pool_is_indexed_not_copied_unless_a_shift_transforms_it():
    """500 clients x 15 digits with reuse 5: 7,500 dealt samples from 1,797. Unshifted, the clients index the pool:
    1,797 x 64 + indices 32 x (1,797 + 7,500) = 412,512 B; a shift copies the 7,500 twice more: + 960,000 B."""
    samples = {"per_client": 15, "reuse": 5}
    assert data_size("digits", None, {}, 500, samples, shifted=False).federating == 115_008 + 297_504 == 412_512
    assert data_size("digits", None, {}, 500, samples, shifted=True).federating == 412_512 + 2 * 7_500 * 64
    assert data_size("digits", None, {}, 20, samples, shifted=False).federating == 115_008 + 2 * 300 * 64 + 32 * 2_097


def test_fixed_pools_follow_the_pool_option_and_the_emnist_split():
    assert data_size("emnist", None, {"split": "byclass", "pool": ["test"]}, 3, {"total": "all"}).pool_samples == 116_323
    assert data_size("emnist", None, {"split": "letters"}, 3, {"total": "all"}).pool_samples == 124_800 + 20_800
    assert data_size("cifar10", None, {"pool": "train"}, 3, {"total": "all"}).input_shape == (3, 32, 32)
    # options the loader refuses itself (before it allocates) are left to it
    assert data_size("emnist", None, {"split": "nope"}, 3, {}) is None
    assert data_size("mnist", None, {"pool": ["val"]}, 3, {}) is None
    assert data_size("synthetic", None, {"dim": "1e9"}, 3, {}) is None
    assert data_size("synthetic", None, {"dim": 0}, 3, {}) is None


def test_imagefolder_counts_its_images(tmp_path):
    for klass, count in (("a", 3), ("b", 2)):
        (tmp_path / "img" / klass / "deep").mkdir(parents=True)
        for i in range(count):
            (tmp_path / "img" / klass / ("deep" if i else ".") / f"{i}.PNG").write_bytes(b"")
        (tmp_path / "img" / klass / "notes.txt").write_text("not an image")
    size = data_size("imagefolder", str(tmp_path), {"path": "img", "image_size": 1000, "channels": 1}, 3, {"total": "all"})
    assert (size.pool_samples, size.input_shape, size.loading) == (5, (1, 1000, 1000), 3 * 5 * 1000 * 1000)
    assert data_size("imagefolder", str(tmp_path), {"path": "missing"}, 3, {}) is None


def test_the_copied_constants_agree():
    assert sizes.IMAGE_EXTENSIONS == datasets.IMAGE_EXTENSIONS
    assert io.MAX_ROUND == MAX_ROUNDS


@pytest.mark.parametrize("data,peak,pool", DATA_BOMBS)
def test_check_data_refuses_before_anything_is_drawn(data, peak, pool, monkeypatch):
    monkeypatch.setattr(datasets, "synthetic_mixture", lambda *a: pytest.fail("drew the data"))
    with pytest.raises(ValueError) as refused:
        cost.check_run(parse_scenario({**OK, "data": data}), available=AVAILABLE)
    assert str(refused.value) == (
        f"memory: building the data needs about {peak} at its peak ({pool}) but 16.0 GB is available and a run may "
        "use 80% of it; use a smaller data.options.num_samples, dim or components"
    )


def test_data_that_fits_is_built(monkeypatch):
    """The default synthetic pool (100,000 x 150) needs 16 x 1.5e7 + ... = 244 MB: it fits in 16 GB and is checked."""
    scenario = parse_scenario({**OK, "data": {"dataset": "synthetic", "clients": 3, "samples": {"per_client": 20}}})
    size = data_guard.check_data(scenario, available=AVAILABLE)
    assert size.loading == 8 * 3 * 150 + 16 * 100_000 * 150 + 40 * 100_000
    with pytest.raises(ValueError, match=r"^memory: building the data needs about 244 MB at its peak .* but 300 MB is available"):
        data_guard.check_data(scenario, available=300_000_000)


def test_the_guard_sees_whether_a_shift_copies_a_reused_pool():
    """Digits' loading peak is 460,032 B; federating 500 x 15 with reuse 5 is 412,512 B unshifted, 1,372,512 B rotated."""
    data = {"clients": 500, "samples": {"per_client": 15, "reuse": 5}}
    plain = parse_scenario({**OK, "data": data})
    rotated = parse_scenario({**OK, "data": {**data, "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}]}})
    assert data_guard.check_data(plain, available=1_000_000).peak == 460_032
    assert data_guard.check_data(rotated, available=2_000_000).peak == 1_372_512
    with pytest.raises(ValueError, match=r"^memory: building the data needs about 1\.4 MB at its peak"):
        data_guard.check_data(rotated, available=1_000_000)


# --------------------------------------------------------------------------- every door, under an address-space limit


@pytest.mark.parametrize("case,peak,pool", [(f"bomb{i}", peak, pool) for i, (_, peak, pool) in enumerate(DATA_BOMBS)])
def test_validate_refuses_data_bombs_in_one_line(guarded, case, peak, pool):
    folder, (result,) = guarded[case]
    line = _refused(result, "error: ok.yaml: memory: building the data needs")
    assert f"about {peak} at its peak ({pool})" in line
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


def test_every_command_refuses_a_data_bomb_before_writing(guarded):
    """simulate, tune, sweep with the bomb set, sweep with the bomb in its grid."""
    folder, (simulate, tune, sweep, grid) = guarded["every"]
    start = "error: ok.yaml: memory: building the data needs about 1,600 TB"
    _refused(simulate, start)
    _refused(tune, start)
    _refused(sweep, "error: memory: building the data needs about 1,600 TB")
    _refused(grid, "error: --grid data.options.dim=1000000000: memory: building the data needs about 1,600 TB")
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


def test_sweep_checks_each_unit_like_simulate(guarded):
    """``--grid model.options.hidden=[100000000],[16]``: 3 clients of a 6.4e9-parameter model, refused before a unit is built."""
    folder, (result,) = guarded["unit"]
    line = _refused(result, "error: --grid model.options.hidden=[100000000]: memory: this run needs about ")
    assert line.endswith("use fewer clients (data.clients), a smaller training.batch_size, a smaller model (model) or fewer algorithms per run")
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


def test_the_python_api_refuses_before_allocating_or_writing(guarded):
    """simulate, sweep and tune of a data bomb, and a sweep with a too-large model in its grid (``API_BODY``)."""
    tmp_path, (result,) = guarded["api"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "memory: building the data needs",
        "memory: building the data needs",
        "memory: building the data needs",
        "--grid model.options.hidden=[100000000]: memory: this run needs",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.yaml"]


def test_absurd_round_counts_are_refused_with_their_bound(tmp_path):
    folder = _folder(tmp_path)
    bound = "1000000000 is more than the 100,000 rounds a run may have (every round is trained, timed and recorded, so more would take days at the least; the papers run hundreds)"
    cases = [
        (["validate", "ok.yaml", "--set", "rounds=1000000000"], f"error: ok.yaml: rounds: {bound}"),
        (["simulate", "ok.yaml", "--rounds", "1000000000", "--out", "r"], f"error: ok.yaml: rounds: {bound}"),
        (["sweep", "ok.yaml", "--grid", "rounds=1000000000", "--out", "s"], f"error: --grid rounds=1000000000: rounds: {bound}"),
        (["sweep", "ok.yaml", "--grid", "rho=1,2", "--rounds", "1000000000", "--out", "s"], f"error: ok.yaml: rounds: {bound}"),
        (["sweep", "ok.yaml", "--grid", "rho=1,2", "--set", "rounds=1000000000", "--out", "s"], f"error: ok.yaml: rounds: {bound}"),
        (["tune", "ok.yaml", "--rounds", "1000000000", "--out", "t"], f"error: ok.yaml: tune.rounds: {bound}"),
    ]
    for args, line in cases:
        with _cwd(folder):
            result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.splitlines() == [line], (args, result.output)
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


class _cwd:
    def __init__(self, path: Path) -> None:
        self.path, self.before = path, Path.cwd()

    def __enter__(self):
        os.chdir(self.path)

    def __exit__(self, *exc):
        os.chdir(self.before)


def test_extending_a_run_beyond_memory_changes_nothing(guarded):
    """``--resume RUN --rounds N`` checks the longer run's memory before its checkpoints are restamped: 100,000
    rounds of 3 clients keep (3 x 200 B + 3 kB) x 100,000 = 360 MB of records, over 80% of 100 MB."""
    folder, (result,) = guarded["extend"]
    line = _refused(result, "error: memory: this run needs about 360 MB at its peak (round records 360 MB) but 100 MB is available")
    assert "use fewer rounds (rounds)" in line
    assert _files(folder / "run") == guarded["extend_before"]


# --------------------------------------------------------------------------- nonsense said in one line


def test_tune_objective_over_more_rounds_than_a_trial_evaluates(tmp_path):
    folder = _folder(tmp_path)
    with _cwd(folder):
        result = runner.invoke(app, ["tune", "ok.yaml", "--set", "tune={last_rounds: 100}", "--out", "t"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: ok.yaml: tune.last_rounds: 100 evaluated rounds for the objective, but a trial of 2 rounds (eval_every 1) "
        "evaluates 2; at most 2, or more rounds (tune.rounds)"
    ]
    with _cwd(folder):  # rounds 1..10 with eval_every 4: rounds 4, 8 and the last
        result = runner.invoke(app, ["tune", "ok.yaml", "--set", "tune={last_rounds: 4, rounds: 10}", "--set", "eval_every=4", "--out", "t"])
    assert result.output.splitlines() == [
        "error: ok.yaml: tune.last_rounds: 4 evaluated rounds for the objective, but a trial of 10 rounds (eval_every 4) "
        "evaluates 3; at most 3, or more rounds (tune.rounds)"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


MODULE = '''
import sys
from torch import nn

if "--exit-on-import" in sys.argv:
    sys.exit(0)


class NanNet(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return self.fc(x.flatten(1)) * float("nan")


def nan(input_shape, num_classes):
    c, h, w = input_shape
    return NanNet(c * h * w, num_classes)


def leave(input_shape, num_classes):
    sys.exit(0)
'''


def test_a_factory_calling_sys_exit_is_one_line(guarded):
    _, (factory, module) = guarded["factory"]
    _refused(factory, "error: ok.yaml: model 'guards_models:leave': the factory called sys.exit(0) instead of returning a torch.nn.Module")
    _refused(module, "error: ok.yaml: model.name: model 'exits_on_import:f': importing module 'exits_on_import' called sys.exit(0)")


def test_a_nan_loss_is_said_in_one_line_and_in_summary(tmp_path, monkeypatch):
    """The run goes on (the trace keeps every round, mean_loss empty) and says from which round the loss broke."""
    folder = _folder(tmp_path, {**OK, "model": {"name": "guards_models:nan"}})
    (folder / "guards_models.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(folder))
    with _cwd(folder):
        result = runner.invoke(app, ["simulate", "ok.yaml", "--out", "run", "--quiet"])
    assert result.exit_code == 0, result.output
    line = (
        "on wired, the test loss is NaN or infinite (mean_loss empty) from round 0 for fedavg: the model's outputs "
        "broke (its training diverged, or it computes NaN); try a smaller training.lr or training.clip_norm"
    )
    assert f"warning: {line}" in result.output.splitlines()
    assert f"- **warning** {line}" in (folder / "run" / "summary.md").read_text().splitlines()
    assert pd.read_csv(folder / "run" / "trace.csv")["mean_loss"].isna().all()


def test_loss_warnings_by_hand():
    trace = pd.DataFrame({
        "profile": ["p"] * 6 + ["q"] * 2,
        "curve": ["a", "a", "a", "b", "b", "b", "a", "a"],
        "round": [0, 1, 2, 0, 1, 2, 0, 1],
        "avg_acc": [0.1, np.nan, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1],
        "mean_loss": [1.0, np.nan, np.inf, 1.0, 1.0, np.nan, 1.0, 1.0],
    })
    assert loss_warnings(trace) == [
        "on p, the test loss is NaN or infinite (mean_loss empty) from round 2 for a, 2 for b: the model's outputs "
        "broke (its training diverged, or it computes NaN); try a smaller training.lr or training.clip_norm"
    ]


def test_loss_warnings_say_every_profile_once_when_the_profiles_replayed_one_training():
    rows = {"curve": ["a"] * 3, "seed": [0] * 3, "round": [0, 1, 2], "avg_acc": [0.1, 0.2, 0.01], "mean_loss": [1.0, 0.9, np.nan]}
    trace = pd.concat([pd.DataFrame({**rows, "profile": [p] * 3}) for p in ("p", "q")], ignore_index=True)
    assert loss_warnings(trace) == [
        "on every profile, the test loss is NaN or infinite (mean_loss empty) from round 2 for a: the model's outputs "
        "broke (its training diverged, or it computes NaN); try a smaller training.lr or training.clip_norm"
    ]
    trace.loc[(trace["profile"] == "q") & (trace["round"] == 2), "mean_loss"] = 0.8  # q trained otherwise: its own line
    assert [line.split(",")[0] for line in loss_warnings(trace)] == ["on p"]
    assert loss_warnings(trace.assign(avg_acc=np.nan)) == []  # no evaluated round (a tuning trial's test split)


def test_report_on_an_impossible_round_is_one_line_and_writes_nothing(tmp_path):
    folder = _folder(tmp_path)
    with _cwd(folder):
        assert runner.invoke(app, ["simulate", "ok.yaml", "--out", "run", "--quiet"]).exit_code == 0
    (folder / "run" / "trace.parquet").unlink()
    lines = (folder / "run" / "trace.csv").read_text().splitlines()
    at = lines[0].split(",").index("round")
    cells = lines[2].split(",")
    cells[at] = "99999999999999999999"
    lines[2] = ",".join(cells)
    (folder / "run" / "trace.csv").write_text("\n".join(lines) + "\n")
    before = _files(folder / "run")
    with _cwd(folder):
        result = runner.invoke(app, ["report", "run"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: run/trace.csv: round 99999999999999999999 is not a round a run can have (whole numbers from 0 to "
        "100,000); the file was changed after the run wrote it"
    ]
    assert _files(folder / "run") == before


# --------------------------------------------------------------------------- link budgets


def test_in_outage_by_hand():
    """Without fading the ergodic rate is the Shannon rate at the user's loss: a model is in outage when
    bits / rate > 10,000 s, in either direction."""
    profile = SystemProfile.from_dict({"preset": "wired", "physical": {"fading": "none"}})
    channel = profile.physical
    loss = np.array([100.0, 140.0])
    up = shannon_rate(channel.ue_power_dbm, loss, np.ones(2), channel.uplink_bandwidth_hz, channel.noise_density_dbm_hz)
    down = shannon_rate(channel.bs_power_dbm, loss, np.ones(2), channel.bandwidth_hz, channel.noise_density_dbm_hz)
    slowest = np.minimum(up, down)
    bits = OUTAGE_S * float(slowest.mean())  # between the two users' limits
    assert slowest[1] < bits / OUTAGE_S < slowest[0]
    assert in_outage(channel, loss, bits).tolist() == [False, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rate of 0 is an outage, not a numpy warning
        dead = SystemProfile.from_dict({"preset": "wired", "physical": {"fading": "none", "link": "truncated_shannon"}}).physical
        assert in_outage(dead, np.array([400.0]), 1.0).tolist() == [True]


def test_a_link_budget_leaving_every_client_in_outage_is_refused(tmp_path):
    """The probe: each value in range, together rounds of 2.5e13 s."""
    folder = _folder(tmp_path)
    physical = "networks=[{preset: wired, physical: {cell_radius_m: 100000, bs_power_dbm: -30, ue_power_dbm: -40}}]"
    for command in (["validate", "ok.yaml", "--build"], ["simulate", "ok.yaml", "--out", "run", "--quiet"]):
        with _cwd(folder):
            result = runner.invoke(app, [*command, "--set", physical])
        assert result.exit_code == 2
        assert result.output.splitlines() == [
            "error: ok.yaml: network 'wired': its link budget leaves 3 of 3 clients in outage (one model, 0.00992 Mbit, "
            "takes over 10,000 s to receive or send at their mean rate: bs_power_dbm -30, ue_power_dbm -40, "
            "cell_radius_m 100000); raise the powers or make the cell smaller"
        ]
    assert sorted(p.name for p in folder.iterdir()) == ["ok.yaml"]


def test_a_run_with_most_clients_in_outage_says_so(guarded):
    """7 of 10 users of a 5 km cell at -14 dBm cannot send the 9,920-bit model within 10,000 s (no fading, so
    every round alike): the run is not refused (under 90%), it warns, on the console and in summary.md, and no
    numpy warning reaches the user."""
    folder, (result,) = guarded["outage"]
    profile = SystemProfile.from_dict(OUTAGE_DOC["networks"][0])
    assert in_outage(profile.physical, NetworkModel(profile, 10, static_rng(0, profile)).path_loss_db, 310 * 32).sum() == 7
    assert result.returncode == 0, result.stderr[-3000:]
    line = (
        "on wired, 70% of the participants' rounds were in outage (receiving or sending the model took over 10,000 s, "
        "or never ended): the link budget leaves most clients out; raise the powers or make the cell smaller"
    )
    assert f"warning: {line}" in result.stderr.splitlines()
    assert "RuntimeWarning" not in result.stderr and "encountered in" not in result.stderr
    assert f"- **warning** {line}" in (folder / "run" / "summary.md").read_text().splitlines()
    with _cwd(folder):  # report keeps the run's notes
        assert runner.invoke(app, ["report", "run"]).exit_code == 0
    assert f"- **warning** {line}" in (folder / "run" / "summary.md").read_text().splitlines()


def test_outage_warnings_by_hand():
    rows = pd.DataFrame({
        "profile": ["p", "p", "p", "q", "q", "t"],
        "time_unit": ["s", "s", "s", "s", "s", "T_dl"],
        "t_uploaded": [np.inf, 5.0, 20_000.0, 1.0, np.inf, np.inf],
        "receive_time": [0.0, 10_001.0, 1.0, 1.0, 1.0, 1.0],
        "upload_time": [0.0, 1.0, 10_000.0, 1.0, 0.0, 1.0],
    })
    assert outage_warnings(rows, 10_000.0) == [
        "on p, 67% of the participants' rounds were in outage (receiving or sending the model took over 10,000 s, "
        "or never ended): the link budget leaves most clients out; raise the powers or make the cell smaller"
    ]
    assert outage_warnings(None, 10_000.0) == []


def test_python_warnings_are_one_line_and_numpy_floating_point_chatter_is_left_out(capsys):
    cli._one_line_warning(RuntimeWarning("divide by zero encountered in divide"), RuntimeWarning, "model.py", 126)
    cli._one_line_warning(UserWarning("could not cache\nthe images"), UserWarning, "datasets.py", 1)
    assert capsys.readouterr().err.splitlines() == ["warning: UserWarning: could not cache\\nthe images"]
