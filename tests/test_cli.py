"""End to end through the command line, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from wirelessfl.accounting import TRACE_ENERGY_COLUMNS
from wirelessfl.cli import app
from wirelessfl.config import dump_scenario, parse_scenario, resolved
from wirelessfl.results.io import PROVENANCE_FILE, TRACE_COLUMNS, read_provenance
from wirelessfl.results.tables import SEPARATE_DRAWS_TEXT, SHARED_DRAWS_TEXT

runner = CliRunner()

SCENARIO = {
    "name": "e2e",
    "rounds": 2,
    "target_accuracy": 0.3,
    "device": "cpu",
    "data": {
        "dataset": "digits",
        "clients": 4,
        "samples": {"per_client": 30},
        "partition": [{"name": "dirichlet", "alpha": 0.5}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp"},
    "training": {"batch_size": 10},
    "algorithms": [{"name": "fedavg"}, {"name": "local"}],
    "networks": [{"preset": "slow-ul-unreliable"}, {"preset": "wired"}],
}
ACCURACIES = ["avg_acc", "worst_acc", "p10_acc", "avg_val_acc"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path, doc, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    out = root / "run"
    result = runner.invoke(app, ["simulate", str(_write(root, SCENARIO)), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_simulate_writes_the_trace_one_row_per_round_algorithm_profile(run):
    run_dir, _ = run
    trace = pd.read_csv(run_dir / "trace.csv")
    trace["variant"] = trace["variant"].fillna("")
    assert list(trace.columns) == [*TRACE_COLUMNS, "train_loss", *TRACE_ENERGY_COLUMNS]
    keys = ["round", "algorithm", "variant", "profile", "seed"]
    assert not trace.duplicated(keys).any()
    expected = {(r, a, "", p, 0) for r in (0, 1, 2) for a in ("fedavg", "local") for p in ("slow-ul-unreliable", "wired")}
    assert set(trace[keys].itertuples(index=False, name=None)) == expected
    for _, group in trace.groupby(["curve", "profile", "seed"]):
        times = group.sort_values("round")["time"].to_numpy()
        assert times[0] == 0.0 and (times[1:] > times[:-1]).all()
    assert trace[ACCURACIES].notna().all().all()
    assert ((trace[ACCURACIES] >= 0) & (trace[ACCURACIES] <= 1)).all().all()
    assert (trace["worst_acc"] <= trace["avg_acc"]).all()
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "trace.parquet"), trace, check_dtype=False)
    assert yaml.safe_load((run_dir / "scenario.yaml").read_text()) == resolved(parse_scenario(SCENARIO))


def test_simulate_writes_summary_figures_and_runtime(run):
    run_dir, output = run
    summary = (run_dir / "summary.md").read_text()
    for heading in ("## Final accuracy", "## Time to target accuracy (average client accuracy >= 30.0%)", "## Payload moved", "## Worst client (Table I style)"):
        assert heading in summary
    assert "| curve | slow-ul-unreliable (T_dl) | wired (T_dl) |" in summary
    assert "| fedavg | wired | 2.0 | 8.0 |" in summary  # 2 rounds x (1 broadcast down, 4 uploads up)
    assert "| local | wired | 0.0 | 0.0 |" in summary
    for name in ("fig3.html", "fig2.html", "worst_clients.html"):
        html = (run_dir / name).read_text()
        assert "fedavg" in html and "local" in html, name
    assert "slow-ul-unreliable" in (run_dir / "fig3.html").read_text()
    assert (run_dir / "fig3.png").read_bytes().startswith(PNG_MAGIC)
    assert "PNG export" not in output and "PNG export" not in summary
    runtime = json.loads((run_dir / "runtime.json").read_text())
    assert set(runtime) == {"seed0__fedavg", "seed0__local"}
    assert all(unit["rounds"] == 2 and unit["train_samples_per_round"] > 0 for unit in runtime.values())
    assert "local-training samples/s" in summary
    assert f"results: {run_dir}" in output


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height in pixels from the PNG header (IHDR, right after the signature)."""
    head = path.read_bytes()[:24]
    assert head.startswith(PNG_MAGIC) and head[12:16] == b"IHDR", path
    return struct.unpack(">II", head[16:24])


