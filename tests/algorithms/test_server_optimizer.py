"""Server optimizers (Reddi et al., ICLR 2021; docs/levers.md): sgd at lr 1 is FedAvg's trace, one step of each rule
by hand on a tiny vector, the state across a checkpoint and resume byte for byte, and the one-line refusals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.algorithms.server_optimizer import ServerOptimizer, ServerOptimizerState
from wirelessfl.checkpoint import load_checkpoint
from wirelessfl.config import ScenarioError, parse_scenario
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture
from wirelessfl.run.checkpoints import CHECKPOINT_TYPES, PROVENANCE
from wirelessfl.run.curves import curves_of
from wirelessfl.run.keys import unit_fingerprint
from wirelessfl.simulate import simulate

from handmade import CLASSES, SHAPE, tiny_data
from simulated import COLUMNS, curve, run, scenario

X0 = [1.0, -2.0, 0.5]
DELTAS = ([0.1, 0.2, -0.3], [-0.05, 0.4, 0.01])  # mean(uploads) - x of two rounds


def steps(spec: ServerOptimizer) -> list[list[float]]:
    """The models after each of the two rounds of ``DELTAS``, through ``ServerOptimizerState``."""
    x = torch.tensor([X0], dtype=torch.float32)
    state, out = ServerOptimizerState(spec, x), []
    for delta in DELTAS:
        x = state.update(x, x + torch.tensor([delta]))
        out.append(x[0].tolist())
    return out


def paper(rule: str, lr: float, beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3, bias_correction=False):
    """Reddi et al.'s Algorithm 2 in float64 (numpy), one rule; Adam optionally with Kingma and Ba's bias correction."""
    x, m = np.array(X0), np.zeros(3)
    v = np.zeros(3) if rule == "adam" else np.full(3, tau**2)
    out = []
    for t, delta in enumerate(DELTAS, start=1):
        delta = np.array(delta)
        m = beta1 * m + (1 - beta1) * delta
        if rule == "adam":
            v = beta2 * v + (1 - beta2) * delta**2
        elif rule == "yogi":
            v = v - (1 - beta2) * delta**2 * np.sign(v - delta**2)
        else:
            v = v + delta**2
        m_hat, v_hat = (m / (1 - beta1**t), v / (1 - beta2**t)) if bias_correction else (m, v)
        x = x + lr * m_hat / (np.sqrt(v_hat) + tau)
        out.append(x.tolist())
    return out


def test_yogi_is_algorithm_2_as_written():
    np.testing.assert_allclose(steps(ServerOptimizer("yogi", 0.1)), paper("yogi", 0.1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(steps(ServerOptimizer("yogi", 0.5, betas=(0.5, 0.9), tau=0.01)),
                               paper("yogi", 0.5, 0.5, 0.9, 0.01), rtol=0, atol=1e-6)


def test_yogi_keeps_v_where_it_equals_the_squared_update():
    """sign(v - Delta^2) = 0: v_1 = v_0 = tau^2 exactly, so x_1 = x_0 + lr (1 - beta1) Delta / (tau + tau)."""
    x = torch.tensor([[1.0, 2.0]])
    state = ServerOptimizerState(ServerOptimizer("yogi", 0.1, tau=0.5), x)
    moved = state.update(x, x + 0.5)
    assert torch.equal(state.optimizer.state[state.param]["exp_avg_sq"], torch.full((1, 2), 0.25))
    torch.testing.assert_close(moved, x + 0.1 * 0.1 * 0.5 / 1.0, rtol=0, atol=1e-7)


def test_adam_is_algorithm_2_with_bias_correction():
    np.testing.assert_allclose(steps(ServerOptimizer("adam", 0.1)), paper("adam", 0.1, bias_correction=True), rtol=0, atol=1e-6)
    first = steps(ServerOptimizer("adam", 0.1, tau=1e-9))[0]  # bias-corrected first step: lr sign(delta)
    np.testing.assert_allclose(first, np.array(X0) + 0.1 * np.sign(DELTAS[0]), rtol=0, atol=1e-6)


def test_adagrad_is_algorithm_2_without_momentum():
    np.testing.assert_allclose(steps(ServerOptimizer("adagrad", 0.1)), paper("adagrad", 0.1, beta1=0.0), rtol=0, atol=1e-6)


def test_sgd_and_momentum_are_fedavgs_with_a_rate_and_fedavgm():
    x1 = np.array(X0) + 0.5 * np.array(DELTAS[0])
    np.testing.assert_allclose(steps(ServerOptimizer("sgd", 0.5)), [x1, x1 + 0.5 * np.array(DELTAS[1])], rtol=0, atol=1e-6)
    buffer = np.array(DELTAS[0])
    second = x1 + 0.5 * (0.8 * buffer + np.array(DELTAS[1]))
    np.testing.assert_allclose(steps(ServerOptimizer("momentum", 0.5, momentum=0.8)), [x1, second], rtol=0, atol=1e-6)
    averaged = torch.tensor([[0.3, 0.1, 0.2]])
    assert ServerOptimizerState(ServerOptimizer("sgd", 1.0), torch.zeros(1, 3)).update(torch.ones(1, 3), averaged) is averaged


def make_ctx(spec: ServerOptimizer) -> Context:
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=(5,))
    train = TrainConfig(epochs=1, batch_size=4, lr=0.05)
    return Context(tiny_data((2, 5, 3, 10)), arch, LockstepEngine(arch, "cpu"), train, seed=5, server_optimizer=spec)


@pytest.mark.parametrize("name", ["fedprox", "ditto", "apfl"])
def test_methods_with_fedavgs_global_model_step_it_alike(name):
    """With mu = 0, and for Ditto and APFL always, the global model is FedAvg's: the server step must be too."""
    ctx = make_ctx(ServerOptimizer("adam", 0.01))
    params = {"mu": 0.0} if name == "fedprox" else {}
    ours, fedavg = get_algorithm(name)(ctx, **params), get_algorithm("fedavg")(ctx)
    for round_, arrived in [(1, frozenset(range(4))), (2, frozenset({0, 3})), (3, frozenset())]:
        ours.step(round_, arrived)
        fedavg.step(round_, arrived)
        assert torch.equal(ours.models, fedavg.models)
    assert set(fedavg.state_dict()["server_optimizer"]) == {"step", "exp_avg", "exp_avg_sq"}
    assert float(fedavg.state_dict()["server_optimizer"]["step"]) == 2.0  # round 3: nothing arrived, no step


