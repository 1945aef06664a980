"""The co-simulation loop: replay equals per-profile training, resume is exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import parse_scenario
from wirelessfl.network import NetworkModel, PRESETS
from wirelessfl.seam import CommPlan, Stream
from wirelessfl.simulate import simulate

TINY = {
    "name": "tiny",
    "rounds": 3,
    "data": {
        "dataset": "digits",
        "clients": 6,
        "samples": {"per_client": 30},
        "partition": [{"name": "iid"}, {"name": "rotation", "groups": 2}],
    },
    "model": {"name": "mlp"},
    "training": {"batch_size": 10, "lr": 0.05},
    "algorithms": [{"name": "fedavg"}, {"name": "oracle"}, {"name": "local"}],
    "networks": [{"preset": "slow-ul-unreliable"}, {"preset": "wired"}],
    "device": "cpu",
}


@pytest.fixture(scope="module")
def replayed():
    return simulate(parse_scenario(TINY))


def test_replay_trains_once_per_curve(replayed):
    assert replayed.replayed and replayed.trained_units == 3
    trace = replayed.trace
    assert len(trace) == 3 * 2 * (3 + 1)
    assert set(trace.profile) == {"slow-ul-unreliable", "wired"}


def test_replay_equals_training_per_profile(replayed):
    per_profile = simulate(parse_scenario(TINY), force_per_profile=True)
    assert per_profile.trained_units == 6 and not per_profile.replayed
    key = ["curve", "profile", "seed", "round"]
    a = replayed.trace.sort_values(key).reset_index(drop=True)
    b = per_profile.trace.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_time_is_monotone_and_accuracies_are_probabilities(replayed):
    for _, group in replayed.trace.groupby(["curve", "profile", "seed"]):
        assert group["time"].is_monotonic_increasing
        assert group["round"].tolist() == [0, 1, 2, 3]
    acc = replayed.trace[["avg_acc", "worst_acc", "p10_acc"]].to_numpy()
    assert ((acc >= 0) & (acc <= 1)).all()
    assert (replayed.trace.worst_acc <= replayed.trace.p10_acc + 1e-12).all()


def test_slower_profile_is_later_for_the_same_rounds(replayed):
    trace = replayed.trace[replayed.trace.curve == "fedavg"].set_index(["profile", "round"])["time"]
    for r in (1, 2, 3):
        assert trace[("slow-ul-unreliable", r)] > trace[("wired", r)]


def test_extra_streams_cost_relatively_more_on_wired_than_on_slow_uplink():
    m = 20
    rng = np.random.default_rng(0)

    def mean_round(preset: str, k: int) -> float:
        groups = np.array_split(np.arange(m), k)
        plan = CommPlan(
            streams=tuple(Stream(1.0, frozenset(int(i) for i in g)) for g in groups),
            uplink={i: 1.0 for i in range(m)},
            work={i: 1.0 for i in range(m)},
        )
        net = NetworkModel(PRESETS[preset], m, rng)
        return float(np.mean([net.time_round(plan, np.random.default_rng(s)).t_end for s in range(200)]))

    relative = {p: mean_round(p, m) / mean_round(p, 1) for p in ("wired", "slow-ul-unreliable")}
    assert relative["wired"] > relative["slow-ul-unreliable"] > 1.0


def test_interrupted_run_resumes_to_the_identical_trace(tmp_path, replayed):
    scenario = parse_scenario({**TINY, "checkpoint_every": 1})
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir=tmp_path, stop_after_rounds=5)
    assert list((tmp_path / "checkpoints").glob("*.safetensors"))
    resumed = simulate(scenario, run_dir=tmp_path)
    assert resumed.trained_units == 2
    pd.testing.assert_frame_equal(resumed.trace, replayed.trace)
    assert set(resumed.runtime) == set(replayed.runtime)
    for key, runtime in resumed.runtime.items():
        assert runtime["wall_s"] > 0 and runtime["rounds"] == scenario.rounds
        assert runtime["samples_per_s"] == pytest.approx(runtime["rounds"] * runtime["train_samples_per_round"] / runtime["wall_s"])


def test_same_seed_same_trace(replayed):
    again = simulate(parse_scenario(TINY))
    pd.testing.assert_frame_equal(again.trace, replayed.trace)


def test_deadline_trains_per_profile_and_drops_stragglers():
    doc = {
        **TINY,
        "algorithms": [{"name": "fedavg"}],
        "networks": [{"preset": "slow-ul-unreliable", "name": "tight", "deadline": 3.0}, {"preset": "wired"}],
    }
    result = simulate(parse_scenario(doc))
    assert not result.replayed and result.trained_units == 2
    trace = result.trace[result.trace["round"] > 0]
    tight = trace[trace.profile == "tight"]
    assert (tight.round_time <= 3.0 + 1e-9).all()
    assert (tight.aggregated < 6).any()
    assert (trace[trace.profile == "wired"].aggregated == 6).all()


def test_ucfl_weight_round_happens_in_the_loop_and_k_streams_follow():
    doc = {
        **TINY,
        "rounds": 4,
        "algorithms": [{"name": "ucfl", "params": {"warmup_rounds": 1}, "variants": {"streams": [2, "m"]}}],
        "networks": [{"preset": "wired"}],
    }
    result = simulate(parse_scenario(doc))
    trace = result.trace.set_index(["curve", "round"])
    for curve, k in (("ucfl streams=2", 2), ("ucfl streams=m", 6)):
        assert trace.loc[(curve, 1), "streams"] == 1  # FedAvg warm-up round
        assert trace.loc[(curve, 2), "streams"] == 1  # theta_hat broadcast, gradients up
        assert np.isnan(trace.loc[(curve, 2), "train_loss"])
        assert trace.loc[(curve, 3), "streams"] == 0  # every stream is still theta_hat, which all got in round 2
        assert trace.loc[(curve, 4), "streams"] == k
        assert result.diagnostics[f"seed0__ucfl_streams_{k if k == 2 else 'm'}"][2]["estimated"]
    wired_round = trace.xs(4, level="round")["round_time"]
    assert wired_round["ucfl streams=m"] - wired_round["ucfl streams=2"] == pytest.approx(4.0)


def test_kept_optimizer_state_is_checkpointed_and_resumes_to_the_identical_trace(tmp_path):
    """Adam moments kept between rounds live in the checkpoint (FedAvg+'s fine-tuning moments too, kept between
    evaluations while it follows FedAvg): a killed run resumes to the same trace, and the kept state changes the
    result (so the test would notice a checkpoint without it)."""
    doc = {
        **TINY,
        "rounds": 4,
        "checkpoint_every": 1,
        "training": {"batch_size": 10, "optimizer": "adam", "lr": 0.01, "keep_optimizer_state": True},
        "algorithms": [{"name": "fedavg"}, {"name": "local"}, {"name": "fedem", "params": {"components": 2}}, {"name": "fedavg_ft"}],
        "networks": [{"preset": "wired"}],
    }
    scenario = parse_scenario(doc)
    whole = simulate(scenario)
    for stop in (2, 6, 10):  # killed inside the units of fedavg (with FedAvg+ following it), local, fedem
        with pytest.raises(KeyboardInterrupt):
            simulate(scenario, run_dir=tmp_path / str(stop), stop_after_rounds=stop)
        resumed = simulate(scenario, run_dir=tmp_path / str(stop))
        pd.testing.assert_frame_equal(resumed.trace, whole.trace)
    fresh = simulate(parse_scenario({**doc, "training": {**doc["training"], "keep_optimizer_state": False}}))
    assert not np.allclose(fresh.trace.avg_acc.to_numpy(), whole.trace.avg_acc.to_numpy(), equal_nan=True)


@pytest.mark.parametrize(
    ("algorithm", "label"),
    [
        ({"name": "ucfl", "params": {"streams": 2}}, "ucfl estimation"),
        ({"name": "fedfomo"}, "fedfomo validation"),
        ({"name": "cfl", "params": {"min_rounds_before_split": 0}}, "cfl split test"),
        ({"name": "ifca", "params": {"clusters": 2}}, "ifca cluster losses"),
        ({"name": "fedem", "params": {"components": 2}}, "fedem e-step"),
        ({"name": "pflego"}, "pflego head steps"),
    ],
)
def test_runtime_names_each_algorithms_own_pass(algorithm, label):
    result = simulate(parse_scenario({**TINY, "rounds": 2, "algorithms": [algorithm], "networks": [{"preset": "wired"}]}))
    (unit,) = result.runtime.values()
    assert unit["phases"].get(label, 0.0) > 0.0, unit["phases"]
    assert unit["phases"]["evaluation"] > 0.0


def _cell_run(tmp_path, name: str):
    """scenarios/<name>.yaml cut to 2 rounds and one seed: seconds, every round finite and positive; its outputs
    (no figures) written to ``tmp_path``; returns the scenario and the result."""
    from wirelessfl.config import load_scenario
    from wirelessfl.results.run_outputs import write_run_outputs

    path = Path(__file__).resolve().parents[1] / "scenarios" / f"{name}.yaml"
    scenario = load_scenario(path, {"rounds": 2, "seeds": [0]})
    result = simulate(scenario)
    trace = result.trace
    assert set(trace["time_unit"]) == {"s"}
    assert np.isfinite(trace["time"]).all() and (trace.loc[trace["round"] > 0, "round_time"] > 0).all()
    write_run_outputs(tmp_path, scenario, result, 1.0, figures="none")
    return scenario, result


def _cell_summary(tmp_path, name: str) -> list[str]:
    """summary.md's lines of :func:`_cell_run`."""
    _cell_run(tmp_path, name)
    return (tmp_path / "summary.md").read_text().splitlines()