@pytest.mark.draws_figures
def test_a_quickstart_sized_run_draws_every_png_with_no_browser_installed(tmp_path, monkeypatch, capfd):
    """The quickstart's clients, curves and profiles (1 round, 1 seed) with a PATH that holds no browser."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    done = runner.invoke(app, ["simulate", str(ROOT / "scenarios" / "quickstart.yaml"), "--out", str(out),
                               "--rounds", "1", "--seed", "0", "--device", "cpu"])
    assert done.exit_code == 0, done.output
    said = done.output + "".join(capfd.readouterr())
    assert "PNG export" not in said and "Chrome" not in said
    for name in ("fig3.png", "fig2.png", "energy.png", "energy_pareto.png", "timeline.png"):
        width, height = _png_size(out / name)
        assert 1000 <= width <= 4000 and 500 <= height <= 6000, (name, width, height)
        assert (out / name).stat().st_size > 30_000, name  # curves and text, not an empty canvas
    width, height = _png_size(out / "fig3.png")
    assert width > 2 * height  # three profile panels side by side


@pytest.mark.draws_figures
def test_plot_format_pdf_and_svg_and_a_bad_format(run, monkeypatch, capsys):
    from wirelessfl.cli import run as console

    run_dir, _ = run
    plotted = runner.invoke(app, ["plot", str(run_dir), "--format", "pdf"])
    assert plotted.exit_code == 0, plotted.output
    for name in ("fig3", "fig2", "energy", "energy_pareto", "timeline"):
        assert (run_dir / f"{name}.pdf").read_bytes().startswith(b"%PDF"), name
        assert str(run_dir / f"{name}.pdf") in plotted.output
    plotted = runner.invoke(app, ["plot", str(run_dir), "--timeline", "1", "--format", "svg"])  # SVG: one figure
    assert plotted.exit_code == 0, plotted.output
    assert (run_dir / "timeline.svg").read_bytes().startswith(b"<?xml") and str(run_dir / "timeline.svg") in plotted.output
    before = sorted(p.name for p in run_dir.iterdir())
    capsys.readouterr()
    monkeypatch.setattr("sys.argv", ["wirelessfl", "plot", str(run_dir), "--format", "eps"])
    with pytest.raises(SystemExit) as done:
        console()
    said = capsys.readouterr()
    assert done.value.code == 2 and said.out == ""
    assert said.err == (
        "error: Invalid value for '--format': Value error, 'eps' is not one of 'png', 'pdf', 'svg'. (see `wirelessfl plot --help`)\n"
    )
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_plot_and_report_remake_outputs_and_keep_the_run_notes(run):
    run_dir, _ = run
    (run_dir / "fig3.html").unlink()
    plotted = runner.invoke(app, ["plot", str(run_dir)])
    assert plotted.exit_code == 0, plotted.output
    assert (run_dir / "fig3.html").is_file() and str(run_dir / "fig3.html") in plotted.output
    reported = runner.invoke(app, ["report", str(run_dir), "--target", "0.99"])
    assert reported.exit_code == 0, reported.output
    assert reported.output.strip() == f"rewrote {run_dir / 'summary.md'} with --target 0.99"  # never silently in place
    summary = (run_dir / "summary.md").read_text()
    assert "average client accuracy >= 99.0%" in summary
    assert "- 2 training runs (trained once per curve and seed, replayed through every profile); wall time" in summary


def test_report_over_the_last_rounds_says_so_and_refuses_a_sweep(run, tmp_path):
    run_dir, _ = run
    reported = runner.invoke(app, ["report", str(run_dir), "--last", "2"])
    assert reported.exit_code == 0, reported.output
    assert reported.output.strip() == f"rewrote {run_dir / 'summary.md'} over the last 2 rounds"
    assert "95% Student-t interval (from two seeds on), each seed's mean over the evaluated rounds among the last 2" in (run_dir / "summary.md").read_text()
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.yaml").write_text("name: x\n")
    (sweep / "sweep.parquet").write_bytes(b"")
    refused = runner.invoke(app, ["report", str(run_dir), str(sweep), "--last", "2"])
    assert refused.exit_code == 2
    assert refused.output.strip() == f"error: --last applies to run directories, not to sweeps ({sweep})"
    assert runner.invoke(app, ["report", str(run_dir)]).exit_code == 0


def test_overrides_change_rounds_seed_and_device(tmp_path):
    out = tmp_path / "run"
    args = ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--rounds", "1", "--seed", "5", "--device", "cpu", "--quiet"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert (resolved["rounds"], resolved["seeds"], resolved["device"]) == (1, [5], "cpu")
    trace = pd.read_parquet(out / "trace.parquet")
    assert sorted(trace["round"].unique()) == [0, 1] and set(trace["seed"]) == {5}


def test_set_overrides_any_field_and_is_recorded_in_the_run(tmp_path):
    out = tmp_path / "run"
    args = ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--rounds", "1", "--quiet",
            "--set", "training.lr=0.01", "--set", "algorithms.1.name=oracle"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert resolved["training"]["lr"] == 0.01 and [a["name"] for a in resolved["algorithms"]] == ["fedavg", "oracle"]
    assert set(pd.read_parquet(out / "trace.parquet")["algorithm"]) == {"fedavg", "oracle"}


def test_a_bad_set_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--set", "training.lr=-1"])
    assert result.exit_code == 2 and not out.exists()
    assert "training.lr" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["validate", str(_write(tmp_path, SCENARIO)), "--set", "training.lrr=0.1"])
    assert result.exit_code == 2 and "training.lrr: unknown key" in result.output


def test_resume_continues_an_interrupted_run_to_the_identical_trace(tmp_path, run):
    from wirelessfl.simulate import simulate

    scenario = parse_scenario({**SCENARIO, "checkpoint_every": 1})
    run_dir = tmp_path / "killed"
    run_dir.mkdir()
    (run_dir / "scenario.yaml").write_text(dump_scenario(scenario))
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir, stop_after_rounds=3)
    assert not (run_dir / "trace.csv").exists()
    result = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "of the run's rounds)" in result.output  # the cost preview charges what is left only
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "trace.parquet"), pd.read_parquet(run[0] / "trace.parquet"))


def test_resume_refuses_overrides_and_a_different_scenario(tmp_path, run):
    run_dir, _ = run
    clash = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--seed", "9"])
    assert clash.exit_code == 2
    assert clash.output.strip() == f"error: --resume continues {run_dir} with the settings in its scenario.yaml; leave out --seed"
    other = _write(tmp_path, {**SCENARIO, "rounds": 3})
    differs = runner.invoke(app, ["simulate", str(other), "--resume", str(run_dir)])
    assert differs.exit_code == 2
    assert differs.output.strip() == (
        f"error: --resume {run_dir}: {other} differs from the run's scenario.yaml in rounds; "
        "leave SCENARIO out to continue the run as it was started"
    )
    nothing = runner.invoke(app, ["simulate"])
    assert nothing.exit_code == 2
    assert nothing.output.strip() == "error: give a SCENARIO file to run, or --resume RUN_DIR to continue an interrupted run"


def test_a_run_kept_with_its_models_extends_to_the_trace_of_a_longer_run(tmp_path, monkeypatch):
    """`--resume RUN --rounds N` trains every unit on from its last round, FedAvg+ still following FedAvg: the
    trace is the one a run started with N rounds gives. An extension killed half-way completes when re-run."""
    import wirelessfl.run.extend as extend_module

    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}, {"name": "fedavg_ft"}, {"name": "local"}], "networks": [{"preset": "wired"}]}
    source = _write(tmp_path, doc)
    fresh = tmp_path / "fresh"
    assert runner.invoke(app, ["simulate", str(source), "--rounds", "4", "--out", str(fresh), "--quiet"]).exit_code == 0
    short = tmp_path / "short"
    made = runner.invoke(app, ["simulate", str(source), "--rounds", "2", "--out", str(short), "--keep-models", "--quiet"])
    assert made.exit_code == 0, made.output
    written = extend_module.atomic_write_text

    def killed(path, text):
        if path.name == "scenario.yaml":
            raise KeyboardInterrupt
        return written(path, text)

    monkeypatch.setattr(extend_module, "atomic_write_text", killed)  # the extension is killed as it rewrites scenario.yaml
    assert runner.invoke(app, ["simulate", "--resume", str(short), "--rounds", "3", "--quiet"]).exit_code != 0
    assert sorted(p.name.split(".")[1] for p in (short / "checkpoints").glob("*.safetensors")) == ["partial"] * 3
    monkeypatch.setattr(extend_module, "atomic_write_text", written)
    for rounds in ("3", "4"):  # the killed extension completed, then extended once more (its models are kept)
        result = runner.invoke(app, ["simulate", "--resume", str(short), "--rounds", rounds, "--quiet"])
        assert result.exit_code == 0, result.output
    assert yaml.safe_load((short / "scenario.yaml").read_text())["rounds"] == 4
    pd.testing.assert_frame_equal(pd.read_parquet(short / "trace.parquet"), pd.read_parquet(fresh / "trace.parquet"))


def test_a_run_is_extended_only_from_its_models_and_never_shortened(run):
    run_dir, _ = run
    files = {path: path.read_bytes() for path in [run_dir / "scenario.yaml", *(run_dir / "checkpoints").iterdir()]}
    lean = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--rounds", "4"])
    assert lean.exit_code == 2
    assert lean.output.strip() == (
        f"error: --rounds 4: {run_dir} cannot be extended: 2 finished units kept no models (seed0__fedavg, "
        "seed0__local); a run keeps them to be extended when started with --keep-models"
    )
    shorter = runner.invoke(app, ["simulate", "--resume", str(run_dir), "--rounds", "1"])
    assert shorter.exit_code == 2
    assert shorter.output.strip() == (
        f"error: --rounds 1: {run_dir} runs 2 rounds; a run can be extended, not shortened (fewer rounds are a new "
        f"run: `wirelessfl simulate {run_dir / 'scenario.yaml'} --rounds 1 --out NEW_DIR`)"
    )
    assert {path: path.read_bytes() for path in files} == files


def test_without_a_terminal_a_run_prints_progress_lines_and_its_table_at_full_width(tmp_path, monkeypatch, run):
    import wirelessfl.progress_lines

    monkeypatch.setattr(wirelessfl.progress_lines, "LINE_EVERY_S", 0.0)  # a round line at every round but the last
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--set", "seeds=[0,1]"])
    assert result.exit_code == 0, result.output
    clock, left = r"\d+:\d\d", r"(about \d+ (s|min)|under a second)"
    expected = []
    for number, unit in enumerate(["seed0 fedavg", "seed0 local", "seed1 fedavg", "seed1 local"], start=1):
        expected += [
            rf"\[{number}/4\] {unit}: started, {clock} elapsed, {left} left",
            rf"\[{number}/4\] {unit}: round 1/2, {clock} elapsed, {left} left",
            rf"\[{number}/4\] {unit}: done in {clock}, {clock} elapsed" + ("" if number == 4 else rf", {left} left"),
        ]
    printed = [line for line in result.output.splitlines() if line.startswith("[")]
    assert len(printed) == len(expected), result.output
    for line, pattern in zip(printed, expected):
        assert re.fullmatch(pattern, line), (line, pattern)
    table = [line for line in result.output.splitlines() if line.startswith("│")]
    assert len(table) == 4 and "…" not in result.output  # 2 curves x 2 profiles, no cell cut short
    assert max(len(line) for line in table) > 80  # wider than the 80 columns rich assumes without a terminal
    assert any(re.fullmatch(r"│ fedavg +│ slow-ul-unreliable +│ \d+\.\d ± \d+\.\d +│.*│", line) for line in table), table
    _, quiet = run  # the same scenario with --quiet: not even the started and done lines, which print at any LINE_EVERY_S
    assert not [line for line in quiet.splitlines() if line.startswith("[")], quiet


def test_an_interrupted_run_says_how_to_resume(tmp_path, monkeypatch):
    import wirelessfl.simulate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(wirelessfl.simulate, "simulate", interrupted)
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--quiet"])
    assert result.exit_code == 130
    cost, error = result.output.strip().splitlines()
    assert cost.startswith("note: estimated memory for the run ")
    assert error == f"error: interrupted; `wirelessfl simulate --resume {out}` continues from the last checkpoint"
    assert (out / "scenario.yaml").is_file()


def test_out_must_be_new_or_empty(tmp_path, run):
    run_dir, _ = run
    before = sorted(p.name for p in run_dir.iterdir())
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(run_dir)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: --out {run_dir}: already exists and is not an empty directory; choose a new one "
        f"(an interrupted run continues with --resume {run_dir})"
    )
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_validate_and_list(tmp_path):
    path = _write(tmp_path, SCENARIO)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0
    ok = "ok e2e: digits, 4 clients, 2 rounds, 2 curves (fedavg, local), profiles: slow-ul-unreliable, wired, seeds [0]"
    assert result.output.strip().splitlines() == [
        ok, "schema, dataset files and data size checked; --build also builds the data, model and algorithms once",
    ]
    built = runner.invoke(app, ["validate", str(path), "--build"])
    assert built.exit_code == 0
    first, cost = built.output.strip().splitlines()
    assert first == ok
    assert re.fullmatch(r"estimated memory for the run \S+ [kMG]?B \(beyond the loaded libraries\) of \S+ GB available; training .* on this machine", cost)
    listing = runner.invoke(app, ["list"])
    assert listing.exit_code == 0
    for name in ("fedavg", "dirichlet", "digits", "lenet5", "slow-ul-unreliable"):
        assert name in listing.output


@pytest.mark.parametrize(
    ("algorithm", "model", "message"),
    [
        ({"name": "fedem", "params": {"components": 0}}, None, "algorithms[0].params.components: must be an int >= 1, got 0"),
        ({"name": "ifca", "params": {"clusters": 5}}, None, "algorithms[0].params.clusters: 5 is more than one cluster per user (data.clients = 4); at most 4"),
        ({"name": "fedmoe", "params": {"epsilon": -0.1}}, None, "algorithms[0].params.epsilon: must be a number in [0, 1], got -0.1"),
        ({"name": "pflego", "params": {"tau": 0}}, None, "algorithms[0].params.tau: must be an int >= 1, got 0"),
        (
            {"name": "pflego"},
            {"name": "mlp", "options": {"hidden": []}},
            "algorithms[0]: pflego: model 'mlp' has no shared body (its only layer with parameters is the personal head); it needs at least one hidden layer",
        ),
        (
            {"name": "fedper"},
            {"name": "mlp", "options": {"hidden": []}},
            "algorithms[0]: fedper: model 'mlp' has no shared body (its only layer with parameters is the personal head); it needs at least one hidden layer",
        ),
    ],
)
def test_validate_rejects_bad_seed_system_parameters_in_one_line(tmp_path, algorithm, model, message):
    """A value the declaration refuses is a schema error; what needs the model (a body to share) needs --build."""
    doc = {**SCENARIO, "algorithms": [algorithm], **({"model": model} if model else {})}
    path = _write(tmp_path, doc)
    result = runner.invoke(app, ["validate", str(path), *(["--build"] if model else [])])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: {message}"


def test_validate_build_builds_the_data_too(tmp_path):
    doc = {**SCENARIO, "data": {**SCENARIO["data"], "partition": [{"name": "dirichlet", "alpha": -1}]}}
    path = _write(tmp_path, doc)
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0  # the schema alone cannot see it
    result = runner.invoke(app, ["validate", str(path), "--build"])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: data.partition[0] (dirichlet): alpha must be a positive finite number; got -1"


def _doc(**changes):
    return yaml.safe_dump({**SCENARIO, **changes}).encode()


BAD_INPUTS = [
    ("tabs", b"name: t\nalgorithms:\n\t- {name: fedavg}\n", [], r"s.yaml: not valid YAML at line 3, column 1: found character '\\t' that cannot start any token"),
    ("duplicate key", b"name: t\nrounds: 3\nrounds: 4\nalgorithms: [{name: fedavg}]\n", [], r"s.yaml: not valid YAML at line 3, column 1: duplicate key 'rounds'"),
    ("list for a mapping", _doc(data=["digits"]), [], r"s.yaml: data: must be a mapping of keys to values \(\{key: value, ...\}\), got a list"),
    ("negative rounds", _doc(rounds=-5), [], r"s.yaml: rounds: Input should be greater than or equal to 1 \(got -5\)"),
    ("empty algorithms", _doc(algorithms=[]), [], r"s.yaml: algorithms: List should have at least 1 item after validation, not 0"),
    ("unknown preset", _doc(networks=[{"preset": "lte"}]), [], r"s.yaml: networks\[0\]: preset must be one of 'slow-ul-unreliable', 'fast-ul-reliable', 'wired', got 'lte'"),
    ("unknown parameter", _doc(algorithms=[{"name": "ucfl", "params": {"strems": 4}}]), [], r"s.yaml: algorithms\[0\]: ucfl has no parameter 'strems'; allowed: .*streams"),
    ("emnist without data", _doc(data={"dataset": "emnist", "root": "/nonexistent/emnist"}), [], r"dataset 'emnist': .*/nonexistent/emnist/"),
    ("out under a file", _doc(), ["--out", "{tmp}/s.yaml/run"], r"--out .*/s.yaml/run: cannot create the run directory: Not a directory"),
    ("missing file", None, [], r"s.yaml: no such scenario file"),
    ("empty file", b"", [], r"s.yaml: the file is empty; a scenario needs at least name: and algorithms:$"),
    ("not UTF-8", b"name: caf\xe9\n", [], r"s.yaml: not a UTF-8 text file \(byte 9: invalid continuation byte\)"),
    ("boolean rounds", _doc(rounds=True), [], r"s.yaml: rounds: Input should be a valid integer \(got True\)"),
    ("repeated seed", _doc(seeds=[1, 1]), [], r"s.yaml: seeds: must list each seed once; repeated: 1"),
    ("unknown model option", _doc(model={"name": "mlp", "options": {"width": 3}}), [], r"s\.yaml: model\.options for model 'mlp': unknown option 'width'; allowed: hidden$"),
    ("bad model option", _doc(model={"name": "mlp", "options": {"hidden": [0]}}), [], r"s\.yaml: model\.options for model 'mlp': hidden must be a sequence of positive ints, got \(0,\)$"),
    ("unimportable model", _doc(model={"name": "nowhere.at.all:net"}), [], r"s\.yaml: model\.name: model 'nowhere\.at\.all:net': cannot import module 'nowhere\.at\.all' \(ModuleNotFoundError: No module named 'nowhere'\)$"),
    ("model with buffers", _doc(model={"name": "torch.nn:BatchNorm2d"}), [], r"s\.yaml: model 'torch\.nn:BatchNorm2d' has buffers \(running_mean, running_var, num_batches_tracked\): the lockstep engine trains parameters only; use GroupNorm or LayerNorm instead of BatchNorm$"),
    ("brackets kept", _doc(algorithms=[{"name": "fedavg", "label": "[bold]x"}, {"name": "local", "label": "[bold]x"}]), [], r"repeated: \[bold\]x \(set `label:`\)$"),
]


@pytest.mark.parametrize(("content", "extra", "message"), [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_user_errors_are_one_line_exit_2_and_write_nothing(tmp_path, content, extra, message):
    path = tmp_path / "s.yaml"
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "never"
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra] or ["--out", str(out)]
    result = runner.invoke(app, ["simulate", str(path), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["s.yaml"] if content is not None else [])


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["simulate", "s.yaml", "--rounds", "0"], "error: Invalid value for '--rounds': Input should be greater than or equal to 1 (see `wirelessfl simulate --help`)"),
        (["simulate", "s.yaml", "--bogus"], "error: No such option: --bogus"),
        (["nosuch"], "error: No such command 'nosuch'. (see `wirelessfl --help`)"),
    ],
)
def test_usage_errors_from_the_console_entry_point_are_one_line(monkeypatch, capsys, argv, expected):
    from wirelessfl.cli import run

    monkeypatch.setattr("sys.argv", ["wirelessfl", *argv])
    with pytest.raises(SystemExit) as done:
        run()
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1 and "Traceback" not in err


def test_the_console_entry_point_exits_0_on_success_and_2_without_a_command(monkeypatch, capsys):
    from wirelessfl.cli import run

    monkeypatch.setattr("sys.argv", ["wirelessfl", "list"])
    with pytest.raises(SystemExit) as done:
        run()
    assert done.value.code == 0 and "algorithms" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["wirelessfl"])
    with pytest.raises(SystemExit) as done:
        run()
    assert done.value.code == 2 and "Usage: wirelessfl [OPTIONS] COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_doc(training={"lr": float("inf")}), r"^error: .*s\.yaml: training\.lr: Input should be a finite number \(got inf\)$"),
        (_doc(algorithms=[{"name": "ucfl", "params": {"streams": 5}}]), r"^error: .*s\.yaml: algorithms\[0\]\.params\.streams: 5 is more than one stream per user \(data\.clients = 4\); at most 4$"),
        (_doc(seeds=list(range(1001))), r"^error: .*s\.yaml: seeds: List should have at most 1000 items after validation, not 1001$"),
        (_doc(description="x" * 1_000_001), r"^error: .*s\.yaml: the file is over 1,000,000 bytes; a scenario is a short file of settings$"),
    ],
    ids=["inf lr", "streams above users", "too many seeds", "oversized file"],
)
def test_hostile_scenarios_are_one_line_with_the_file_and_exit_2(tmp_path, content, message):
    path = tmp_path / "s.yaml"
    path.write_bytes(content)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output.strip()) and len(result.output.strip().splitlines()) == 1, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize(
    "text, shown",
    [
        ('"ten"', "Input should be a valid integer (got 'ten')"),
        ("true", "Input should be a valid integer (got True)"),
        ("1e12", "Input should be a valid integer (got 1000000000000.0)"),
        ("0", "Input should be greater than or equal to 1 (got 0)"),
    ],
)
def test_an_override_does_not_hide_a_bad_value_in_the_file(tmp_path, text, shown):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO).replace("rounds: 2", f"rounds: {text}"))
    result = runner.invoke(app, ["simulate", str(path), "--rounds", "1", "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: rounds: {shown}"
    assert not (tmp_path / "out").exists()


def test_a_set_value_with_thousands_of_digits_is_one_line(tmp_path):
    path = _write(tmp_path, SCENARIO)
    setting = "training.batch_size=" + "9" * 5000
    result = runner.invoke(app, ["validate", str(path), "--set", setting])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {path}: --set {setting[:57]}...: the value has more digits than a number may have here (at most 4300)"
    )


def test_a_deadline_that_drops_uploads_is_said_on_the_console_and_in_the_summary(tmp_path):
    doc = {**SCENARIO, "algorithms": [{"name": "fedavg"}, {"name": "local"}], "networks": [{"preset": "slow-ul-unreliable", "deadline": 8}]}
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    trace = pd.read_csv(out / "trace.csv")
    fedavg = trace[(trace["curve"] == "fedavg") & (trace["round"] > 0)]
    share = (fedavg["aggregated"] / fedavg["participants"]).mean()
    assert share < 0.8
    line = (
        "warning: on slow-ul-unreliable, under 80% of the participants' uploads were aggregated per round "
        f"(missed the deadline): fedavg {100 * share:.0f}%"
    )
    assert line in result.output.splitlines()
    summary = (out / "summary.md").read_text()
    assert f"- **warning** {line.removeprefix('warning: ')}" in summary
    assert re.search(rf"\| fedavg \| slow-ul-unreliable \| 2 \| [\d.]+ T_dl \|.*\| {100 * share:.1f} \|", summary)
    assert re.search(r"\| local \| slow-ul-unreliable \| .* \| n/a \|$", summary, re.M)


def test_curves_still_moving_at_the_end_are_said_on_the_console_and_in_the_summary(tmp_path):
    doc = {**SCENARIO, "rounds": 12, "algorithms": [{"name": "fedavg"}, {"name": "local"}], "networks": [{"preset": "wired"}]}
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    trace = pd.read_csv(out / "trace.csv")
    mean = trace.groupby(["curve", "round"])["avg_acc"].mean()
    moved = {curve: 100 * (mean[curve, 12] - mean[curve, 2]) for curve in ("fedavg", "local")}
    assert any(abs(change) > 1 for change in moved.values())  # 12 rounds on 30 samples a client: still learning
    named = ", ".join(f"{curve} {change:+.1f}" for curve, change in moved.items() if abs(change) > 1)
    line = (
        "warning: on wired, still moving by more than 1 point over the last 10 rounds (mean over seeds): "
        f"{named}; the round budget, not convergence, ranks these"
    )
    assert line in result.output.splitlines()
    assert f"- **warning** {line.removeprefix('warning: ')}" in (out / "summary.md").read_text()


TWO_STREAMS_FOUR_GROUPS = {
    **SCENARIO,
    "rounds": 1,
    "data": {**SCENARIO["data"], "clients": 8, "partition": [{"name": "iid"}, {"name": "label_permutation", "groups": 4}]},
    "algorithms": [{"name": "ucfl", "params": {"streams": 2, "temperature": 1.0}}],
    "networks": [{"preset": "wired"}],
}
"""UCFL with 2 streams for 4 label groups: streams that cannot follow the groups, so a streams section with a warning."""


def test_the_console_shows_percent_and_time_units_and_stream_warnings(tmp_path):
    doc = TWO_STREAMS_FOUR_GROUPS
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    trace = pd.read_csv(tmp_path / "out" / "trace.csv")
    last = trace[trace["round"] == 1].iloc[0]
    assert f"{100 * last['avg_acc']:.1f}" in result.output and f"{last['time']:.1f} T_dl" in result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ucfl: streams ")]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert len(warnings) == 1 and f"- **warning** {warnings[0].removeprefix('warning: ')}" in summary


def test_report_keeps_the_streams_section_of_a_run_whose_diagnostics_are_gone(tmp_path):
    doc = TWO_STREAMS_FOUR_GROUPS
    out = tmp_path / "out"
    assert runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(out), "--quiet"]).exit_code == 0

    def streams(text):
        return text[text.index("## Streams and clusters") : text.index("\n## ", text.index("## Streams and clusters"))]

    section = streams((out / "summary.md").read_text())
    assert "| ucfl | 0 | 1 | 2 |" in section
    note = "- streams and clusters: kept from the previous summary.md (no diagnostics.json in this run directory to remake them)"
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    assert note not in (out / "summary.md").read_text()  # remade from diagnostics.json
    (out / "diagnostics.json").unlink()  # a copy of the traces only, as docs/runs keeps some runs
    for _ in range(2):
        assert runner.invoke(app, ["report", str(out)]).exit_code == 0
        text = (out / "summary.md").read_text()
        assert streams(text) == section and text.count(note) == 1


def test_the_paired_ranking_says_whether_the_curves_shared_their_draws_from_provenance_json(tmp_path):
    """A finished run records its seeding; a folder without the record (made before it existed, when each
    algorithm drew its own numbers) keeps its ranking, worded for separate draws, and no summary claims otherwise."""
    out = tmp_path / "out"
    doc = {**SCENARIO, "seeds": [0, 1], "networks": [{"preset": "wired"}]}
    assert runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(out), "--quiet"]).exit_code == 0
    assert read_provenance(out) == {"seeding": "common-random-numbers"}

    def ranking():
        text = (out / "summary.md").read_text()
        return text[text.index("## Ranking, paired by seed") : text.index("\n## ", text.index("## Ranking"))]

    made = ranking()
    assert SHARED_DRAWS_TEXT in made and SEPARATE_DRAWS_TEXT not in made
    (out / PROVENANCE_FILE).unlink()
    assert read_provenance(out) == {}
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    old = ranking()
    assert SEPARATE_DRAWS_TEXT in old and SHARED_DRAWS_TEXT not in old
    assert old.replace(SEPARATE_DRAWS_TEXT, SHARED_DRAWS_TEXT) == made  # the same numbers, worded for their draws
    (out / PROVENANCE_FILE).write_text(json.dumps({"seeding": "common-random-numbers"}))
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    assert ranking() == made
    (out / PROVENANCE_FILE).write_text("[]")
    broken = runner.invoke(app, ["report", str(out)])
    assert broken.exit_code == 2 and broken.output.strip() == (
        f'error: {out / PROVENANCE_FILE}: must be a JSON object such as {{"seeding": "common-random-numbers"}}, got []'
    )
    assert ranking() == made  # nothing rewritten
    (out / PROVENANCE_FILE).write_text("{")
    broken = runner.invoke(app, ["report", str(out)])
    assert broken.exit_code == 2 and broken.output.startswith(f"error: {out / PROVENANCE_FILE}: not JSON (")


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"wirelessfl {version('wirelessfl')}"


def test_list_shows_bracketed_text_as_text():
    result = runner.invoke(app, ["list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert "2x [conv64 5x5 + maxpool 3x3/2], fc384, fc192, fc" in result.output


def test_a_user_model_named_by_import_path_trains_end_to_end(tmp_path):
    """``model: {name: package.module:factory}``: a model with dropout the engine has never seen, through `simulate`."""
    doc = {**SCENARIO, "model": {"name": "examples.user_models:two_conv_dropout", "options": {"width": 4, "hidden": 16}},
           "algorithms": [{"name": "fedavg"}, {"name": "fedper"}], "networks": [{"preset": "wired"}]}
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    trace = pd.read_csv(out / "trace.csv")
    assert set(trace["algorithm"]) == {"fedavg", "fedper"} and trace["avg_acc"].between(0, 1).all()
    again = tmp_path / "again"
    assert runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--out", str(again), "--quiet"]).exit_code == 0
    pd.testing.assert_frame_equal(trace, pd.read_csv(again / "trace.csv"))  # dropout masks come from the seed


def test_an_error_naming_a_key_with_a_line_break_stays_one_line(tmp_path):
    """A key made of a tab and U+0085 (NEL, a line break to str.splitlines and to terminals) is written as its
    escapes: the error is one line (found by tests/test_fuzz_scenarios.py)."""
    doc = {**SCENARIO, "model": {**SCENARIO.get("model", {"name": "mlp"}), "\t\x85": None}}
    result = runner.invoke(app, ["validate", str(_write(tmp_path, doc))])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "model.\\t\\x85" in lines[0], result.output
