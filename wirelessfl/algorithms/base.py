"""What every federated algorithm is: a small object with explicit state.

An algorithm answers two questions each round, as Flower's Strategy splits
"configure" from "aggregate":

* ``plan(round)`` -- who takes part and what is sent (a ``CommPlan``, pure data
  the network model times);
* ``step(round, arrived)`` -- local training in lockstep and aggregation of the
  uploads that made it (``arrived``); stragglers are ordinary input.

Each client's *own* model (``client_params``) is what gets evaluated on the
client's held-out split. All randomness is derived from ``(seed, round,
purpose)``, so a round can be replayed or resumed without carrying generator
state around.

Most methods are mixing rules over stacked models (DESIGN.md): the server holds
``k`` stream models, client ``i`` receives stream ``assignment[i]``, trains it
and uploads it, and stream ``c`` becomes ``sum_j W[c, j] * theta_j`` over the
clients that arrived. ``MixingAlgorithm`` implements that once; FedAvg, Oracle,
user-centric FL and clustered FL only choose ``W`` and ``assignment``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from wirelessfl.algorithms import registry
from wirelessfl.algorithms.asynchronous import AsyncBuffer, Asynchronous
from wirelessfl.algorithms.compression import Compression, Compressor
from wirelessfl.algorithms.over_the_air import OverTheAir, analog_aggregate, truncated_share
from wirelessfl.algorithms.scheduling import Scheduler, Scheduling
from wirelessfl.algorithms.server_optimizer import ServerOptimizer, ServerOptimizerState
from wirelessfl.algorithms.search_space import COMMON_SEARCH_SPACE, Param
from wirelessfl.algorithms.spec import AlgorithmSpec, ParamError, Params, spec_from_hparams
from wirelessfl.learning import optim
from wirelessfl.learning.client_store import ClientStore, ClientStores
from wirelessfl.learning.data.federated import FederatedData
from wirelessfl.learning.lockstep import EvalResult, GradientCorrection, LockstepEngine, TrainConfig
from wirelessfl.learning.models import Architecture
from wirelessfl.seam import AnalogAggregation, CommPlan, Stream, UplinkChannel


#: Cost of one forward pass relative to one training pass (forward + backward ~ 3 forwards), for ``work``.
FORWARD_COST = 1.0 / 3.0

@dataclass
class Context:
    """Everything an algorithm is built from (the same for every algorithm)."""

    data: FederatedData
    arch: Architecture
    engine: LockstepEngine
    train: TrainConfig
    seed: int
    participation: float = 1.0
    #: clients keep their optimizer state (momentum, Adam moments) from one round to the next
    keep_optimizer_state: bool = False
    #: sorted ids of clients held out of training (FedEM Table 3's unseen clients); never participants
    held_out: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: each client's nominal downlink rate (bit/s) under the unit's physical channel; None without one
    #: (given only to curves whose ``uses_channel`` is true, which then train per profile)
    downlink_rates: np.ndarray | None = None
    #: sorted ids of devices whose battery budget is spent (the simulation updates it between rounds); never participants
    out_of_energy: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: ``training.scheduling`` and ``training.compression`` (docs/levers.md); None: every available client
    #: uploads its whole model
    scheduling: Scheduling | None = None
    compression: Compression | None = None
    #: the round's uplink channel state (``NetworkModel.uplink_channel``), set by the simulation for a
    #: channel-aware scheduling policy (which then trains per profile); None otherwise
    uplink_channel: Callable[[int], UplinkChannel] | None = None
    #: ``training.aggregation`` with ``mode: over_the_air`` (docs/levers.md), and the network's decision for a
    #: round's scheduled clients (who passed the truncation, the receiver's noise), set by the simulation
    over_the_air: OverTheAir | None = None
    analog: Callable[[int, np.ndarray], AnalogAggregation] | None = None
    #: ``training.server_optimizer`` (docs/levers.md): the server's step on the pseudo-gradient; None: the average
    server_optimizer: ServerOptimizer | None = None
    #: ``training.aggregation`` with ``mode: async`` (docs/levers.md): the server aggregates once ``buffer`` uploads
    #: have landed (the simulation's timing says which), clients train on the version they last received
    asynchronous: Asynchronous | None = None
    #: where per-client state lives (``learning.client_store``): RAM, or memory-mapped files under the run directory
    stores: ClientStores = field(default_factory=ClientStores)

    def __post_init__(self) -> None:
        if self.engine.normalisation != self.data.normalisation:
            raise ValueError(
                f"Context: the engine normalises inputs with {self.engine.normalisation!r} but the data needs "
                f"{self.data.normalisation!r}; build it as LockstepEngine(arch, device, normalisation=data.normalisation)"
            )

    def training_clients(self) -> np.ndarray:
        """The clients that may take part in training (all but the held-out ones and those out of energy), sorted."""
        return clients_except(self.num_clients, self.held_out, self.out_of_energy)

    @property
    def num_clients(self) -> int:
        return self.data.num_clients

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def train_sets(self, clients: np.ndarray | list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(self.data.clients[i].x_train, self.data.clients[i].y_train) for i in clients]

    def val_sets(self, clients: np.ndarray | list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(self.data.clients[i].x_val, self.data.clients[i].y_val) for i in clients]

    def test_sets(self, clients: np.ndarray | list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(self.data.clients[i].x_test, self.data.clients[i].y_test) for i in clients]

    def split_sets(self, split: str, clients: np.ndarray | list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The ``split`` ("train", "val" or "test") of each of ``clients``."""
        sets = {"train": self.train_sets, "val": self.val_sets, "test": self.test_sets}
        if split not in sets:
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        return sets[split](clients)

    def sizes(self) -> np.ndarray:
        return np.asarray(self.data.train_sizes, dtype=np.float64)


