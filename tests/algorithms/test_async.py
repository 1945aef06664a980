"""Buffered asynchronous aggregation (network/buffered.py, algorithms/asynchronous.py, docs/levers.md): the
buffer's timeline and the server's staleness-weighted step by hand, a three-client timeline through the unit's
own loop (times, who is taken, staleness, base versions, model versions), FedAvg's trace exactly when the buffer
holds every participant, a checkpoint and resume byte for byte, and the refusals in one line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from wirelessfl.accounting import buffered_jobs
from wirelessfl.algorithms.asynchronous import Asynchronous, AsyncBuffer
from wirelessfl.checkpoint import load_checkpoint
from wirelessfl.cli import app
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.network.buffered import buffered_timing
from wirelessfl.run.build import build_units
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.run.curves import curves_of
from wirelessfl.run.keys import unit_fingerprint, unit_key
from wirelessfl.seam import RoundTiming
from wirelessfl.simulate import simulate
from wirelessfl.sweep import plan_sweep
from wirelessfl.sweep.grid import SweepError

from levers_cell import curve_frame, lever_scenario

SCENARIO = lever_scenario("async")


def _buffered(**fields) -> dict:
    return {"aggregation": {"mode": "async", **fields}}


def _timing(landings: dict[int, float]) -> RoundTiming:
    return RoundTiming(t_received={}, t_computed=dict(landings), t_uploaded=dict(landings), arrived=frozenset(landings),
                       t_end=max(landings.values()))


def test_the_buffer_takes_the_earliest_landings_and_carries_the_rest_by_hand():
    # three new uploads land at 3, 4.5 and 6; one from an earlier round is still 2.0 away
    timing, rest = buffered_timing(_timing({0: 3.0, 1: 4.5, 2: 6.0}), {5: 2.0}, buffer=2)
    assert timing.arrived == {5, 0} and timing.t_next == 3.0 and timing.duration == 3.0
    assert timing.t_end == 6.0 and dict(timing.t_uploaded) == {0: 3.0, 1: 4.5, 2: 6.0}  # the jobs stay whole
    assert rest == {1: 1.5, 2: 3.0}
    # a tie at the buffer's edge goes to the lower id; an upload that never lands never fills the buffer
    timing, rest = buffered_timing(_timing({4: 1.0, 3: math.inf}), {2: 1.0}, buffer=1)
    assert timing.arrived == {2} and timing.t_next == 1.0 and rest == {4: 0.0, 3: math.inf}
    timing, rest = buffered_timing(_timing({3: math.inf}), {}, buffer=1)
    assert timing.arrived == frozenset() and timing.t_next == math.inf and rest == {3: math.inf}
    with pytest.raises(ValueError, match="client 1 was dispatched again while its upload is still in flight"):
        buffered_timing(_timing({1: 1.0}), {1: 0.5}, buffer=1)


@pytest.mark.parametrize(("rule", "a", "b", "weights"), [
    ("constant", None, None, [1.0, 1.0, 1.0, 1.0]),
    ("polynomial", 0.5, None, [1.0, 2 ** -0.5, 3 ** -0.5, 0.5]),
    ("hinge", 2.0, 1, [1.0, 1.0, 1 / 3, 1 / 5]),
])
def test_the_staleness_rules_by_hand(rule, a, b, weights):
    spec = Asynchronous(buffer=1, staleness=rule, a=a, b=b)
    assert [spec.weight(sigma) for sigma in range(4)] == pytest.approx(weights, rel=1e-15)


def test_the_learning_side_refuses_a_rule_without_its_fields():
    with pytest.raises(ValueError, match="aggregation.a: staleness polynomial needs a finite decay a > 0, got None"):
        Asynchronous(buffer=1, staleness="polynomial")
    with pytest.raises(ValueError, match="aggregation.b: staleness hinge needs b >= 0, got -1"):
        Asynchronous(buffer=1, staleness="hinge", a=1.0, b=-1)
    with pytest.raises(ValueError, match="aggregation.staleness must be one of constant, polynomial, hinge, got 'linear'"):
        Asynchronous(buffer=1, staleness="linear")


def test_the_server_step_by_hand():
    # x_{t-1} = (1, 1); client 0 trained fresh on it, client 2 two versions ago on (0, 0); sizes 1 : 2 : 3
    spec = Asynchronous(buffer=2, staleness="polynomial", a=1.0, alpha=0.5)
    buffer = AsyncBuffer(spec)
    current = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    buffer.add(3, np.array([2]), torch.tensor([[2.0, 0.0]], dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64))
    buffer.add(5, np.array([0, 1]), torch.tensor([[1.0, 3.0], [9.0, 9.0]], dtype=torch.float64), current.repeat(2, 1))
    clients, trained, base, sigma = buffer.take(5, frozenset({0, 2}))
    assert clients == [0, 2] and sigma == [0, 2] and sorted(buffer.pending) == [1]
    mixing = torch.tensor([[1 / 6, 2 / 6, 3 / 6]], dtype=torch.float64)
    model, alpha_t = buffer.server_step(current, mixing, clients, trained, base, sigma)
    # s = (1, 1/3); n_K = 4: alpha_t = 0.5 (1 * 1 + 3 * 1/3) / 4 = 0.25
    assert alpha_t == pytest.approx(0.25, rel=1e-15)
    # deltas (0, 2) and (2, 0): x_t = x + 0.5 ((1/4)(0, 2) + (3/4)(1/3)(2, 0)) = (1.25, 1.25)
    assert model[0].tolist() == pytest.approx([1.25, 1.25], rel=1e-15)
    with pytest.raises(ValueError, match=r"clients \[0\] arrived without an update in flight"):
        buffer.take(6, frozenset({0}))


# Three clients on a wired link: a broadcast of 1, deterministic compute 1, 2.5 and 4, an upload of 1 on its own
# channel. Each job lands 3, 4.5 and 6 after its dispatch; the server waits for 2.
TIMELINE = {
    **SCENARIO, "rounds": 4, "data": {"dataset": "digits", "clients": 3, "samples": {"per_client": 30}},
    "networks": [{"name": "wire", "t_dl": 1.0, "rho": 1.0, "t_min": [1.0, 2.5, 4.0], "mu": [math.inf] * 3,
                  "channels": 3, "schedule": "pipelined"}],
    "algorithms": [{"name": "fedavg", "label": "buffered", "training": _buffered(buffer=2, staleness="polynomial", a=1.0)}],
}
# By hand. Round 1 (from 0): {0, 1, 2} dispatched, 0 and 1 land at 3 and 4.5: taken at 4.5, 2 is 1.5 away.
# Round 2 (from 4.5): {0, 1} dispatched; 2 lands at 1.5, 0 at 3: taken at 7.5; 1 is 1.5 away.
# Round 3 (from 7.5): {0, 2} dispatched; 1 lands at 1.5, 0 at 3: taken at 10.5; 2 is 3 away.
# Round 4 (from 10.5): {0, 1} dispatched; 0 and 2 both land at 3 and fill the buffer together; 1 is 4.5 away.
HAND = [  # (time, dispatched, taken, staleness of the taken in client order, in flight after)
    (4.5, [0, 1, 2], [0, 1], [0, 0], {2: 1}),
    (7.5, [0, 1], [0, 2], [0, 1], {1: 2}),
    (10.5, [0, 2], [0, 1], [0, 1], {2: 3}),
    (13.5, [0, 1], [0, 2], [0, 1], {1: 4}),
]


def test_a_three_client_timeline_gives_the_hand_computed_versions_and_weights():
    scenario = parse_scenario(TIMELINE)
    (unit,) = build_units(scenario, 0)
    algorithm = unit.algorithm
    taken = []
    original = algorithm.buffered.take

    def recording(round, arrived):
        result = original(round, arrived)
        taken.append(result)
        return result

    algorithm.buffered.take = recording
    sizes = torch.as_tensor(unit.data.train_sizes, dtype=torch.float64)
    versions = [algorithm.models.clone()]
    for r, (time, dispatched, clients, sigma, in_flight) in enumerate(HAND, start=1):
        assert algorithm.participants(r).tolist() == dispatched
        unit.run(r, 1)
        assert unit.clock.now == time and unit.timings[-1].arrived == set(clients)
        got_clients, trained, base, got_sigma = taken[-1]
        assert got_clients == clients and got_sigma == sigma
        # every update in flight trained on the version of the round before its dispatch
        assert {c: entry[2] for c, entry in algorithm.buffered.pending.items()} == in_flight
        for c, (_, start, dispatched_in) in algorithm.buffered.pending.items():
            assert torch.equal(start, versions[dispatched_in - 1][0])
        for row, c in enumerate(clients):
            assert torch.equal(base[row], versions[r - sigma[row] - 1][0])
        # x_r = x_{r-1} + sum_k (n_k / n_K) s_k (theta_k - x_{tau_k}), s_k = 1 / (sigma_k + 1)
        n = sizes[clients]
        s = torch.tensor([1.0 / (x + 1) for x in sigma], dtype=torch.float64)
        step = ((n * s / n.sum())[:, None] * (trained.double() - base.double())).sum(0)
        assert torch.allclose(algorithm.models[0].double(), versions[-1][0].double() + step, atol=1e-6, rtol=0)
        assert unit.records[-1].diagnostics["alpha_t"] == pytest.approx(float((n * s).sum() / n.sum()), rel=1e-12)
        versions.append(algorithm.models.clone())
    assert unit.in_flight == {1: 1.5}  # its upload of round 4 lands 4.5 after 10.5, 1.5 after 13.5
    assert not torch.equal(versions[-1], versions[-2])


def test_the_timeline_through_simulate_times_the_aggregations_and_charges_each_job_once():
    result = simulate(parse_scenario(TIMELINE))
    trace = result.trace.set_index("round")
    assert trace["time"].tolist() == [0.0, 4.5, 7.5, 10.5, 13.5]
    assert trace["aggregated"].tolist() == [0, 2, 2, 2, 2] and trace["participants"].tolist() == [0, 3, 2, 2, 2]
    assert [row["staleness"] for row in result.diagnostics["seed0__buffered__wire"].values()] == [h[3] for h in HAND]
    jobs = result.client_rounds.set_index(["round", "client"])
    # every dispatched job is charged whole in its round: its upload lands 3, 4.5 or 6 after the dispatch
    assert jobs["t_uploaded"].to_dict() == {
        (1, 0): 3.0, (1, 1): 4.5, (1, 2): 6.0, (2, 0): 3.0, (2, 1): 4.5, (3, 0): 3.0, (3, 2): 6.0, (4, 0): 3.0, (4, 1): 4.5,
    }
    assert (jobs["upload_time"] == 1.0).all()
    # each job runs from its dispatch to the aggregation that takes it (idle in between), so a client's jobs tile
    # the run: client 0 is taken in every round, 0.0 to 13.5; client 2 at 7.5 and 13.5
    span = jobs[["receive_time", "compute_time", "wait_time", "upload_time", "idle_time"]].sum(axis=1)
    assert span.to_dict() == pytest.approx({
        (1, 0): 4.5, (1, 1): 4.5, (1, 2): 7.5, (2, 0): 3.0, (2, 1): 6.0, (3, 0): 3.0, (3, 2): 6.0, (4, 0): 3.0, (4, 1): 4.5,
    }, rel=1e-12)
    # taken in its round or a later one; client 1's last upload is still in flight when the run ends
    assert jobs["arrived"].to_dict() == {
        (1, 0): True, (1, 1): True, (1, 2): True, (2, 0): True, (2, 1): True, (3, 0): True, (3, 2): True,
        (4, 0): True, (4, 1): False,
    }


def test_each_job_is_followed_to_the_aggregation_that_takes_it():
    rounds = [
        RoundTiming({}, {0: 1.0, 1: 1.0, 2: 1.0}, {0: 0.5, 1: 1.0, 2: 3.0}, frozenset({0, 1}), 3.0, t_next=1.0),
        RoundTiming({}, {0: 1.0, 1: 1.0}, {0: 0.5, 1: 2.5}, frozenset({0, 2}), 2.5, t_next=2.0),
        RoundTiming({}, {0: 1.0, 2: 1.0}, {0: 0.25, 2: 4.0}, frozenset({0}), 4.0, t_next=0.25),
    ]
    arrivals, ends = buffered_jobs(rounds)
    assert arrivals == [frozenset({0, 1, 2}), frozenset({0}), frozenset({0})]
    # client 2's first job runs to the aggregation of round 2 (1.0 + 2.0); client 1's last and client 2's last
    # are in flight at the end: to their landings
    assert ends == [{0: 1.0, 1: 1.0, 2: 3.0}, {0: 2.0, 1: 2.5}, {0: 0.25, 2: 4.0}]


def test_a_job_whose_upload_never_lands_is_charged_to_the_runs_end():
    """Client 1's upload is in outage (t_uploaded inf): it stays in flight, keeps trying, and its job ends with
    the run (0.5 + 2.0), not at infinity."""
    rounds = [
        RoundTiming({}, {0: 0.25, 1: 0.25}, {0: 0.5, 1: math.inf}, frozenset({0}), math.inf, t_next=0.5),
        RoundTiming({}, {0: 1.0}, {0: 2.0}, frozenset({0}), 2.0, t_next=2.0),
    ]
    arrivals, ends = buffered_jobs(rounds)
    assert arrivals == [frozenset({0}), frozenset({0})]
    assert ends == [{0: 0.5, 1: 2.5}, {0: 2.0}]


def test_a_buffer_of_every_participant_gives_fedavgs_trace_exactly():
    doc = {**SCENARIO, "algorithms": [
        {"name": "fedavg"},
        {"name": "fedavg", "label": "all-constant", "training": _buffered(buffer=6)},
        {"name": "fedavg", "label": "all-hinge", "training": _buffered(buffer=6, staleness="hinge", a=3.0, b=0)},
    ]}
    trace = simulate(parse_scenario(doc)).trace
    for label in ("all-constant", "all-hinge"):  # every update is fresh: no rule decays it
        pd.testing.assert_frame_equal(curve_frame(trace, label), curve_frame(trace, "fedavg"), check_exact=True)


def test_a_buffer_of_every_participant_under_partial_participation_gives_fedavgs_trace_exactly():
    doc = {**SCENARIO, "networks": [{"preset": "wired"}], "training": {**SCENARIO["training"], "participation": 0.5},
           "algorithms": [{"name": "fedavg"}, {"name": "fedavg", "label": "all", "training": _buffered(buffer=3)}]}
    trace = simulate(parse_scenario(doc)).trace
    pd.testing.assert_frame_equal(curve_frame(trace, "all"), curve_frame(trace, "fedavg"), check_exact=True)
    assert (trace[trace["round"] > 0]["participants"] == 3).all()


def test_updates_in_flight_survive_a_checkpoint_and_resume_byte_for_byte(tmp_path):
    doc = {**TIMELINE, "checkpoint_every": 1}
    scenario = parse_scenario(doc)
    whole = simulate(scenario, run_dir=tmp_path / "whole", keep_models=True)
    with pytest.raises(KeyboardInterrupt):
        simulate(scenario, run_dir=tmp_path / "cut", keep_models=True, stop_after_rounds=3)
    partial = _state(tmp_path / "cut", scenario, "partial")
    assert partial["records"][-1].round == 2 and partial["in_flight"] == {"1": 1.5}
    assert np.asarray(partial["algorithm"]["async_buffer"]["clients"]).tolist() == [1]
    resumed = simulate(scenario, run_dir=tmp_path / "cut")
    pd.testing.assert_frame_equal(resumed.trace, whole.trace, check_exact=True)
    pd.testing.assert_frame_equal(resumed.client_rounds, whole.client_rounds, check_exact=True)
    ours, theirs = _state(tmp_path / "cut", scenario, "done"), _state(tmp_path / "whole", scenario, "done")
    assert ours["algorithm"]["models"].numpy().tobytes() == theirs["algorithm"]["models"].numpy().tobytes()
    for name in ("trained", "base"):
        a, b = ours["algorithm"]["async_buffer"][name], theirs["algorithm"]["async_buffer"][name]
        assert a.numpy().tobytes() == b.numpy().tobytes()


def _state(run_dir, scenario, kind):
    (curve,) = curves_of(scenario)
    profile = scenario.profiles()[0]
    stamp = unit_fingerprint(scenario, curve, 0)
    name = unit_key(0, curve, profile)
    return load_checkpoint(run_dir / "checkpoints" / f"{name}.{kind}.safetensors", CHECKPOINT_TYPES, (stamp,), PROVENANCE)


runner = CliRunner()
WIRED = {**SCENARIO, "rounds": 1, "networks": [{"preset": "wired"}]}


@pytest.mark.parametrize(("training", "algorithm", "line"), [
    (_buffered(buffer=7), "fedavg", "training.aggregation.buffer: 7 is more than the clients (data.clients = 6); at most 6"),
    ({"participation": 0.5, **_buffered(buffer=4)}, "fedavg",
     "training.aggregation.buffer: 4 is more than the clients of a round (3: participation 0.5 of 6 training clients); at most 3"),
    (_buffered(buffer=0), "fedavg", "training.aggregation.buffer: must be at least 1 upload, got 0"),
    (_buffered(buffer=2, staleness="linear"), "fedavg",
     "training.aggregation.staleness: Input should be 'constant', 'polynomial' or 'hinge' (got 'linear')"),
    (_buffered(buffer=2, staleness="polynomial", a=-1.0), "fedavg", "training.aggregation.a: must be a finite decay > 0, got -1.0"),
    (_buffered(buffer=2, staleness="hinge", a=1.0, b=-2), "fedavg",
     "training.aggregation.b: must be a number of aggregations >= 0, got -2"),
    (_buffered(buffer=2, alpha=1.5), "fedavg", "training.aggregation.alpha: must be in (0, 1] (the server's mixing rate), got 1.5"),
    (_buffered(buffer=2, staleness="polynomial"), "fedavg", "training.aggregation: staleness polynomial needs a: (the decay, > 0)"),
    ({"aggregation": {"mode": "digital", "buffer": 2}}, "fedavg", "training.aggregation: buffer: only mode: async takes it"),
    (_buffered(buffer=2), "fedper",
     "algorithms[0]: fedper: training.aggregation does not apply to fedper; it applies to fedavg, fedavg_ft"),
    ({"scheduling": {"policy": "random", "k": 3}, **_buffered(buffer=2)}, "fedavg",
     "training.aggregation.mode: async dispatches every idle client as soon as its update is taken; remove training.scheduling"),
])
def test_bad_async_is_one_line_exit_2_and_writes_nothing(tmp_path, training, algorithm, line):
    source = tmp_path / "async.yaml"
    source.write_text(yaml.safe_dump({**WIRED, "training": training, "algorithms": [{"name": algorithm}]}))
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", str(source), "--out", str(out), "--quiet"])
    assert result.exit_code == 2 and not out.exists()
    assert result.output.strip().splitlines() == [f"error: {source}: {line}"]


def test_async_refuses_a_deadline_in_one_line():
    doc = {**WIRED, "training": _buffered(buffer=2), "algorithms": [{"name": "fedavg"}],
           "networks": [{"preset": "wired", "deadline": 5.0}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == (
        "scenario: training.aggregation.mode: async has no round deadline (the buffer ends a round); "
        "networks[0] ('wired') sets a deadline"
    )


def test_the_buffer_is_a_sweep_axis_that_keeps_the_rule_and_refuses_too_large_a_buffer():
    doc = {**WIRED, "algorithms": [
        {"name": "fedavg"}, {"name": "fedavg", "label": "fedbuff", "training": _buffered(buffer=6, staleness="polynomial", a=0.5)},
    ]}
    plan = plan_sweep(parse_scenario(doc), {"algorithms.fedbuff.training.aggregation.buffer": [1, 3]})
    assert [u.scenario.algorithms[1].training["aggregation"] for u in plan.units] == [
        {"mode": "async", "buffer": 1, "staleness": "polynomial", "a": 0.5},
        {"mode": "async", "buffer": 3, "staleness": "polynomial", "a": 0.5},
    ]
    assert plan.units[0].scenario.algorithms[0].training is None
    with pytest.raises(SweepError) as err:
        plan_sweep(parse_scenario(doc), {"algorithms.fedbuff.training.aggregation.buffer": [7]})
    assert str(err.value) == (
        "--grid algorithms.fedbuff.training.aggregation.buffer=7: algorithms[1].training.aggregation.buffer: "
        "7 is more than the clients (data.clients = 6); at most 6"
    )


def test_the_cost_preview_charges_an_async_curve_the_clients_it_dispatches():
    """By hand, 3 rounds of 6 clients: FedAvg trains 3 x 6 = 18 clients' samples; with a buffer of 2, 6 in round 1
    and 2 in each of the others, 10. Evaluation is charged alike."""
    from wirelessfl import cost
    from wirelessfl.learning.data.federated import build_federated_data
    from wirelessfl.learning.models import get_architecture

    def estimate(training: dict | None) -> tuple[float, float]:
        scenario = parse_scenario({**WIRED, "rounds": 3, "algorithms": [{"name": "fedavg", "training": training}]})
        data = build_federated_data(scenario.data_spec(), 0)
        arch = get_architecture("mlp", (1, 8, 8), 10)
        seconds = cost.estimate_seconds(scenario, data, arch, cost.Throughput(samples_per_s=1000.0, eval_call_s=0.0))
        return seconds, float(data.train_sizes.mean())

    (full, per_client), (buffered, _) = estimate(None), estimate(_buffered(buffer=2))
    assert full - buffered == pytest.approx((18 - 10) * per_client / 1000.0, rel=1e-12)


def test_an_over_the_air_scenario_keeps_its_stamp_and_its_written_form():
    """The async fields are left out of a digital or over-the-air block's fingerprint and scenario.yaml, so run
    folders, sweeps and tunings written before they existed still hold the same scenario; an async block
    writes every field."""
    from wirelessfl.config import dump_scenario, scenario_fingerprint

    ota = parse_scenario({**SCENARIO, "training": {"aggregation": {"mode": "over_the_air", "truncation_db": 0}},
                          "algorithms": [{"name": "fedavg"}]})
    # computed by the code before async aggregation existed
    assert scenario_fingerprint(ota) == "3ae62c796ba1f35eaf1019b8d027b0dd7b083f8035a95c9f13f18fd38c45a003"
    assert yaml.safe_load(dump_scenario(ota))["training"]["aggregation"] == {
        "mode": "over_the_air", "truncation_db": 0.0, "receiver_noise": True,
    }
    buffered = parse_scenario({**SCENARIO, "training": _buffered(buffer=2), "algorithms": [{"name": "fedavg"}]})
    assert yaml.safe_load(dump_scenario(buffered))["training"]["aggregation"] == {
        "mode": "async", "truncation_db": None, "receiver_noise": True, "buffer": 2, "staleness": None, "a": None, "b": None,
        "alpha": None,
    }


def test_a_run_extended_to_more_rounds_continues_its_updates_in_flight(tmp_path):
    from wirelessfl.config import dump_scenario
    from wirelessfl.results.io import atomic_write_text
    from wirelessfl.run.extend import extend_run

    whole = simulate(parse_scenario(TIMELINE))
    shorter = parse_scenario({**TIMELINE, "rounds": 2})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    atomic_write_text(run_dir / "scenario.yaml", dump_scenario(shorter))
    simulate(shorter, run_dir, keep_models=True)
    longer = extend_run(run_dir, 4)
    extended = simulate(longer, run_dir, keep_models=True)
    pd.testing.assert_frame_equal(extended.trace.drop(columns="scenario"), whole.trace.drop(columns="scenario"), check_exact=True)
    pd.testing.assert_frame_equal(
        extended.client_rounds.drop(columns="scenario"), whole.client_rounds.drop(columns="scenario"), check_exact=True
    )


def test_partial_participation_keeps_the_rounds_count_in_flight_topped_up_from_the_idle_clients():
    """participation 0.5 of 6: 3 clients in flight; a buffer of 1 takes one update a round, and the round after
    dispatches one client drawn from the 4 idle ones by the seeded participation stream."""
    from wirelessfl.algorithms.base import numpy_generator

    doc = {**SCENARIO, "rounds": 4, "networks": [{"preset": "wired"}], "training": {**SCENARIO["training"], "participation": 0.5,
           **_buffered(buffer=1)}, "algorithms": [{"name": "fedavg"}]}
    (unit,) = build_units(parse_scenario(doc), 0)
    algorithm = unit.algorithm
    assert algorithm.participants(1).tolist() == algorithm.available_clients(1).tolist()
    unit.run(1, 1)
    for r in range(2, 5):
        flying = np.array(sorted(algorithm.buffered.pending))
        assert len(flying) == 2 and set(flying) == set(unit.in_flight)
        idle = np.setdiff1d(np.arange(6), flying)
        drawn = np.sort(idle[numpy_generator(algorithm.ctx.seed, r, "participation").choice(4, size=1, replace=False)])
        assert algorithm.participants(r).tolist() == drawn.tolist()
        unit.run(r, 1)
        assert len(unit.timings[-1].arrived) == 1
    assert [rec.participants for rec in unit.records] == [0, 3, 1, 1, 1]
