"""PFLEGO (pflego.txt, Algorithm 1): exact gradient steps on eq. 1, I/r scaling, plan, errors, state."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import wirelessfl.algorithms.pflego  # noqa: F401  (registers pflego)
from wirelessfl.algorithms import Context, get_algorithm
from wirelessfl.checkpoint import load_checkpoint, save_checkpoint
from wirelessfl.learning.lockstep import LockstepEngine, TrainConfig
from wirelessfl.learning.models import get_architecture

from handmade import CLASSES, SHAPE, mlp_logits, tiny_data

SIZES = (3, 7, 5, 12, 2, 9)  # unequal, so alpha_i = N_i / sum N matters


def make_ctx(hidden=(5,), participation=1.0, epochs=1, held_out=(), sizes=SIZES) -> Context:
    data = tiny_data(sizes)
    arch = get_architecture("mlp", SHAPE, CLASSES, hidden=hidden)
    train = TrainConfig(epochs=epochs, batch_size=16, lr=0.1, momentum=0.0)
    held = np.asarray(held_out, dtype=np.int64)
    return Context(data, arch, LockstepEngine(arch, "cpu", normalisation=data.normalisation), train, seed=3, participation=participation, held_out=held)


@pytest.fixture(scope="module")
def ctx():
    return make_ctx()


def client_loss(ctx, flat, i):
    c = ctx.data.clients[i]
    return F.cross_entropy(mlp_logits(ctx.arch, flat, c.x_train), c.y_train)


def client_gradient(ctx, flat, i):
    flat = flat.detach().double().requires_grad_(True)
    return torch.autograd.grad(client_loss(ctx, flat, i), flat)[0]


def alphas(ctx):
    """alpha_i = N_i / sum_j N_j over the training clients (eq. 1); 0 for a held-out client."""
    sizes = np.asarray(ctx.data.train_sizes, dtype=np.float64)
    sizes[ctx.held_out] = 0.0
    return sizes / sizes.sum()


# -- exactness ---------------------------------------------------------------------


@pytest.mark.parametrize("head_step", ["exact", "eq3"])
def test_tau1_full_participation_is_one_gradient_step_on_eq1(ctx, head_step):
    """psi <- psi - rho grad L(psi), L = sum_i alpha_i l_i (eq. 1), computed centrally in one autograd graph."""
    rho = 0.5
    algo = get_algorithm("pflego")(ctx, tau=1, server_lr=rho, final_head_step=head_step)
    body = algo.body.detach().double().clone().requires_grad_(True)
    heads = algo.heads.full().detach().double().clone().requires_grad_(True)
    alpha = alphas(ctx)
    loss = sum(alpha[i] * client_loss(ctx, torch.cat([body, heads[i]]), i) for i in range(len(SIZES)))
    g_body, g_heads = torch.autograd.grad(loss, [body, heads])
    expected_body = body - rho * g_body
    if head_step == "exact":
        expected_heads = heads - rho * g_heads
    else:  # eq. 3 as printed: rho (I/r) grad_W l_i = rho grad_W L / alpha_i
        expected_heads = heads - rho * g_heads / torch.as_tensor(alpha)[:, None]

    info = algo.step(1, frozenset(range(len(SIZES))))

    assert info.aggregated == len(SIZES) and info.extra["unbiasing_factor"] == 1.0
    assert (expected_body - body).abs().max() > 1e-3  # the step is not trivially small
    assert torch.allclose(algo.body.double(), expected_body, atol=1e-6, rtol=0)
    assert torch.allclose(algo.heads.full().double(), expected_heads, atol=1e-6, rtol=0)


def test_tau3_partial_participation_head_steps_then_scaled_step():
    """tau - 1 = 2 GD steps on W_i (rate beta), then eq. 3-4 with I/r = 6/3; stragglers add nothing to theta."""
    ctx = make_ctx(participation=0.5)
    rho, beta = 0.3, 0.7
    algo = get_algorithm("pflego")(ctx, tau=3, server_lr=rho, client_lr=beta)
    members = [int(i) for i in algo.participants(4)]
    assert len(members) == 3
    arrived = frozenset(members[:2])
    body, heads = algo.body.double().clone(), algo.heads.full().double().clone()
    split = body.numel()
    alpha = alphas(ctx)
    expected_heads = heads.clone()
    direction = torch.zeros_like(body)
    for i in members:
        w = heads[i]
        for _ in range(2):
            w = w - beta * client_gradient(ctx, torch.cat([body, w]), i)[split:]
        g = client_gradient(ctx, torch.cat([body, w]), i)
        expected_heads[i] = w - rho * 2.0 * alpha[i] * g[split:]
        if i in arrived:
            direction += alpha[i] * g[:split]

    info = algo.step(4, arrived)

    assert info.aggregated == 2 and info.extra["unbiasing_factor"] == 2.0
    assert torch.allclose(algo.body.double(), body - rho * 2.0 * direction, atol=1e-6, rtol=0)
    assert torch.allclose(algo.heads.full().double(), expected_heads, atol=1e-6, rtol=0)
    others = [i for i in range(len(SIZES)) if i not in members]
    assert torch.equal(algo.heads.full()[others], heads[others].float())


def test_binomial_sampling_varies_r_and_scales_by_one_over_participation():
    ctx = make_ctx(participation=0.5)
    algo = get_algorithm("pflego")(ctx, tau=1, server_lr=0.4, sampling="binomial")
    counts = [len(algo.participants(r)) for r in range(1, 401)]
    assert len(set(counts)) > 3  # |I_t| ~ B(6, 0.5), not fixed
    assert abs(np.mean(counts) - 3.0) < 0.3
    round_ = next(r for r in range(1, 401) if 0 < len(algo.participants(r)) < 6)
    members = [int(i) for i in algo.participants(round_)]
    assert algo.plan(round_).participants == frozenset(members)
    body, heads = algo.body.double().clone(), algo.heads.full().double().clone()
    alpha = alphas(ctx)
    direction = sum(alpha[i] * client_gradient(ctx, torch.cat([body, heads[i]]), i)[: body.numel()] for i in members)

    info = algo.step(round_, frozenset(members))

    assert info.extra["unbiasing_factor"] == 2.0  # I / r with r = I * 0.5
    assert torch.allclose(algo.body.double(), body - 0.4 * 2.0 * direction, atol=1e-6, rtol=0)


def test_binomial_round_without_participants_changes_nothing():
    ctx = make_ctx(participation=0.1)
    algo = get_algorithm("pflego")(ctx, tau=2, sampling="binomial")
    empty = next(r for r in range(1, 200) if len(algo.participants(r)) == 0)
    before = algo.client_params().clone()
    plan = algo.plan(empty)
    assert plan.streams == () and plan.participants == frozenset()
    info = algo.step(empty, frozenset())
    assert info.aggregated == 0 and torch.equal(algo.client_params(), before)


HELD = (1, 4)  # training clients 0, 2, 3, 5: I = 4
TRAINING = [0, 2, 3, 5]


@pytest.mark.parametrize("sampling", ["fixed", "binomial"])
def test_held_out_clients_are_never_sampled_and_weigh_nothing(sampling):
    """I_t is drawn from the training clients only, every one of them is drawn, and alpha sums to 1 over them."""
    ctx = make_ctx(participation=0.5, held_out=HELD)
    algo = get_algorithm("pflego")(ctx, tau=2, sampling=sampling)
    drawn = set()
    for round_ in range(1, 41):
        members = algo.participants(round_)
        assert set(members.tolist()) <= set(TRAINING)
        assert algo.plan(round_).participants == frozenset(members.tolist())
        if sampling == "fixed":
            assert len(members) == 2  # round(0.5 * 4), not round(0.5 * 6)
        drawn |= set(members.tolist())
    assert drawn == set(TRAINING)
    sizes = np.asarray(SIZES, dtype=np.float64)[TRAINING]
    expected = np.zeros(6)
    expected[TRAINING] = sizes / sizes.sum()
    np.testing.assert_allclose(algo.alpha.numpy(), expected, rtol=1e-15, atol=0)


def test_held_out_tau1_full_participation_is_one_gradient_step_on_the_training_objective():
    """With held-out clients, eq. 1 is over the training clients: one exact step on it; held-out heads untouched."""
    ctx = make_ctx(held_out=HELD)
    rho = 0.5
    algo = get_algorithm("pflego")(ctx, tau=1, server_lr=rho)
    body = algo.body.detach().double().clone().requires_grad_(True)
    heads = algo.heads.full().detach().double().clone().requires_grad_(True)
    alpha = alphas(ctx)
    assert alpha.sum() == pytest.approx(1.0, abs=1e-15) and alpha[list(HELD)].tolist() == [0.0, 0.0]
    loss = sum(alpha[i] * client_loss(ctx, torch.cat([body, heads[i]]), i) for i in TRAINING)
    g_body, g_heads = torch.autograd.grad(loss, [body, heads])

    info = algo.step(1, frozenset(range(6)))

    assert info.aggregated == 4 and info.extra["unbiasing_factor"] == 1.0
    assert torch.allclose(algo.body.double(), body - rho * g_body, atol=1e-6, rtol=0)
    assert torch.allclose(algo.heads.full().double(), heads - rho * g_heads, atol=1e-6, rtol=0)
    assert torch.equal(algo.heads.full()[list(HELD)], heads[list(HELD)].detach().float())


@pytest.mark.parametrize("sampling", ["fixed", "binomial"])
def test_held_out_partial_participation_scales_by_training_clients_over_r(sampling):
    """I/r with I = 4 training clients: fixed r = 2 gives 2 (not 6/2 = 3); Binomial gives 1 / 0.5."""
    ctx = make_ctx(participation=0.5, held_out=HELD)
    rho = 0.4
    algo = get_algorithm("pflego")(ctx, tau=1, server_lr=rho, sampling=sampling)
    round_ = next(r for r in range(1, 200) if len(algo.participants(r)) == 2)
    members = [int(i) for i in algo.participants(round_)]
    body, heads = algo.body.double().clone(), algo.heads.full().double().clone()
    alpha = alphas(ctx)
    direction = sum(alpha[i] * client_gradient(ctx, torch.cat([body, heads[i]]), i)[: body.numel()] for i in members)

    info = algo.step(round_, frozenset(members))

    assert info.extra["unbiasing_factor"] == 2.0
    assert torch.allclose(algo.body.double(), body - rho * 2.0 * direction, atol=1e-6, rtol=0)


@pytest.mark.parametrize("head_step", ["exact", "eq3"])
def test_a_client_without_training_data_keeps_its_head_and_adds_nothing(head_step):
    """N_1 = 0: alpha_1 = 0 and l_1 is undefined (a NaN gradient), so client 1 neither moves its head nor the body."""
    ctx = make_ctx(sizes=(3, 0, 5, 12, 2, 9))
    rho, beta = 0.5, 0.7
    algo = get_algorithm("pflego")(ctx, tau=2, server_lr=rho, client_lr=beta, final_head_step=head_step)
    body, heads = algo.body.double().clone(), algo.heads.full().clone()
    alpha = alphas(ctx)
    assert alpha[1] == 0.0
    direction = torch.zeros_like(body)
    for i in (0, 2, 3, 4, 5):
        w = heads[i].double() - beta * client_gradient(ctx, torch.cat([body, heads[i].double()]), i)[body.numel() :]
        direction += alpha[i] * client_gradient(ctx, torch.cat([body, w]), i)[: body.numel()]

    algo.step(1, frozenset(range(6)))

    assert torch.equal(algo.heads.full()[1], heads[1])
    assert torch.allclose(algo.body.double(), body - rho * direction, atol=1e-6, rtol=0)


# -- plan --------------------------------------------------------------------------


def test_plan_sends_and_uploads_only_the_body(ctx):
    # mlp 16 -> 5 -> 3: P = 16*5 + 5 + 5*3 + 3 = 103, head = 5*3 + 3 = 18, body = 85
    assert ctx.arch.param_count == 103 and ctx.arch.head_size == 18
    plan = get_algorithm("pflego")(ctx, tau=1).plan(1)
    assert len(plan.streams) == 1 and plan.streams[0].receivers == frozenset(range(6))
    assert plan.streams[0].payload == pytest.approx(85 / 103)
    assert dict(plan.uplink) == pytest.approx({i: 85 / 103 for i in range(6)})
    assert plan.model_params == 103


@pytest.mark.parametrize(("tau", "epochs", "work"), [(1, 1, 1.0), (5, 1, 1 + 1 / 3 + 4 * 18 / 103), (5, 2, (1 + 1 / 3 + 4 * 18 / 103) / 2)])
def test_work_grows_with_tau(tau, epochs, work):
    plan = get_algorithm("pflego")(make_ctx(epochs=epochs), tau=tau).plan(1)
    assert dict(plan.work) == pytest.approx({i: work for i in range(6)})


def test_partial_participation_plan_names_only_the_sample():
    ctx = make_ctx(participation=0.5)
    algo = get_algorithm("pflego")(ctx, tau=2)
    for round_ in (1, 2, 3):
        members = frozenset(int(i) for i in algo.participants(round_))
        plan = algo.plan(round_)
        assert len(members) == 3
        assert plan.participants == members and set(plan.uplink) == members
        assert plan.streams[0].receivers == members


# -- errors and state ----------------------------------------------------------------


def test_model_without_body_is_rejected():
    with pytest.raises(ValueError) as error:
        get_algorithm("pflego")(make_ctx(hidden=()))
    assert str(error.value) == (
        "pflego: model 'mlp' has no shared body (its only layer with parameters is the personal head); "
        "it needs at least one hidden layer"
    )


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        ({"tau": 0}, "pflego: tau must be an int >= 1, got 0"),
        ({"tau": 2.5}, "pflego: tau must be an int >= 1, got 2.5"),
        ({"tau": True}, "pflego: tau must be an int >= 1, got True"),
        ({"server_lr": -1.0}, "pflego: server_lr must be a finite number > 0 or null (= train.lr), got -1.0"),
        ({"client_lr": 0}, "pflego: client_lr must be a finite number > 0 or null (= train.lr), got 0"),
        ({"sampling": "poisson"}, "pflego: sampling must be 'fixed' or 'binomial', got 'poisson'"),
        ({"final_head_step": "x"}, "pflego: final_head_step must be 'exact' or 'eq3', got 'x'"),
        ({"server_optimizer": "rmsprop"}, "pflego: server_optimizer must be 'sgd' or 'adam', got 'rmsprop'"),
    ],
)
def test_bad_hparams_are_rejected(ctx, hparams, message):
    with pytest.raises(ValueError) as error:
        get_algorithm("pflego")(ctx, **hparams)
    assert str(error.value) == message


def test_defaults_are_the_papers():
    """tau = 50 for every dataset (§4.2); both rates default to train.lr; I_t of fixed size; eq. 5's exact head step;
    Algorithm 1's plain gradient step on the server."""
    assert get_algorithm("pflego").hparams == {
        "tau": 50, "server_lr": None, "client_lr": None, "sampling": "fixed", "final_head_step": "exact",
        "server_optimizer": "sgd",
    }