def test_the_documented_defaults_fill_what_a_scenario_leaves_out():
    """docs/levers.md: momentum 0.9, betas [0.9, 0.99], tau 1e-3; what is given is kept."""
    def spec(given):
        return parse_scenario({**scenario([{"name": "fedavg"}]), "training": {"server_optimizer": given}}).training.server_optimizer.spec()

    assert spec({"name": "momentum", "lr": 1.0}) == ServerOptimizer("momentum", 1.0, 0.9, (0.9, 0.99), 1e-3)
    assert spec({"name": "yogi", "lr": 0.1, "betas": [0.5, 0.6], "tau": 0.01}) == ServerOptimizer("yogi", 0.1, 0.9, (0.5, 0.6), 0.01)
    assert spec({"name": "momentum", "lr": 2.0, "momentum": 0.5}).momentum == 0.5


@pytest.mark.parametrize(("given", "message"), [
    ({"name": "nadam", "lr": 1.0},
     "training.server_optimizer.name: Input should be 'sgd', 'momentum', 'adam', 'yogi' or 'adagrad' (got 'nadam')"),
    ({"name": "adam"}, "training.server_optimizer.lr: required field is missing"),
    ({"name": "adam", "lr": 0.0}, "training.server_optimizer.lr: Input should be greater than 0 (got 0.0)"),
    ({"name": "sgd", "lr": 1.0, "momentum": 0.9}, "training.server_optimizer: momentum: taken by momentum only, not sgd"),
    ({"name": "adagrad", "lr": 0.1, "betas": [0.9, 0.99]}, "training.server_optimizer: betas: taken by adam, yogi only, not adagrad"),
    ({"name": "momentum", "lr": 1.0, "tau": 0.1}, "training.server_optimizer: tau: taken by adam, yogi, adagrad only, not momentum"),
])
def test_bad_server_optimizer_fields_are_one_line(given, message):
    doc = {**scenario([{"name": "fedavg"}]), "training": {"server_optimizer": given}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert str(err.value) == f"scenario: {message}"


@pytest.mark.parametrize("name", ["scaffold", "pfedme", "oracle", "local"])
def test_methods_with_their_own_server_rule_refuse_it_in_one_line(name):
    """The declarations' ``levers`` decide, when the scenario is read (before any training)."""
    doc = scenario([{"name": name, "training": {"server_optimizer": {"name": "adam", "lr": 0.01}}}], networks=[{"preset": "wired"}])
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    takers = "apfl, ditto, fedavg, fedavg_ft, fedprox"
    assert str(err.value) == f"scenario: algorithms[0]: {name}: training.server_optimizer does not apply to {name}; it applies to {takers}"


def test_the_takers_are_the_declarations():
    from wirelessfl.algorithms import registry

    takers = sorted(name for name, spec in registry.SPECS.items() if "server_optimizer" in spec.levers)
    assert takers == ["apfl", "ditto", "fedavg", "fedavg_ft", "fedprox"]



@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    return run([
        {"name": "fedavg"},
        {"name": "fedavg", "label": "sgd1", "training": {"server_optimizer": {"name": "sgd", "lr": 1.0}}},
        {"name": "fedavg", "label": "yogi", "training": {"server_optimizer": {"name": "yogi", "lr": 0.01}}},
    ])


def test_sgd_at_rate_one_is_todays_trace_exactly(trace):
    pd.testing.assert_frame_equal(curve(trace, "sgd1"), curve(trace, "fedavg"), check_exact=True)


def test_an_adaptive_server_changes_the_learning_not_the_traffic(trace):
    yogi, fedavg = curve(trace, "yogi"), curve(trace, "fedavg")
    assert not yogi["mean_loss"].equals(fedavg["mean_loss"])
    assert yogi["ul_payload"].equals(fedavg["ul_payload"]) and yogi["dl_payload"].equals(fedavg["dl_payload"])


def test_the_server_state_survives_a_checkpoint_and_resume_byte_for_byte(tmp_path):
    doc = scenario([{"name": "fedavg", "training": {"server_optimizer": {"name": "adam", "lr": 0.01}}}],
                   rounds=4, checkpoint_every=1, networks=[{"preset": "wired"}])
    parsed = parse_scenario(doc)
    whole = simulate(parsed, run_dir=tmp_path / "whole", keep_models=True)
    with pytest.raises(KeyboardInterrupt):
        simulate(parsed, run_dir=tmp_path / "cut", keep_models=True, stop_after_rounds=3)
    (curve_,) = curves_of(parsed)
    stamp = unit_fingerprint(parsed, curve_, 0)
    partial = load_checkpoint(tmp_path / "cut" / "checkpoints" / "seed0__fedavg.partial.safetensors", CHECKPOINT_TYPES, (stamp,), PROVENANCE)
    assert float(partial["algorithm"]["server_optimizer"]["step"]) == 2.0
    resumed = simulate(parsed, run_dir=tmp_path / "cut")
    pd.testing.assert_frame_equal(resumed.trace, whole.trace, check_exact=True)
    ours, theirs = (
        load_checkpoint(path / "checkpoints" / "seed0__fedavg.done.safetensors", CHECKPOINT_TYPES, (stamp,), PROVENANCE)
        for path in (tmp_path / "cut", tmp_path / "whole")
    )
    for key in ("step", "exp_avg", "exp_avg_sq"):
        assert ours["algorithm"]["server_optimizer"][key].numpy().tobytes() == theirs["algorithm"]["server_optimizer"][key].numpy().tobytes()
    assert ours["algorithm"]["models"].numpy().tobytes() == theirs["algorithm"]["models"].numpy().tobytes()