@pytest.fixture(scope="module")
def uma_cell(tmp_path_factory):
    """scenarios/uma-cell.yaml through :func:`_cell_run` once, for the tests that read its outputs."""
    out = tmp_path_factory.mktemp("uma-cell")
    scenario, result = _cell_run(out, "uma-cell")
    return out, scenario, result


def test_the_uma_cell_scenario_runs_in_seconds(uma_cell):
    """scenarios/uma-cell.yaml: TR 38.901 UMa, walking users, truncated Shannon, coverage multicast with
    unicast repairs; summary.md names the channel."""
    out, _, _ = uma_cell
    assert (
        "- uma-walking: cell 35-500 m, TR 38.901 UMa at 3.5 GHz (with shadowing), Rayleigh fading in 25.9 ms blocks "
        "(1.4 m/s), TR 36.942 truncated Shannon rates, 20 MHz, coverage multicast (q = 0.9, unicast repairs)."
    ) in (out / "summary.md").read_text().splitlines()


def test_the_nr_cell_scenario_runs_and_names_its_link(tmp_path):
    """scenarios/nr-cell.yaml: the NR link of Sionna SYS with a shared uplink; summary.md names the link
    model with Sionna's version."""
    from wirelessfl.network import nr

    if nr.find_sionna() is None:
        pytest.skip("sionna-no-rt is not installed (pip install -e .)")
    assert (
        f"- nr-worst-user: cell 35-300 m, TR 38.901 UMa at 3.5 GHz (with shadowing), Rayleigh fading in 25.9 ms blocks "
        f"(1.4 m/s), 5G NR (Sionna SYS {nr.sionna_version()}, MCS table 1, BLER target 0.1, 3 HARQ retransmissions, "
        f"30 kHz) rates, 20 MHz, worst-user multicast, one uplink carrier shared equally by concurrent uploaders."
    ) in _cell_summary(tmp_path, "nr-cell")