def derive_seed(seed: int, *keys: int | str) -> int:
    """A stable 63-bit seed for ``(seed, *keys)`` (strings hashed stably)."""
    words = [int(seed)]
    for key in keys:
        if isinstance(key, str):
            words.extend(key.encode())
        else:
            words.append(int(key))
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int, *keys: int | str) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, *keys))


def numpy_generator(seed: int, *keys: int | str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, *keys))


@dataclass
class StepInfo:
    """Per-round diagnostics an algorithm reports (FedJAX-style)."""

    train_loss: float
    aggregated: int
    extra: dict[str, Any] = field(default_factory=dict)


class Algorithm(ABC):
    """Base of every registered algorithm; see the module docstring."""

    #: the declaration (``wirelessfl/algorithms/spec.py``); every attribute below is read from it
    spec: ClassVar[AlgorithmSpec]
    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: every parameter's default by its YAML name
    hparams: ClassVar[dict[str, Any]] = {}
    #: what ``wirelessfl tune`` searches by default (``training.<field>`` or a name of ``hparams``)
    search_space: ClassVar[dict[str, Param]] = COMMON_SEARCH_SPACE
    #: True for a reference that reads what no real method can see (Oracle: the true groups); sweep maps show
    #: it beside the contest, never as a cell's winner.
    knows_truth: ClassVar[bool] = False
    #: True when the trained models do not depend on who arrives (e.g. Local).
    timing_independent: ClassVar[bool] = False
    #: The registered algorithm whose training this one repeats step for step, evaluating its models
    #: differently (FedAvg+ is FedAvg whose clients evaluate a fine-tuned copy). When a scenario has both, with
    #: the same parameters apart from ``evaluation_params`` and the same training, ``simulate`` trains them
    #: once: this curve follows the other's state (:meth:`follow`) instead of training its own.
    trains_as: ClassVar[str | None] = None
    #: The parameters that change only how a ``trains_as`` algorithm evaluates.
    evaluation_params: ClassVar[frozenset[str]] = frozenset()
    #: The levers this algorithm composes with ("scheduling", "compression", "aggregation", "server_optimizer";
    #: docs/levers.md); a scenario that sets another for it is refused in one line.
    levers: ClassVar[frozenset[str]] = frozenset()
    params: Params

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class with its own ``spec`` takes every attribute above from it; an old-style class that declares
        ``hparams`` (a dict of defaults) and the attributes itself gets a spec built from them."""
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is None:
            cls.spec = spec_from_hparams(cls)
            return
        cls.name, cls.paper, cls.description = spec.name, spec.paper, spec.description
        cls.hparams = spec.hparams
        cls.search_space = dict(spec.search_space)
        cls.knows_truth, cls.timing_independent = spec.knows_truth, spec.timing_independent
        cls.trains_as, cls.evaluation_params, cls.levers = spec.trains_as, spec.evaluation_params, spec.levers

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        unknown = sorted(set(hparams) - set(self.hparams))
        if unknown:
            allowed = ", ".join(sorted(self.hparams)) or "none"
            raise ValueError(f"{self.name}: unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
        self.ctx = ctx
        bad = self.spec.check(hparams)
        if bad:
            key, why = bad[0]
            raise ParamError(f"{self.name}: {key} {why}", self.name, key)
        self.params = self.spec.parse(hparams)
        self.optimizer_state = ClientOptimizerState(ctx)
        levers = (
            ("scheduling", ctx.scheduling), ("compression", ctx.compression),
            ("aggregation", ctx.over_the_air if ctx.over_the_air is not None else ctx.asynchronous),
            ("server_optimizer", ctx.server_optimizer),
        )
        for lever, given in levers:
            if given is not None and lever not in self.levers:
                takers = ", ".join(sorted(n for n, s in registry.SPECS.items() if lever in s.levers))
                raise ParamError(f"{self.name}: training.{lever} does not apply to {self.name}; it applies to {takers}", self.name)
        key = "participation" if ctx.participation >= 1.0 else "scheduling"  # random k of N is participation k/N
        self.scheduler = (
            Scheduler(ctx.scheduling, ctx.num_clients, lambda r, k, pool: self.sample_clients(r, k, pool, key), ctx.uplink_channel)
            if ctx.scheduling is not None else None
        )
        self.compressor = (
            Compressor(ctx.compression, ctx.num_clients, ctx.arch.param_count, ctx.stores) if ctx.compression is not None else None
        )
        self.server_optimizer: ServerOptimizerState | None = None  # a MixingAlgorithm's, over its models
        self.buffered = AsyncBuffer(ctx.asynchronous) if ctx.asynchronous is not None else None

    @classmethod
    def uses_channel(cls, params: Mapping[str, Any]) -> bool:
        """True when these parameters make training depend on the profile's channel (then the
        simulation trains this curve per profile and fills ``Context.downlink_rates``)."""
        del params
        return False

    # -- the two round questions -------------------------------------------
    @abstractmethod
    def plan(self, round: int) -> CommPlan: ...

    @abstractmethod
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo: ...

    @abstractmethod
    def client_params(self) -> torch.Tensor:
        """``[m, P]``: the model each client would use now."""

    # -- shared helpers ------------------------------------------------------
    def participants(self, round: int) -> np.ndarray:
        """Clients taking part in ``round``: the available ones (:meth:`available_clients`), or the ones the
        scenario's ``scheduling`` policy picks among them."""
        if self.buffered is not None:  # async: the idle clients, up to the synchronous round's count
            pool = self.ctx.training_clients()
            fraction = self.ctx.participation
            capacity = len(pool) if fraction >= 1.0 else max(1, int(round_half_up(fraction * len(pool))))
            return self.buffered.dispatch(round, pool, capacity, self.available_clients, self.sample_clients)
        available = self.available_clients(round)
        if self.scheduler is None:
            return available
        return self.scheduler.select(round, available, self.ctx.training_clients())

    def available_clients(self, round: int) -> np.ndarray:
        """Every training client, or a seeded uniform sample of them (``participation``)."""
        pool = self.ctx.training_clients()
        fraction = self.ctx.participation
        if fraction >= 1.0:
            return pool
        return self.sample_clients(round, max(1, int(round_half_up(fraction * len(pool)))), pool)

    def sample_clients(self, round: int, count: int, pool: np.ndarray, purpose: str = "participation") -> np.ndarray:
        """``count`` of ``pool`` drawn uniformly from ``(seed, round, purpose)``, sorted."""
        rng = numpy_generator(self.ctx.seed, round, purpose)
        return np.sort(pool[rng.choice(len(pool), size=count, replace=False)])

    def train_clients(
        self,
        round: int,
        members: np.ndarray,
        start: torch.Tensor,
        correction: GradientCorrection | None = None,
        optimizer_state: ClientOptimizerState | None = None,
        trainable: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, float]:
        """Local training of ``members`` from ``start`` ``[T, P]`` in one lockstep call: the scenario's
        optimizer (continuing each client's state in ``optimizer_state``, default ``self.optimizer_state``,
        when ``keep_optimizer_state``), the round's ``(seed, round, "train")`` shuffles and, given one, a
        ``correction`` added to every step's gradient (a proximal pull, a control variate); ``trainable``
        (bool ``[P]``) freezes the other coordinates. Returns the trained rows and the mean training loss."""
        kept = self.optimizer_state if optimizer_state is None else optimizer_state
        result = self.ctx.engine.train(
            start,
            self.ctx.train_sets(members),
            self.ctx.train,
            torch_generator(self.ctx.seed, round, "train"),
            opt_state=kept.take(members),
            correction=correction,
            trainable=trainable,
        )
        kept.put(members, result.opt_state)
        return result.params, mean_finite(result.loss)

    def held_out_clients(self) -> np.ndarray:
        """Clients that never train; evaluated apart (``unseen_acc``) on what the algorithm gives them."""
        return self.ctx.held_out.copy()

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """Each client's own model on its own ``split`` ("test", "val", or "train" for how well it fits): every
        client's, or only those of ``clients`` (sorted ids; a sampled evaluation), in their order."""
        if clients is None:
            sets = self.ctx.split_sets(split, np.arange(self.ctx.num_clients))
            return self.ctx.engine.evaluate(self.client_params(), sets)
        return self.ctx.engine.evaluate(self.params_of(clients), self.ctx.split_sets(split, clients))

    def evaluate_in_groups(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """:meth:`evaluate` with each group of slots making its own models by :meth:`params_of` (for a method whose
        ``params_of`` reads the clients' rows from a client store): the groups running at once hold rows, not the
        ``[m, P]`` of :meth:`client_params`; the same numbers, its rows being the same."""
        ids = np.arange(self.ctx.num_clients) if clients is None else np.asarray(clients)
        return self.ctx.engine.evaluate(lambda group: self.params_of(ids[group]), self.ctx.split_sets(split, ids))

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """``[len(clients), P]``: the models of ``clients`` (rows of :meth:`client_params`; a method that can
        gather them without building every client's row overrides this)."""
        params = self.client_params()
        return params[torch.as_tensor(clients, dtype=torch.long, device=params.device)]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        del state

    def record_uploads(self, round: int, members: np.ndarray, starts: torch.Tensor, uploads: Mapping[int, torch.Tensor]) -> None:
        """Tell the scheduler whose uploads arrived and, for ``importance``, the norm of each one's update
        (``uploads[i]`` less the model ``members[r] = i`` received and trained from, ``starts[r]``)."""
        if self.scheduler is None:
            return
        norms = None
        if self.scheduler.spec.reads_norms:
            row = {int(i): r for r, i in enumerate(members)}
            norms = {i: float(torch.linalg.vector_norm(u.double() - starts[row[i]].double())) for i, u in uploads.items()}
        self.scheduler.record(round, frozenset(uploads), norms)

    def lever_state(self) -> dict[str, Any]:
        """The scheduler's and the compressor's state for ``state_dict`` (nothing when neither is set, so
        checkpoints without levers hold what they held before)."""
        state: dict[str, Any] = {}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.compressor is not None:
            state["compressor"] = self.compressor.state_dict()
        if self.server_optimizer is not None:
            state["server_optimizer"] = self.server_optimizer.state_dict()
        if self.buffered is not None:
            state["async_buffer"] = self.buffered.state_dict()
        return state

    def load_lever_state(self, state: Mapping[str, Any]) -> None:
        if self.scheduler is not None and "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.compressor is not None and "compressor" in state:
            self.compressor.load_state_dict(state["compressor"], self.ctx.device)
        if self.server_optimizer is not None and "server_optimizer" in state:
            self.server_optimizer.load_state_dict(state["server_optimizer"])
        if self.buffered is not None and "async_buffer" in state:
            self.buffered.load_state_dict(state["async_buffer"], self.ctx.device)

    def follow(self, trainer: Algorithm, round: int) -> None:
        """Take the state ``trainer`` (an instance of ``trains_as``) has after ``round``, in place of training."""
        raise NotImplementedError(f"{self.name} trains its own models (trains_as is not set)")


def shared_trainings(curves: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> dict[int, int]:
    """``{follower: trainer}`` over ``(algorithm, params, training overrides)`` curves: the curves whose
    training another curve of the list repeats exactly (see ``Algorithm.trains_as``); each follows the
    first such trainer, which trains its own models."""
    def resolved(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return {**get_algorithm(name).hparams, **params}

    pairs: dict[int, int] = {}
    for i, (name, params, training) in enumerate(curves):
        cls = get_algorithm(name)
        if cls.trains_as is None:
            continue
        wanted = {k: v for k, v in resolved(name, params).items() if k not in cls.evaluation_params}
        for j, (other, other_params, other_training) in enumerate(curves):
            if (
                other == cls.trains_as
                and get_algorithm(other).trains_as is None
                and resolved(other, other_params) == wanted
                and dict(other_training) == dict(training)
            ):
                pairs[i] = j
                break
    return pairs


def mean_finite(values: torch.Tensor) -> float:
    """Mean of the finite entries (a slot that took no step has loss NaN), NaN when there are none."""
    finite = values[torch.isfinite(values)]
    return float(finite.mean()) if finite.numel() else float("nan")


def round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def clients_except(num_clients: int, *excluded: np.ndarray) -> np.ndarray:
    """``0 .. num_clients - 1`` without the ``excluded`` ids, sorted: a mask, not ``np.setdiff1d``'s sort of every
    id (at 100,000 clients 60 ms a call, several calls a round, for a round that trains 100)."""
    keep = np.ones(num_clients, dtype=bool)
    for ids in excluded:
        keep[np.asarray(ids, dtype=np.int64)] = False
    return np.flatnonzero(keep)


def draw_held_out(num_clients: int, fraction: float, seed: int) -> np.ndarray:
    """The clients held out of training: ``round(fraction * m)`` of them (at most m - 1), from the scenario seed.

    Drawn from the run's seed, not an algorithm's, so every algorithm of a run
    holds out the same clients and their unseen-client accuracies compare.
    """
    count = min(num_clients - 1, round_half_up(fraction * num_clients))
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(numpy_generator(seed, "held-out").choice(num_clients, size=count, replace=False)).astype(np.int64)


class MixingAlgorithm(Algorithm):
    """Server-side mixing of stacked models (FedAvg, Oracle, UCFL, CFL...).

    State: ``models`` ``[k, P]`` (one per downlink stream), ``assignment``
    ``[m]`` (the stream each client receives) and ``mixing`` ``[k, m]`` (row
    ``c``: weights over the clients' uploads that make stream ``c``).
    """

    def __init__(self, ctx: Context, **hparams: Any) -> None:
        super().__init__(ctx, **hparams)
        init = ctx.arch.init_flat(1, torch_generator(ctx.seed, "init")).to(ctx.device)
        self.models = init.clone()
        self.assignment = np.zeros(ctx.num_clients, dtype=np.int64)
        self.mixing = torch.as_tensor(ctx.sizes() / ctx.sizes().sum(), dtype=torch.float64)[None, :]
        if ctx.server_optimizer is not None:
            self.server_optimizer = ServerOptimizerState(ctx.server_optimizer, self.models)

    # -- plan ------------------------------------------------------------------
    def plan(self, round: int) -> CommPlan:
        members = self.participants(round)
        return CommPlan(
            streams=self.streams_for(members),
            uplink={int(i): self.upload_payload() for i in members},
            work={int(i): self.client_work() for i in members},
            model_params=self.ctx.arch.param_count,
            label=self.name,
        )

    def client_work(self) -> float:
        """One participant's local work in a round, relative to one training pass (the compute clock's factor)."""
        return 1.0

    def global_for_held_out(self, params: torch.Tensor, clients: np.ndarray | None = None) -> torch.Tensor:
        """``params`` (the rows of ``clients``; of every client when None) with each held-out client's row set to the
        global model, in place: a client that never trains has no personal model of its own (Ditto, pFedMe, APFL)."""
        ids = np.arange(len(params)) if clients is None else np.asarray(clients)
        held = np.isin(ids, self.ctx.held_out)
        if held.any():
            params[torch.as_tensor(held, device=params.device)] = self.models[0]
        return params

    def upload_payload(self) -> float:
        """One client's upload in model units: 1.0, or its compressed size."""
        return 1.0 if self.compressor is None else self.compressor.payload

    def streams_for(self, members: np.ndarray) -> tuple[Stream, ...]:
        streams = []
        for c in range(self.models.shape[0]):
            receivers = frozenset(int(i) for i in members if self.assignment[i] == c)
            if receivers:
                streams.append(Stream(1.0, receivers, f"stream-{c}"))
        return tuple(streams)

    # -- step ------------------------------------------------------------------
    def step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        if self.buffered is not None:
            return self.buffered_step(round, arrived)
        members = self.participants(round)
        received = self.models[torch.as_tensor(self.assignment[members], device=self.models.device)]
        trained, loss = self.local_training(round, members)
        if self.compressor is not None:
            trained = self.compressor.apply(members, received, trained, torch_generator(self.ctx.seed, round, "compression"))
        uploads = {int(i): trained[r] for r, i in enumerate(members) if int(i) in arrived}
        previous = self.models
        start = previous[0]
        self.models = self.aggregate(uploads)
        extra: dict[str, Any] = {}
        if self.ctx.analog is not None:  # over the air: one stream (fedavg), its digital aggregate plus the receiver's noise
            analog = self.ctx.analog(round, members)
            weights = self.mixing[0].to(self.models.device)
            noisy = analog_aggregate(self.models[0], start, uploads, weights, analog, torch_generator(self.ctx.seed, round, "over-the-air"))
            self.models = noisy[None, :]
            extra = {"truncated": len(analog.truncated), "noise_var": analog.noise_var}
            if analog.cells:
                extra |= {"cells": len(analog.cells), "truncated_share": truncated_share(analog, members)}
        self.models = self.server_update(previous, self.models, bool(uploads))
        self.record_uploads(round, members, received, uploads)
        return StepInfo(train_loss=loss, aggregated=len(uploads), extra=extra)

    def buffered_step(self, round: int, arrived: frozenset[int]) -> StepInfo:
        """Asynchronous round (``training.aggregation`` ``mode: async``): the clients dispatched this round train
        on the current model and join the updates in flight; the server takes the ``arrived`` ones (those the
        network landed by the buffer's filling, from this round or earlier) in one staleness-weighted step."""
        members = self.participants(round)
        received = self.received(members)
        trained, loss = self.local_training(round, members)
        self.buffered.add(round, members, trained, received)
        clients, thetas, bases, sigma = self.buffered.take(round, arrived)
        extra: dict[str, Any] = {"staleness": sigma}
        if clients:
            models, alpha_t = self.buffered.server_step(self.models, self.mixing, clients, thetas, bases, sigma)
            self.models = models
            extra["alpha_t"] = alpha_t
        return StepInfo(train_loss=loss, aggregated=len(clients), extra=extra)

    def server_update(self, previous: torch.Tensor, averaged: torch.Tensor, arrived: bool) -> torch.Tensor:
        """The new models: the average, or the ``training.server_optimizer`` step from ``previous`` on the
        pseudo-gradient ``previous - averaged`` (no step when nothing ``arrived``)."""
        if self.server_optimizer is None or not arrived:
            return averaged
        return self.server_optimizer.update(previous, averaged)

    def local_training(self, round: int, members: np.ndarray) -> tuple[torch.Tensor, float]:
        """Each member trains the stream it receives."""
        return self.train_clients(round, members, self.received(members))

    def received(self, members: np.ndarray) -> torch.Tensor:
        """``[T, P]``: the stream model each of ``members`` receives (its row of ``models`` by ``assignment``)."""
        return self.models[torch.as_tensor(self.assignment[members], device=self.models.device)]

    def aggregate(self, uploads: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """``models[c] = sum_j W[c, j] theta_j`` renormalised over arrived ``j``.

        A stream none of whose contributors arrived keeps its old model.
        """
        if not uploads:
            return self.models
        clients = torch.as_tensor(sorted(uploads), dtype=torch.long)
        stacked = torch.stack([uploads[int(i)] for i in clients])
        weights = self.mixing[:, clients].to(stacked.device)
        mass = weights.sum(dim=1, keepdim=True)
        mixed = (weights / mass.clamp_min(1e-300)).to(stacked.dtype) @ stacked
        keep = (mass.squeeze(1) <= 0).to(stacked.device)
        return torch.where(keep[:, None], self.models, mixed)

    def client_params(self) -> torch.Tensor:
        return self.models[torch.as_tensor(self.assignment, device=self.models.device)]

    def evaluate(self, split: str = "test", clients: np.ndarray | None = None) -> EvalResult:
        """Each client's stream model on its own ``split``: the engine reads the stream models by each client's
        ``assignment`` (no ``[m, P]`` copy of one model). A subclass whose clients use other models keeps the
        general rule."""
        if type(self).client_params is not MixingAlgorithm.client_params:
            return super().evaluate(split, clients)
        ids = np.arange(self.ctx.num_clients) if clients is None else np.asarray(clients)
        rows = torch.as_tensor(self.assignment[ids], dtype=torch.long)
        return self.ctx.engine.evaluate(self.models, self.ctx.split_sets(split, ids), rows=rows)

    def params_of(self, clients: np.ndarray) -> torch.Tensor:
        """Only the rows of ``clients``: a sampled evaluation of FedAvg at 100,000 clients gathers n rows, not m.
        A subclass whose clients use other models (Ditto's personal ones) keeps the general rule."""
        if type(self).client_params is not MixingAlgorithm.client_params:
            return super().params_of(clients)
        return self.models[torch.as_tensor(self.assignment[clients], device=self.models.device)]

    def state_dict(self) -> dict[str, Any]:
        return {
            "models": self.models.detach().cpu().clone(),
            "assignment": self.assignment.copy(),
            "mixing": self.mixing.clone(),
            "optimizer": self.optimizer_state.state_dict(),
            **self.lever_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.models = state["models"].to(self.ctx.device)
        self.assignment = np.asarray(state["assignment"]).copy()
        self.mixing = state["mixing"].clone()
        self.optimizer_state.load_state_dict(state.get("optimizer"))
        self.load_lever_state(state)


class ClientOptimizerState:
    """Each client's optimizer state between rounds when ``ctx.keep_optimizer_state`` (else nothing is kept).

    Rows are clients (or ``rows`` slots, e.g. FedEM's client x component); ``take`` hands the engine the rows of this round's
    participants and ``put`` stores what their training left. A client that has
    not trained yet has the optimizer's initial state (zeros, step count 0). The rows live in client stores
    (``ctx.stores``: RAM or disk), one per tensor of the optimizer's state.
    """

    def __init__(self, ctx: Context, rows: int | None = None) -> None:
        self.ctx = ctx
        self.rows = ctx.num_clients if rows is None else rows
        self.state: tuple | None = None  # stores allocated on first use, and only when state is kept

    def _allocate(self) -> tuple:
        initial = optim.build(self.ctx.train).init(torch.zeros(1, self.ctx.arch.param_count, device=self.ctx.device))
        return _map_leaves(lambda t: self.ctx.stores.new("optimizer", self.rows, t[0]), initial)

    def take(self, clients: np.ndarray) -> tuple | None:
        if not self.ctx.keep_optimizer_state:
            return None
        if self.state is None:
            self.state = self._allocate()
        return _map_leaves(lambda store: store.gather(clients), self.state)

    def put(self, clients: np.ndarray, trained: tuple) -> None:
        if self.state is None:
            return
        _scatter_rows(self.state, clients, trained)

    def state_dict(self) -> tuple | None:
        return None if self.state is None else _map_leaves(lambda store: store.state_dict(), self.state)

    def load_state_dict(self, state: tuple | None) -> None:
        if self.ctx.keep_optimizer_state and state is not None:
            if self.state is None:
                self.state = self._allocate()
            _load_leaves(self.state, state)


def _map_leaves(function: Callable[[Any], Any], state):
    """``function`` applied to every leaf (tensor or store) of a nested optimizer state."""
    if isinstance(state, tuple):
        return tuple(_map_leaves(function, inner) for inner in state)
    return function(state)


def _load_leaves(stores, state) -> None:
    if isinstance(stores, tuple):
        for inner_store, inner_state in zip(stores, state):
            _load_leaves(inner_store, inner_state)
        return
    stores.load_state_dict(state)


def _scatter_rows(target, clients: np.ndarray, source) -> None:
    if isinstance(target, ClientStore):
        target.scatter(clients, source)
        return
    for inner_target, inner_source in zip(target, source):
        _scatter_rows(inner_target, clients, inner_source)


def block_mixing(labels: np.ndarray, sizes: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
    """FedAvg inside each cluster: ``W[c, j] = n_j / sum_{l in c} n_l`` for ``j`` in ``c``.

    Returns the ``[k, m]`` mixing matrix and the assignment with clusters
    renumbered ``0..k-1`` in order of first appearance.
    """
    _, first, assignment = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    assignment = order[assignment]
    k = int(assignment.max()) + 1
    mixing = np.zeros((k, len(labels)))
    mixing[assignment, np.arange(len(labels))] = sizes
    mixing /= mixing.sum(axis=1, keepdims=True)
    return torch.as_tensor(mixing, dtype=torch.float64), assignment.astype(np.int64)


ALGORITHMS: dict[str, type[Algorithm]] = {}
"""The implementation classes imported so far, by name (``wirelessfl.algorithms.ALGORITHMS`` imports every built-in)."""


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: make ``cls`` available by its ``name`` in scenarios."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} needs a non-empty class attribute 'name' to be registered")
    if cls.name in ALGORITHMS and ALGORITHMS[cls.name] is not cls:
        raise ValueError(f"algorithm name {cls.name!r} is already registered by {ALGORITHMS[cls.name].__qualname__}")
    ALGORITHMS[cls.name] = cls
    registry.add(cls.spec)
    return cls


def get_algorithm(name: str) -> type[Algorithm]:
    """A registered algorithm by its name, or a user's ``Algorithm`` subclass by ``package.module:Class``."""
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    if ":" not in name and name not in registry.SPECS:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(sorted(registry.SPECS))}")
    return registry.implementation(name)


def is_registered(cls: type[Algorithm]) -> bool:
    """True for an algorithm of the registry (built in, or registered by ``register``), False for one by import path."""
    return ALGORITHMS.get(cls.name) is cls


def display_name(cls: type[Algorithm]) -> str:
    """How messages name ``cls``: its registered name, or ``module:Class`` for one by import path."""
    return cls.name if is_registered(cls) else f"{cls.__module__}:{cls.__qualname__}"


class AlgorithmError(ValueError):
    """An algorithm by import path that raised; one line naming its class and the call that failed."""


@contextmanager
def user_errors(cls: type[Algorithm], call: str) -> Iterator[None]:
    """Around a call into an algorithm by import path: whatever it raises becomes one ``AlgorithmError`` line
    naming the class and ``call``. A registered algorithm's errors pass unchanged (a bug there is ours)."""
    if is_registered(cls):
        yield
        return
    try:
        yield
    except AlgorithmError:
        raise
    except Exception as err:
        raise AlgorithmError(f"algorithm {display_name(cls)!r}: {call} raised {type(err).__name__}: {_first_line(err)}") from err


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.split("\n")[0].rstrip("\r") if text else "(no message)"


AlgorithmFactory = Callable[[Context], Algorithm]
