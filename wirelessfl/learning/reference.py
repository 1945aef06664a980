"""The plain per-client loop: one nn.Module and one torch.optim optimizer per slot.

It is the specification the lockstep engine is tested against and the baseline of
``benchmarks/bench_lockstep.py``: nothing clever, only PyTorch's own layers,
autograd and optimizer. It takes its batches from the same
:func:`~wirelessfl.learning.schedule.shuffle_schedule` as the engine, and for a
model with dropout trains slot s under ``torch.manual_seed`` of the engine's
seed for it (:func:`~wirelessfl.learning.schedule.slot_seeds`), so both draw the
same masks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector

from wirelessfl.learning.lockstep import Dataset, EvalResult, GradientCorrection, LockstepEngine, TrainConfig, TrainResult
from wirelessfl.learning.models import Architecture
from wirelessfl.learning.optim import torch_optimizer
from wirelessfl.learning.schedule import shuffle_schedule, slot_seeds


def _zero_frozen_grads(module: torch.nn.Module, mask: torch.Tensor) -> None:
    """Zero the gradient on frozen coordinates, so clipping and Adam's moments see only trainable ones."""
    offset = 0
    for parameter in module.parameters():
        size = parameter.numel()
        if parameter.grad is not None:
            parameter.grad.mul_(mask[offset : offset + size].view_as(parameter).to(parameter.grad.dtype))
        offset += size


class ReferenceLoop:
    """Same ``train`` / ``evaluate`` / ``logits`` signatures as :class:`LockstepEngine`, one model at a time."""

    def __init__(self, arch: Architecture, device: torch.device | str = "cpu"):
        self.arch = arch
        self.device = torch.device(device)
        self._checks = LockstepEngine(arch, device)  # argument checks and whether the model draws random numbers

    def train(
        self,
        params: torch.Tensor,
        datasets: Sequence[Dataset],
        cfg: TrainConfig,
        generator: torch.Generator,
        *,
        trainable: torch.Tensor | None = None,
        epochs: Sequence[float] | None = None,
        sample_weights: Sequence[torch.Tensor] | None = None,
        opt_state: tuple | None = None,
        correction: GradientCorrection | None = None,
    ) -> TrainResult:
        """Per slot: one module, one ``torch.optim`` optimizer, autograd; frozen coordinates restored after each step.

        ``opt_state`` here is a list of ``torch.optim`` state dicts (one per slot)
        as returned in ``TrainResult.opt_state``; ``correction``'s terms are added
        to each batch's loss as written, ``mu/2 ||theta - anchor||^2 + <offset, theta>``.
        """
        self._checks._check(params, datasets)
        n = len(datasets)
        epochs = self._checks._check_epochs(epochs, n, cfg)
        mask, _ = self._checks._check_trainable(trainable)
        self._checks._check_sample_weights(sample_weights, [len(y) for _, y in datasets])
        schedule = shuffle_schedule([len(y) for _, y in datasets], cfg.batch_size, epochs, generator)
        seeds = slot_seeds(n, generator) if self._checks.model.stochastic else None
        trained, losses, steps, states = [], [], [], []
        for slot, (x, y) in enumerate(datasets):
            module = self.arch.build_module(params[slot].detach().cpu()).to(self.device)
            weights = None if sample_weights is None else sample_weights[slot].to(self.device, torch.float32)
            with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                if seeds is not None:
                    torch.manual_seed(seeds[slot])
                terms = None if correction is None or not correction.active else (
                    correction.mu,
                    None if correction.mu == 0 else correction.anchor[slot].detach().to(self.device, torch.float32),
                    None if correction.offset is None else correction.offset[slot].detach().to(self.device, torch.float32),
                )
                optimizer, loss = self._train_one(
                    module, x, y, schedule[slot], cfg, None if opt_state is None else opt_state[slot], weights, mask, terms
                )
            trained.append(parameters_to_vector(module.parameters()).detach())
            steps.append(len(schedule[slot]))
            states.append(optimizer.state_dict())
            losses.append(loss)
        return TrainResult(
            params=torch.stack(trained) if trained else torch.empty((0, self.arch.param_count), device=self.device),
            loss=torch.stack(losses) if losses else torch.empty(0, device=self.device),
            steps=torch.tensor(steps, dtype=torch.int64, device=self.device),
            opt_state=tuple(states),
        )

    def _train_one(self, module, x, y, schedule, cfg, opt_state, weights, mask, terms=None) -> tuple[torch.optim.Optimizer, torch.Tensor]:
        """Train one module on its batches; its optimizer and mean loss (nan without steps; the cross-entropy
        alone, without the correction ``terms`` (mu, anchor, offset) that the gradient sees)."""
        optimizer = torch_optimizer(cfg, module.parameters())
        if opt_state is not None:
            optimizer.load_state_dict(opt_state)
        x, y = x.to(self.device, torch.float32), y.to(self.device, torch.int64)
        loss_sum = torch.zeros((), device=self.device)
        for batch in schedule:
            batch = batch.to(self.device)
            before = parameters_to_vector(module.parameters()).detach().clone() if mask is not None else None
            optimizer.zero_grad(set_to_none=True)
            per_sample = F.cross_entropy(module(x[batch]), y[batch], reduction="none")
            loss = per_sample.mean() if weights is None else (per_sample * weights[batch]).mean()
            objective = loss
            if terms is not None:
                mu, anchor, offset = terms
                flat = parameters_to_vector(module.parameters())
                if anchor is not None:
                    objective = objective + mu / 2 * (flat - anchor).square().sum()
                if offset is not None:
                    objective = objective + (offset * flat).sum()
            objective.backward()
            if mask is not None:
                _zero_frozen_grads(module, mask.to(self.device))
            if cfg.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.clip_norm)
            optimizer.step()
            loss_sum += loss.detach()
            if before is not None:
                after = parameters_to_vector(module.parameters()).detach()
                kept = torch.where(mask.to(self.device), after, before)
                torch.nn.utils.vector_to_parameters(kept, module.parameters())
        return optimizer, loss_sum / len(schedule) if schedule else torch.tensor(float("nan"), device=self.device)

    @torch.inference_mode()
    def logits(self, params: torch.Tensor, datasets: Sequence[Dataset], batch_size: int = 1024) -> list[torch.Tensor]:
        self._checks._check(params, datasets)
        out = []
        for slot, (x, _) in enumerate(datasets):
            module = self.arch.build_module(params[slot].detach().cpu()).to(self.device).eval()
            x = x.to(self.device, torch.float32)
            chunks = [module(part) for part in x.split(batch_size)] if len(x) else []
            out.append(torch.cat(chunks) if chunks else torch.empty((0, self.arch.num_classes), device=self.device))
        return out

    @torch.inference_mode()
    def evaluate(self, params: torch.Tensor, datasets: Sequence[Dataset], batch_size: int = 1024) -> EvalResult:
        accuracy, loss, count = [], [], []
        nan = torch.tensor(float("nan"), device=self.device)
        for logits, (_, y) in zip(self.logits(params, datasets, batch_size), datasets):
            y = y.to(self.device, torch.int64)
            accuracy.append((logits.argmax(1) == y).float().mean() if len(y) else nan)
            loss.append(F.cross_entropy(logits, y) if len(y) else nan)
            count.append(len(y))
        return EvalResult(
            accuracy=torch.stack(accuracy) if accuracy else torch.empty(0, device=self.device),
            loss=torch.stack(loss) if loss else torch.empty(0, device=self.device),
            count=torch.tensor(count, dtype=torch.int64, device=self.device),
        )
