"""Per-client gating networks over several experts, trained and evaluated in lockstep.

The mixture of experts of Isaksson et al., "Adaptive Expert Models for
Personalization in Federated Learning" (adaptive-expert-models.txt, eq. 5 and
§4.3; after Listo Zec et al. 2020): client k's gate f_h^k takes the input x and
gives softmax weights g(x) over E experts, and the prediction is the
gate-weighted mixture of the experts' predictive distributions

    p(y | x) = sum_e g_e(x) softmax(f_e(x))_y,

trained with the negative log-likelihood of the mixture (as the authors' code,
EricssonResearch/fl-moe ``ClientUpdate.train_3``: ``NLLLoss(log(sum_e g_e
exp(log_softmax_e)))``; here computed as a logsumexp). The experts are frozen
while the gates train: their logits are computed once (``LockstepEngine.logits``)
and only the probability each expert gives the true label is kept.

The gate is a one-hidden-layer perceptron on the flattened input (Linear, ReLU,
Linear to E, softmax); the paper's gate is a small CNN of the experts' family
(conv 12, conv 12, fc 8, dropout 0.78, Table 1). We keep its fc width as the
default hidden size and use no dropout, so that a gate is a few hundred
parameters and all clients' gates are one batched matmul.

All clients' gates are rows of one ``[n, G]`` tensor (the ``nn.Linear`` layout of
:meth:`GateArchitecture.build_module`); one step of every gate is one batched
forward, torch autograd and one update of the composable optimizer
(:mod:`wirelessfl.learning.optim`; Table 1 trains the gate with AdamW). Slots
with fewer steps stop early as in the lockstep engine: rows are sorted by their
number of steps, so the gates still training are a prefix. Batches come from
:func:`~wirelessfl.learning.lockstep.shuffle_schedule`, so a per-client loop
sees the same ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from wirelessfl.learning import optim
from wirelessfl.learning.lockstep import EvalResult, TrainConfig, TrainResult, slot_steps, shuffle_schedule

EVAL_CHUNK = 256
"""Sample positions per batched pass when evaluating mixtures."""


@dataclass(frozen=True)
class GateArchitecture:
    """Flatten, Linear(input_dim, hidden), ReLU, Linear(hidden, experts); softmax weights over the experts."""

    input_dim: int
    experts: int
    hidden: int = 8

    def __post_init__(self) -> None:
        for key, low in (("input_dim", 1), ("experts", 1), ("hidden", 1)):
            value = getattr(self, key)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
                raise ValueError(f"gate {key} must be an int >= {low}, got {value!r}")

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        d, h, e = self.input_dim, self.hidden, self.experts
        return ((h, d), (h,), (e, h), (e,))

    @property
    def param_count(self) -> int:
        return sum(math.prod(s) for s in self.shapes)

    def unflatten(self, params: torch.Tensor) -> list[torch.Tensor]:
        """``[n, G]`` -> views ``W1 [n, h, d]``, ``b1 [n, h]``, ``W2 [n, E, h]``, ``b2 [n, E]``."""
        out, offset = [], 0
        for shape in self.shapes:
            size = math.prod(shape)
            out.append(params[:, offset : offset + size].view(params.shape[0], *shape))
            offset += size
        return out

    def init_flat(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, G]`` with PyTorch's default ``nn.Linear`` distributions, U(±1/sqrt(fan_in)), in one draw."""
        bounds = torch.cat(
            [torch.full((math.prod(s),), 1.0 / math.sqrt(fan_in)) for s, fan_in in zip(self.shapes, (self.input_dim,) * 2 + (self.hidden,) * 2)]
        )
        uniform = torch.rand((n, self.param_count), generator=generator, device=generator.device)
        return uniform.mul_(2.0).sub_(1.0).mul_(bounds.to(uniform.device))

    def log_weights(self, params: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``log g``: ``[n, B, E]`` for inputs ``x`` ``[n, B, input_dim]`` (row s through gate s)."""
        w1, b1, w2, b2 = self.unflatten(params)
        hidden = torch.relu(torch.baddbmm(b1.unsqueeze(1), x, w1.transpose(1, 2)))
        return torch.log_softmax(torch.baddbmm(b2.unsqueeze(1), hidden, w2.transpose(1, 2)), dim=-1)

    def weights(self, params: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Gate outputs ``g`` ``[n, B, E]`` (each row sums to 1)."""
        return self.log_weights(params, x).exp()

    def build_module(self, flat: torch.Tensor) -> nn.Sequential:
        """One gate as a plain module (softmax not included); the oracle of the tests."""
        module = nn.Sequential(nn.Flatten(), nn.Linear(self.input_dim, self.hidden), nn.ReLU(), nn.Linear(self.hidden, self.experts))
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(flat.detach().to(torch.float32).clone(), module.parameters())
        return module


def mixture_log_probs(log_gate: torch.Tensor, expert_logits: torch.Tensor) -> torch.Tensor:
    """``log sum_e g_e softmax(logits_e)``: ``[..., C]`` from ``log g`` ``[..., E]`` and logits ``[..., E, C]``."""
    return torch.logsumexp(log_gate.unsqueeze(-1) + torch.log_softmax(expert_logits, dim=-1), dim=-2)


def _flat_inputs(inputs: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    return [x.reshape(x.shape[0], -1).to(device, torch.float32) for x in inputs]


def _check(gate: GateArchitecture, params: torch.Tensor, inputs, expert_logits, labels) -> None:
    n = params.shape[0]
    if params.dim() != 2 or params.shape[1] != gate.param_count:
        raise ValueError(f"gate params must be [n, {gate.param_count}], got {list(params.shape)}")
    if not (len(inputs) == len(expert_logits) == len(labels) == n):
        raise ValueError(
            f"gates: {n} gates need as many inputs, expert logits and labels, got {len(inputs)}, {len(expert_logits)} and {len(labels)}"
        )
    for s, (x, logits, y) in enumerate(zip(inputs, expert_logits, labels)):
        if logits.dim() != 3 or logits.shape[0] != len(y) or logits.shape[1] != gate.experts or x.shape[0] != len(y):
            raise ValueError(
                f"gates: slot {s} needs inputs [n_s, ...], expert logits [n_s, {gate.experts}, classes] and labels [n_s] "
                f"with one n_s, got {list(x.shape)}, {list(logits.shape)} and {list(y.shape)}"
            )
        if math.prod(x.shape[1:]) != gate.input_dim:
            raise ValueError(f"gates: slot {s} inputs have {math.prod(x.shape[1:])} features, the gate takes {gate.input_dim}")


def train_gates(
    gate: GateArchitecture,
    params: torch.Tensor,
    inputs: Sequence[torch.Tensor],
    expert_logits: Sequence[torch.Tensor],
    labels: Sequence[torch.Tensor],
    cfg: TrainConfig,
    generator: torch.Generator,
    *,
    epochs: Sequence[float] | None = None,
    opt_state: tuple | None = None,
) -> TrainResult:
    """Gate s trains on ``(inputs[s], labels[s])`` against the frozen ``expert_logits[s]`` ``[n_s, E, C]``.

    Minimises the mean NLL of the mixture per batch with ``optim.build(cfg)``;
    ``epochs`` (per slot, possibly fractional) overrides ``cfg.epochs``;
    ``opt_state`` continues an earlier result's optimizer. Returns the engine's
    :class:`TrainResult` (``loss``: mean batch loss per slot, nan without steps).
    """
    _check(gate, params, inputs, expert_logits, labels)
    n = params.shape[0]
    device = params.device
    epochs = [float(cfg.epochs)] * n if epochs is None else [float(e) for e in epochs]
    if len(epochs) != n:
        raise ValueError(f"epochs must give one epoch count per gate ({n}), got {len(epochs)}")
    sizes = [len(y) for y in labels]
    schedule = shuffle_schedule(sizes, cfg.batch_size, epochs, generator)
    steps = slot_steps(sizes, cfg.batch_size, epochs)

    x_cat = torch.cat(_flat_inputs(inputs, device)) if n else torch.empty((0, gate.input_dim), device=device)
    true_log_probs = [
        torch.log_softmax(logits.to(device, torch.float32), dim=-1).gather(-1, y.to(device, torch.int64).view(-1, 1, 1).expand(-1, gate.experts, 1)).squeeze(-1)
        for logits, y in zip(expert_logits, labels)
    ]
    lq_cat = torch.cat(true_log_probs) if n else torch.empty((0, gate.experts), device=device)
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)

    order = sorted(range(n), key=lambda s: -steps[s])
    order_t = torch.tensor(order, dtype=torch.int64, device=device)
    max_steps = steps[order[0]] if n else 0
    table = torch.full((max_steps, n, cfg.batch_size), -1, dtype=torch.int64)
    for row, slot in enumerate(order):
        for t, batch in enumerate(schedule[slot]):
            table[t, row, : len(batch)] = batch + offsets[slot]
    table = table.to(device)
    sorted_steps = [steps[s] for s in order]

    transform = optim.build(cfg)
    work = params.detach().to(torch.float32).index_select(0, order_t)
    state = transform.init(work)
    if opt_state is not None:
        if optim.map_state(lambda t: tuple(t.shape), opt_state) != optim.map_state(lambda t: tuple(t.shape), state):
            raise ValueError("opt_state does not match this optimizer and these gates (pass the TrainResult.opt_state of the same optimizer and gates)")
        state = optim.map_state(lambda t: t.detach().to(device, torch.float32).index_select(0, order_t), opt_state)
    loss_sum = torch.zeros(n, device=device)

    for t in range(max_steps):
        active = sum(1 for s in sorted_steps if s > t)
        index = table[t, :active]
        valid = index >= 0
        safe = index.clamp(min=0)
        weight = valid / valid.sum(1, keepdim=True).clamp(min=1)
        p = work[:active].detach().requires_grad_(True)
        with torch.enable_grad():
            log_g = gate.log_weights(p, x_cat[safe])
            nll = -torch.logsumexp(log_g + lq_cat[safe], dim=-1)
            per_slot = (nll * weight).sum(1)
            (grad,) = torch.autograd.grad(per_slot.sum(), p)
        loss_sum[:active] += per_slot.detach()
        with torch.no_grad():
            optim.step(work[:active], grad, optim.select_rows(state, slice(0, active)), transform)

    def inverse(tensor: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(tensor).index_copy_(0, order_t, tensor)

    steps_t = torch.tensor(steps, dtype=torch.int64, device=device)
    return TrainResult(
        params=inverse(work),
        loss=inverse(loss_sum) / steps_t,
        steps=steps_t,
        opt_state=optim.map_state(inverse, state),
    )


@torch.no_grad()
def evaluate_mixture(
    gate: GateArchitecture,
    params: torch.Tensor,
    inputs: Sequence[torch.Tensor],
    expert_logits: Sequence[torch.Tensor],
    labels: Sequence[torch.Tensor],
) -> EvalResult:
    """Accuracy and mean NLL of every client's mixture prediction on its data (as ``LockstepEngine.evaluate``)."""
    _check(gate, params, inputs, expert_logits, labels)
    n = params.shape[0]
    device = params.device
    xs = _flat_inputs(inputs, device)
    sizes = [len(y) for y in labels]
    correct = torch.zeros(n, device=device)
    loss_sum = torch.zeros(n, device=device)
    work = params.detach().to(torch.float32)
    for first in range(0, max(sizes, default=0), EVAL_CHUNK):
        width = min(EVAL_CHUNK, max(sizes) - first)
        x = torch.zeros((n, width, gate.input_dim), device=device)
        logits = torch.zeros((n, width, gate.experts, expert_logits[0].shape[-1]), device=device)
        y = torch.zeros((n, width), dtype=torch.int64, device=device)
        valid = torch.zeros((n, width), dtype=torch.bool, device=device)
        for s in range(n):
            part = slice(first, min(first + width, sizes[s]))
            count = max(0, part.stop - part.start)
            x[s, :count] = xs[s][part]
            logits[s, :count] = expert_logits[s][part].to(device, torch.float32)
            y[s, :count] = labels[s][part].to(device)
            valid[s, :count] = True
        log_p = mixture_log_probs(gate.log_weights(work, x), logits)
        nll = -log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        loss_sum += (nll * valid).sum(1)
        correct += ((log_p.argmax(-1) == y) & valid).sum(1)
    count = torch.tensor(sizes, dtype=torch.int64, device=device)
    return EvalResult(accuracy=correct / count, loss=loss_sum / count, count=count)