def test_the_nr_multicell_scenario_runs_and_names_its_layout(tmp_path):
    """scenarios/nr-multicell.yaml: 7 sites x 3 sectors with interference, the calibration link budget and the
    NR link; every round finite, and summary.md names the layout."""
    from wirelessfl.network import nr

    if nr.find_sionna() is None:
        pytest.skip("sionna-no-rt is not installed (pip install -e .)")
    lines = _cell_summary(tmp_path, "nr-multicell")
    assert any(line.startswith(
        "- multicell-worst-user: 7 sites x 3 sectors at 500 m ISD with wraparound, neighbours at load 0.5, users of the "
        "centre site, TR 38.901 UMa at 3.5 GHz (with shadowing), Rayleigh fading in 25.9 ms blocks (1.4 m/s) over 8 subbands, 5G NR"
    ) for line in lines)


def test_a_physical_run_reports_every_stream_on_the_air(uma_cell, replayed, tmp_path):
    """streams_link.csv: one row per stream of every round, whose bits add up to the trace's downlink bits,
    and one summary.md line per physical profile; a normalised run (TINY's presets) writes none."""
    from wirelessfl.results.run_outputs import write_run_outputs

    out, _, result = uma_cell
    links = pd.read_csv(out / "streams_link.csv")
    per_round = links.groupby(["curve", "profile", "seed", "round"])["bits"].sum()
    trace = result.trace[result.trace["round"] > 0].set_index(["curve", "profile", "seed", "round"])["dl_bits"]
    pd.testing.assert_series_equal(per_round.sort_index(), trace[trace > 0].sort_index(), check_names=False)
    assert list(links.columns) == [
        "curve", "profile", "link", "seed", "round", "stream", "receivers", "bits", "seconds", "rate_mbps", "repair_bits", "repaired",
    ]
    assert set(links["link"]) == {"truncated_shannon"}  # uma-cell.yaml's link model
    assert (links["rate_mbps"] > 0).all() and (links["seconds"] >= links["bits"] / (1e6 * links["rate_mbps"]) - 1e-9).all()
    records = result.links.set_index(["curve", "profile", "seed", "round", "stream"])["rate_bps"]
    written = links.set_index(["curve", "profile", "seed", "round", "stream"])["rate_mbps"]
    np.testing.assert_allclose(written.to_numpy(), records.loc[written.index].to_numpy() / 1e6, rtol=1e-12)
    assert any(line.startswith("- uma-walking streams (streams_link.csv): median rate ") for line in (out / "summary.md").read_text().splitlines())
    write_run_outputs(tmp_path, parse_scenario(TINY), replayed, 1.0, figures="none")
    assert (tmp_path / "summary.md").is_file() and not (tmp_path / "streams_link.csv").exists()