def test_learning_rates_default_to_train_lr(ctx):
    algo = get_algorithm("pflego")(replace(ctx, train=replace(ctx.train, lr=0.03)))
    assert algo.server_lr == 0.03 and algo.client_lr == 0.03


def test_adam_on_the_server_steps_the_body_by_rho_per_coordinate_then_keeps_its_moments(ctx):
    """The authors' code: Adam(rho) on the I/r-scaled body gradient. Step 1: m_hat = g, v_hat = g^2, so the body
    moves by -rho g / (|g| + 1e-8); step 2 by -rho m_hat / (sqrt(v_hat) + 1e-8) with the moments of both steps.
    The heads' final step stays eq. 5's plain one."""
    rho, b1, b2 = 0.01, 0.9, 0.999
    algo = get_algorithm("pflego")(ctx, tau=1, server_lr=rho, server_optimizer="adam")
    m = v = 0.0
    for t in (1, 2):
        body = algo.body.detach().double().clone().requires_grad_(True)
        heads = algo.heads.full().detach().double().clone().requires_grad_(True)
        alpha = alphas(ctx)
        loss = sum(alpha[i] * client_loss(ctx, torch.cat([body, heads[i]]), i) for i in range(len(SIZES)))
        g_body, g_heads = torch.autograd.grad(loss, [body, heads])
        m, v = b1 * m + (1 - b1) * g_body, b2 * v + (1 - b2) * g_body**2
        expected_body = body - rho * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + 1e-8)
        algo.step(t, frozenset(range(len(SIZES))))
        assert torch.allclose(algo.body.double(), expected_body, atol=1e-6, rtol=0)
        assert torch.allclose(algo.heads.full().double(), heads - rho * g_heads, atol=1e-6, rtol=0)
    assert (expected_body - body).abs().max() > 0.5 * rho  # about rho per coordinate, not rho times the gradient


def test_state_round_trip_continues_identically(tmp_path):
    """Through a checkpoint file, the server's Adam moments included."""
    ctx = make_ctx(participation=0.5)
    algo = get_algorithm("pflego")(ctx, tau=3, server_optimizer="adam")
    algo.step(1, frozenset(range(6)))
    clone = get_algorithm("pflego")(ctx, tau=3, server_optimizer="adam")
    save_checkpoint(tmp_path / "pflego.safetensors", algo.state_dict())
    clone.load_state_dict(load_checkpoint(tmp_path / "pflego.safetensors"))
    assert torch.equal(clone.client_params(), algo.client_params())
    algo.step(2, frozenset(range(6)))
    clone.step(2, frozenset(range(6)))
    assert torch.equal(clone.client_params(), algo.client_params())