def test_eval_last_evaluates_the_last_rounds_besides_every_eval_every_th_and_changes_nothing_else():
    base = {**TINY, "rounds": 6, "eval_every": 3, "algorithms": [{"name": "fedavg"}], "networks": [{"preset": "wired"}]}
    sparse = simulate(parse_scenario(base)).trace
    dense = simulate(parse_scenario({**base, "eval_last": 2})).trace
    assert dense.loc[dense.avg_acc.notna(), "round"].tolist() == [0, 3, 5, 6]
    assert sparse.loc[sparse.avg_acc.notna(), "round"].tolist() == [0, 3, 6]
    pd.testing.assert_series_equal(sparse.train_loss, dense.train_loss)
    both = sparse.avg_acc.notna()
    pd.testing.assert_series_equal(sparse.avg_acc[both], dense.avg_acc[both])


def test_eval_last_zero_is_written_to_the_resolved_scenario_and_fingerprints_stay():
    from wirelessfl.config import canonical, dump_scenario, scenario_fingerprint

    assert "\neval_last: 0\n" in dump_scenario(parse_scenario(TINY))
    assert "eval_last" not in canonical(parse_scenario(TINY))
    assert scenario_fingerprint(parse_scenario(TINY)) == scenario_fingerprint(parse_scenario({**TINY, "eval_last": 0}))
    assert "eval_last: 10" in dump_scenario(parse_scenario({**TINY, "eval_last": 10}))


def test_an_lr_schedule_sets_each_rounds_client_rate(monkeypatch):
    """milestones [1, 3], gamma 0.5, base lr 0.05: round 1 trains at 0.05, rounds 2-3 at 0.025, round 4 at 0.0125,
    for the curve that trains and for the fine-tuning of the FedAvg+ that follows it (evaluated every round)."""
    from wirelessfl.learning.lockstep import LockstepEngine

    rates: list[tuple[int, float]] = []
    original = LockstepEngine.train

    def recording(self, params, datasets, cfg, *args, **kwargs):
        rates.append((len(datasets), cfg.lr))
        return original(self, params, datasets, cfg, *args, **kwargs)

    monkeypatch.setattr(LockstepEngine, "train", recording)
    doc = {**TINY, "rounds": 4, "networks": [{"preset": "wired"}], "training": {"batch_size": 10, "lr": 0.05,
           "lr_schedule": {"milestones": [1, 3], "gamma": 0.5}},
           "algorithms": [{"name": "fedavg"}, {"name": "fedavg_ft"}]}  # fmt: skip
    simulate(parse_scenario(doc))
    schedule = [0.05, 0.025, 0.025, 0.0125]
    # FedAvg+ fine-tunes every client at round 0's evaluation (the base rate), then each round: FedAvg's local
    # training, then FedAvg+'s fine-tuning at that round's evaluation
    assert [lr for _, lr in rates] == [0.05] + [lr for lr in schedule for _ in (0, 1)]
    unscheduled = {**doc, "training": {"batch_size": 10, "lr": 0.05}}
    rates.clear()
    simulate(parse_scenario(unscheduled))
    assert {lr for _, lr in rates} == {0.05}


def test_eval_train_adds_the_fit_columns_and_changes_nothing_else():
    """Evaluating the train split reads the models only: every other column is the same number, for an
    algorithm with one model per client, FedEM's mixtures and FedAvg+ (which follows FedAvg's training)."""
    base = {
        **TINY, "algorithms": [{"name": "fedavg"}, {"name": "fedavg_ft"}, {"name": "fedem", "params": {"components": 2}}],
        "networks": [{"preset": "wired"}],
    }  # fmt: skip
    plain = simulate(parse_scenario(base)).trace
    fit = simulate(parse_scenario({**base, "eval_train": True})).trace
    assert "fit_acc" not in plain.columns and "fit_loss" not in plain.columns
    pd.testing.assert_frame_equal(fit.drop(columns=["fit_acc", "fit_loss"]), plain)
    assert fit.fit_acc.between(0, 1).all() and (fit.fit_loss > 0).all()
    assert fit.groupby("curve").fit_acc.nunique().min() > 1  # a number per round, not a constant


def test_fit_acc_tells_over_fitting_apart():
    """Local training, many epochs on 30 samples a client: every client fits its own training data (near
    100%) far better than it generalises to its test split, the textbook sign of over-fitting."""
    scenario = {
        **TINY, "rounds": 4, "training": {"batch_size": 10, "lr": 0.1, "local_epochs": 10},
        "algorithms": [{"name": "local"}], "networks": [{"preset": "wired"}], "eval_train": True,
    }  # fmt: skip
    last = simulate(parse_scenario(scenario)).trace.iloc[-1]
    assert last.fit_acc >= 0.99 and last.fit_loss < 0.1
    assert last.fit_acc - last.avg_acc > 0.15


def test_eval_train_off_is_written_to_the_resolved_scenario_and_fingerprints_stay():
    from wirelessfl.config import canonical, dump_scenario, scenario_fingerprint

    assert "\neval_train: false\n" in dump_scenario(parse_scenario(TINY))
    assert "eval_train" not in canonical(parse_scenario(TINY))
    assert scenario_fingerprint(parse_scenario(TINY)) == scenario_fingerprint(parse_scenario({**TINY, "eval_train": False}))
    assert "eval_train: true" in dump_scenario(parse_scenario({**TINY, "eval_train": True}))
