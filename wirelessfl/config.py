"""Typed scenario files: YAML in, a validated ``Scenario`` out.

The schema is pydantic with ``extra="forbid"`` and ``strict=True`` everywhere,
so a typo is an error, not a silently ignored key, and ``rounds: true`` is not
read as 1. The YAML is read with PyYAML's safe loader, extended only to reject a
key given twice. Every problem is reported as one
``ScenarioError`` line per bad field: the YAML path of the field (e.g.
``algorithms[1].variants.streams``) and what is allowed. Network profiles are
validated by the network package's own ``SystemProfile.from_dict`` (once: the
scenario keeps the typed profiles) and algorithm parameters against each
algorithm's declaration (``wirelessfl/algorithms/spec.py``: typed parameters,
client bounds, levers), so there is one source of truth for each rule. Reading
a scenario imports no torch for the built-in algorithms (``tests/test_torch_free.py``).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from wirelessfl.algorithms import registry
from wirelessfl.algorithms.search_space import PER_ALGORITHM_TRAINING, parse_param, tunables
from wirelessfl.algorithms.spec import AlgorithmSpec, ParamError
from wirelessfl.learning.catalog import ARCHITECTURES
from wirelessfl.learning.catalog import split_import_path as split_model_path
from wirelessfl.learning.data.catalog import DATASETS, check_samples_spec, parse_steps
from wirelessfl.user_code import split_import_path


def first_line(message: str, fallback: str = "") -> str:
    """The first line of an exception's message (``fallback`` when it is empty). Only ``\n`` ends a line:
    ``str.splitlines`` would also cut at a U+0085 or U+2028 inside a key that a YAML file gave."""
    text = message.strip()
    return text.split("\n")[0].rstrip("\r") if text else fallback


class ScenarioError(ValueError):
    """A scenario the tool cannot run; the message says where and why."""


# A scenario is a short file of settings. These bounds refuse, in one line and
# before any work, inputs that would otherwise run out of time or memory while
# being read or validated (a 50 MB file, millions of seeds, an alias bomb) or
# make names no file system accepts. The cost of a valid run is another check's.
MAX_FILE_BYTES = 1_000_000
MAX_VALUES = 100_000
MAX_DEPTH = 32
MAX_DESCRIPTION = 10_000
MAX_NAME = 100
MAX_CURVE_BYTES = 100
MAX_SEEDS = 1_000
MAX_SEED = 2**63 - 1
MAX_CLIENTS = 100_000
MAX_CURVES = 1_000
MAX_NETWORKS = 100
MAX_SWEEP_POINTS = 1_000
MAX_ROUNDS = 100_000
"""Rounds of a run (and of a tuning trial). Every round is trained, timed and recorded, so a run of more
rounds takes days at the least; the papers run hundreds. A larger number is a typo, refused with this bound."""


class _Strict(BaseModel):
    """No unknown keys, no coercion (``rounds: true`` or ``lr: "0.1"`` is an error, not 1 or 0.1),
    no NaN or infinity in a number field (``lr: .inf`` is refused here, named by its field); where a field
    takes infinity (a sweep's ``mu: [.inf, 0.2]``) the resolved scenario writes it back as ``.inf``, not null."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, ser_json_inf_nan="constants")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (safe tags only) that rejects a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {_shown(key)}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads 1e-8 as a string; YAML 1.2 and users read it as a number.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _bounded_rounds(rounds: int) -> int:
    if rounds > MAX_ROUNDS:
        raise ValueError(
            f"{rounds} is more than the {MAX_ROUNDS:,} rounds a run may have (every round is trained, timed and "
            "recorded, so more would take days at the least; the papers run hundreds)"
        )
    return rounds


class DataConfig(_Strict):
    dataset: str = Field("digits", description="dataset name (see `wirelessfl list`) or 'package.module:loader'")
    root: str | None = Field(None, description="folder holding torchvision-format datasets")
    download: bool = Field(False, description="let torchvision download a missing dataset")
    options: dict[str, Any] = Field(default_factory=dict, description="dataset options, e.g. {split: byclass}")
    clients: int = Field(20, ge=1, le=MAX_CLIENTS, description="number of users m")
    samples: dict[str, Any] = Field(
        default_factory=lambda: {"total": "all"}, description="{per_client: n} | {total: N|all} | {total: N, distribution: lognormal, sigma: s} | {per_client: n, reuse: r}"
    )
    partition: list[dict[str, Any]] = Field(
        default_factory=lambda: [{"name": "iid"}], min_length=1, description="splitter + optional group shifts"
    )
    split: list[float] = Field([0.6, 0.2, 0.2], description="per-client train/val/test fractions")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, value: str, info: ValidationInfo) -> str:
        if value in DATASETS:
            return value
        if ":" not in value:
            raise ValueError(f"unknown dataset {_shown(value)}; allowed: {', '.join(sorted(DATASETS))} or 'package.module:loader'")
        if split_import_path(value) is None:
            raise ValueError(f"a dataset by import path is written 'package.module:loader'; got {_shown(value)}")
        if (info.context or {}).get("import_models", True):  # as a user's model: imported (not called) when the run's code may run
            from wirelessfl.learning.data.user_datasets import resolve_loader

            resolve_loader(value)
        return value

    @field_validator("split")
    @classmethod
    def _split_sums_to_one(cls, value: list[float]) -> list[float]:
        if len(value) != 3:
            raise ValueError(f"must list 3 fractions [train, val, test]; got {value}")
        if min(value) < 0 or not math.isclose(sum(value), 1.0, abs_tol=1e-6) or value[0] <= 0 or value[2] <= 0:
            raise ValueError(f"train/val/test fractions must be >= 0, train and test > 0, summing to 1; got {list(value)}")
        return value

    @field_validator("samples", mode="before")
    @classmethod
    def _samples_spec(cls, value: object) -> object:
        check_samples_spec(value)
        return value

    @field_validator("partition")
    @classmethod
    def _known_partitioners(cls, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            parse_steps(steps)
        except TypeError as err:  # e.g. a list as a name, which the partition registry cannot look up
            raise ValueError(f"a value of the wrong type in {_shown(steps)} ({err})") from None
        return steps


class ModelConfig(_Strict):
    name: str = Field("lenet5", description="a built-in architecture (see `wirelessfl list`) or 'package.module:factory'")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    head: str | None = Field(None, description="parameter path of the personal head (default: the last layer with parameters)")

    @field_validator("name")
    @classmethod
    def _known_model(cls, value: str, info: ValidationInfo) -> str:
        if value in ARCHITECTURES:
            return value
        if ":" not in value:
            raise ValueError(f"unknown model {_shown(value)}; allowed: {', '.join(sorted(ARCHITECTURES))} or 'package.module:factory'")
        if (info.context or {}).get("import_models", True):
            from wirelessfl.learning.models import resolve_factory  # torch: only for a user's model, imported here anyway

            resolve_factory(value)  # one line naming what cannot be imported
        else:
            split_model_path(value)  # the spelling only: importing runs the module (see import_model)
        return value


class LrSchedule(_Strict):
    """The client rate divided in steps over rounds, as ``torch.optim.lr_scheduler.MultiStepLR`` stepped once a
    round (FedEM's ``--lr_scheduler multi_step``): round r trains at lr x gamma ** (milestones below r)."""

    milestones: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, description="rounds after which the rate is multiplied by gamma (increasing)"
    )
    gamma: float = Field(0.1, gt=0, le=1, description="factor at each milestone")

    @field_validator("milestones")
    @classmethod
    def _increasing(cls, milestones: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"must increase strictly, got {milestones}")
        return milestones

    def factor(self, round: int) -> float:
        """The rate's multiplier in ``round`` (1-based): gamma to the number of milestones before it."""
        return self.gamma ** sum(m < round for m in self.milestones)


class SchedulingConfig(_Strict):
    """``scheduling:``: which k of the clients available in a round train and upload (docs/levers.md)."""

    policy: Literal["random", "round_robin", "best_channel", "proportional_fair", "age", "importance"] = Field(
        ..., description="random | round_robin | best_channel (highest uplink SINR) | proportional_fair | age | importance (last update norm x rate)"
    )
    k: int = Field(..., ge=1, description="clients scheduled each round (at most data.clients)")

    def spec(self):
        from wirelessfl.algorithms.scheduling import Scheduling

        return Scheduling(self.policy, self.k)


class CompressionConfig(_Strict):
    """``compression:``: each upload compressed, the server decompresses it (docs/levers.md)."""

    method: Literal["qsgd", "top_k", "sign"] = Field(..., description="qsgd (bits) | top_k (fraction) | sign (scaled sign)")
    bits: int | None = Field(None, description="qsgd: bits per value, 2 to 32 (32: the float32 value itself)")
    fraction: float | None = Field(None, description="top_k: fraction of the coordinates sent, in (0, 1]")
    error_feedback: bool | None = Field(None, description="keep what was not sent for the next upload (default: on for top_k and sign)")

    @field_validator("bits")
    @classmethod
    def _bits_in_range(cls, bits: int | None, info) -> int | None:
        if bits is not None and not 1 <= bits <= 32:
            raise ValueError(f"must be from 1 to 32 bits per value, got {bits}")
        if bits == 1 and info.data.get("method") == "qsgd":
            raise ValueError("qsgd needs 2 to 32 bits per value (one is the sign), got 1; one bit per value is method: sign")
        return bits

    @field_validator("fraction")
    @classmethod
    def _fraction_in_range(cls, fraction: float | None) -> float | None:
        if fraction is not None and not 0 < fraction <= 1:
            raise ValueError(f"must be in (0, 1] (the fraction of the coordinates sent), got {fraction}")
        return fraction

    @model_validator(mode="after")
    def _fields_of_the_method(self) -> CompressionConfig:
        if self.method == "qsgd" and self.bits is None:
            raise ValueError("qsgd needs bits: (2 to 32 bits per value)")
        if self.method != "qsgd" and self.bits is not None:
            raise ValueError(f"bits: only qsgd takes bits ({self.method} sends {'1 bit' if self.method == 'sign' else '32 bits'} per value)")
        if self.method == "top_k" and self.fraction is None:
            raise ValueError("top_k needs fraction: (the fraction of the coordinates sent, in (0, 1])")
        if self.method != "top_k" and self.fraction is not None:
            raise ValueError("fraction: only top_k takes a fraction")
        return self

    def spec(self):
        from wirelessfl.algorithms.compression import Compression

        return Compression(self.method, self.bits, self.fraction, self.error_feedback)


class AggregationConfig(_Strict):
    """``aggregation:``: how the uploads reach the server: ``digital`` (each its own upload), ``over_the_air``
    (all at once in analog, summed by the channel) or ``async`` (buffered asynchronous aggregation; docs/levers.md)."""

    mode: Literal["digital", "over_the_air", "async"] = Field(
        ..., description="digital | over_the_air (analog sum on a physical uplink) | async (aggregate every buffer uploads)"
    )
    truncation_db: float | None = Field(
        None, description="over_the_air: devices whose instantaneous uplink SNR at full power is below this (dB) sit the round out; none: no truncation"
    )
    receiver_noise: bool = Field(True, description="over_the_air: the receiver adds its noise (false: a noiseless receiver, infinite SNR)")
    buffer: int | None = Field(
        None, description="async: the server aggregates once this many uploads have landed (1 to the clients of a round)"
    )
    staleness: Literal["constant", "polynomial", "hinge"] | None = Field(
        None, description="async: weight of an update that missed sigma aggregations: constant 1 | polynomial (sigma+1)^-a | hinge (default constant)"
    )
    a: float | None = Field(None, description="async, polynomial and hinge: the decay a > 0")
    b: int | None = Field(None, description="async, hinge: the aggregations an update may miss at full weight, b >= 0")
    alpha: float | None = Field(None, description="async: the server's mixing rate in (0, 1] (default 1)")

    @field_validator("truncation_db")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError(f"must be a finite number of dB (leave it out for no truncation), got {value}")
        return value

    @field_validator("buffer")
    @classmethod
    def _positive_buffer(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be at least 1 upload, got {value}")
        return value

    @field_validator("a")
    @classmethod
    def _positive_decay(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"must be a finite decay > 0, got {value}")
        return value

    @field_validator("b")
    @classmethod
    def _non_negative_hinge(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"must be a number of aggregations >= 0, got {value}")
        return value

    @field_validator("alpha")
    @classmethod
    def _mixing_rate(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value <= 1:
            raise ValueError(f"must be in (0, 1] (the server's mixing rate), got {value}")
        return value

    @model_validator(mode="after")
    def _fields_of_the_mode(self) -> AggregationConfig:
        if self.mode != "over_the_air" and (self.truncation_db is not None or not self.receiver_noise):
            raise ValueError("truncation_db and receiver_noise: only mode: over_the_air takes them")
        given = [k for k in ("buffer", "staleness", "a", "b", "alpha") if getattr(self, k) is not None]
        if self.mode != "async":
            if given:
                raise ValueError(f"{', '.join(given)}: only mode: async takes {'it' if len(given) == 1 else 'them'}")
            return self
        if self.buffer is None:
            raise ValueError("async needs buffer: (how many uploads the server waits for, at least 1)")
        rule = self.staleness or "constant"
        if rule in ("polynomial", "hinge") and self.a is None:
            raise ValueError(f"staleness {rule} needs a: (the decay, > 0)")
        if rule != "hinge" and self.b is not None:
            raise ValueError(f"b: only staleness: hinge takes b, not {rule}")
        if rule == "hinge" and self.b is None:
            raise ValueError("staleness hinge needs b: (the aggregations an update may miss at full weight, >= 0)")
        if rule == "constant" and self.a is not None:
            raise ValueError("a: only staleness polynomial and hinge take a, not constant")
        return self

    def spec(self):
        """The learning side's ``OverTheAir``; None for digital and async aggregation."""
        from wirelessfl.algorithms.over_the_air import OverTheAir

        return OverTheAir(self.truncation_db, self.receiver_noise) if self.mode == "over_the_air" else None

    def async_spec(self):
        """The learning side's ``Asynchronous``; None unless ``mode: async``."""
        from wirelessfl.algorithms.asynchronous import Asynchronous

        if self.mode != "async":
            return None
        return Asynchronous(self.buffer, self.staleness or "constant", self.a, self.b, 1.0 if self.alpha is None else self.alpha)


class ServerOptimizerConfig(_Strict):
    """``server_optimizer:``: the server's step on the pseudo-gradient x - mean(uploads) (Reddi et al., ICLR 2021;
    docs/levers.md)."""

    name: Literal["sgd", "momentum", "adam", "yogi", "adagrad"] = Field(
        ..., description="sgd (lr 1: FedAvg) | momentum (FedAvgM) | adam | yogi | adagrad"
    )
    lr: float = Field(..., gt=0, description="the server's rate eta")
    momentum: float | None = Field(None, ge=0, lt=1, description="momentum: its coefficient (default 0.9)")
    betas: list[Annotated[float, Field(ge=0, lt=1)]] | None = Field(
        None, min_length=2, max_length=2, description="adam, yogi: (beta1, beta2) (default [0.9, 0.99])"
    )
    tau: float | None = Field(None, gt=0, description="adam, yogi, adagrad: the adaptivity tau (default 1e-3)")

    @model_validator(mode="after")
    def _fields_of_the_rule(self) -> ServerOptimizerConfig:
        takers = {"momentum": ("momentum",), "betas": ("adam", "yogi"), "tau": ("adam", "yogi", "adagrad")}
        for key, names in takers.items():
            if getattr(self, key) is not None and self.name not in names:
                raise ValueError(f"{key}: taken by {', '.join(names)} only, not {self.name}")
        return self

    def spec(self):
        from wirelessfl.algorithms.server_optimizer import ServerOptimizer

        given = {"momentum": self.momentum, "betas": None if self.betas is None else tuple(self.betas), "tau": self.tau}
        return ServerOptimizer(self.name, self.lr, **{k: v for k, v in given.items() if v is not None})


#: ``training:`` fields an algorithm may also set for itself (``algorithms[i].training``), beside the tunable ones
PER_ALGORITHM_LEVERS = ("scheduling", "compression", "aggregation", "server_optimizer")


class TrainingConfig(_Strict):
    local_epochs: int = Field(1, ge=1, description="local epochs per round")
    batch_size: int = Field(32, ge=1)
    optimizer: Literal["sgd", "adam", "adamw"] = Field("sgd", description="client optimizer (equal to torch.optim's)")
    lr: float = Field(0.1, gt=0, description="learning rate (user-centric-fl: 0.1 with SGD)")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (user-centric-fl: 0.9)")
    nesterov: bool = Field(False, description="Nesterov momentum (sgd with momentum > 0)")
    betas: list[Annotated[float, Field(ge=0, lt=1)]] = Field(
        default_factory=lambda: [0.9, 0.999], min_length=2, max_length=2, description="Adam/AdamW (beta1, beta2)"
    )
    eps: float = Field(1e-8, gt=0, description="Adam/AdamW epsilon")
    weight_decay: float = Field(0.0, ge=0, description="L2 in the gradient (sgd, adam); decoupled (adamw)")
    clip_norm: float | None = Field(None, gt=0, description="clip each client's gradient norm before the step")
    keep_optimizer_state: bool = Field(
        False, description="clients keep their optimizer state (momentum, Adam moments) between rounds"
    )
    participation: float = Field(1.0, gt=0, le=1, description="fraction of clients sampled each round")
    unseen_fraction: float = Field(
        0.0, ge=0, lt=1, description="clients held out of training, evaluated apart as unseen_acc (FedEM Table 3)"
    )
    lr_schedule: LrSchedule | None = Field(
        None, description="the client rate multiplied by gamma after each milestone round (MultiStepLR); none: constant"
    )
    scheduling: SchedulingConfig | None = Field(
        None, description="which k of the available clients upload each round (docs/levers.md); none: all of them"
    )
    compression: CompressionConfig | None = Field(
        None, description="compressed uploads: qsgd, top_k or sign (docs/levers.md); none: the float32 model"
    )
    aggregation: AggregationConfig | None = Field(
        None, description="digital or over_the_air aggregation of the uploads (docs/levers.md); none: digital"
    )
    server_optimizer: ServerOptimizerConfig | None = Field(
        None, description="the server's step on x - mean(uploads): sgd, momentum, adam, yogi, adagrad (docs/levers.md); none: the mean"
    )

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> TrainingConfig:
        if self.nesterov and not (self.optimizer == "sgd" and self.momentum > 0):
            raise ValueError("training.nesterov: needs optimizer: sgd with momentum > 0")
        return self

    def train_config(self):
        """The learning side's ``TrainConfig`` for these settings."""
        from wirelessfl.learning.lockstep import TrainConfig

        return TrainConfig(
            epochs=self.local_epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            optimizer=self.optimizer,
            nesterov=self.nesterov,
            betas=(self.betas[0], self.betas[1]),
            eps=self.eps,
            clip_norm=self.clip_norm,
        )


class AlgorithmConfig(_Strict):
    name: str
    label: str | None = Field(None, description="curve name; default: name plus the variant values")
    params: dict[str, Any] = Field(default_factory=dict, description="fixed hyper-parameters")
    variants: dict[str, list[Any]] = Field(
        default_factory=dict, description="hyper-parameter lists; their product gives one curve each"
    )
    training: dict[str, Any] | None = Field(
        None, description="this algorithm's own training fields (lr, local_epochs, optimizer...), over training: (what `tune` writes)"
    )

    @model_validator(mode="after")
    def _known_algorithm_and_params(self) -> AlgorithmConfig:
        if ":" not in self.name and self.name not in registry.SPECS:
            raise ValueError(
                f"unknown algorithm {_shown(self.name)}; allowed: {', '.join(sorted(registry.SPECS))} or 'package.module:Class'"
            )
        allowed = self.spec().hparams  # by import path: one line naming what cannot be imported
        for key in [*self.params, *self.variants]:
            if key not in allowed:
                names = ", ".join(sorted(allowed)) or "none"
                raise ValueError(f"{self.name} has no parameter {_shown(key)}; allowed: {names}")
        for key, values in self.variants.items():
            if not values:
                raise ValueError(f"variants.{key} must list at least one value")
        if self.training is not None:
            allowed = (*PER_ALGORITHM_TRAINING, *PER_ALGORITHM_LEVERS)
            unknown = sorted(set(self.training) - set(allowed))
            if unknown:
                raise ValueError(f"training: {', '.join(unknown)} cannot be set per algorithm; allowed: {', '.join(allowed)}")
        points = math.prod(len(values) for values in self.variants.values())
        if points > MAX_CURVES:
            sizes = " x ".join(str(len(values)) for values in self.variants.values())
            raise ValueError(f"variants: the grid has {points} curves ({sizes}); at most {MAX_CURVES} allowed")
        return self

    def spec(self) -> AlgorithmSpec:
        """The algorithm's declaration (a user's class by import path is imported)."""
        return registry.spec_of(self.name)

    def bad_params(self) -> str | None:
        """``params.key: why`` or ``variants.key: why`` for the first value of this entry's grid its declaration
        refuses; None when every curve's parameters are valid."""
        spec = self.spec()
        for _, _, params in self.expand():
            for key, why in spec.check(params):
                return f"{'variants' if key in self.variants else 'params'}.{key}: {why}"
        return None

    def expand(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(variant, curve, params)`` for every point of the variant grid."""
        keys = list(self.variants)
        out = []
        for values in itertools.product(*(self.variants[k] for k in keys)):
            chosen = dict(zip(keys, values))
            variant = " ".join(f"{k}={v}" for k, v in chosen.items())
            base = self.label or self.name
            out.append((variant, f"{base} {variant}".strip(), {**self.params, **chosen}))
        return out


class TuneConfig(_Strict):
    """``tune:``: the budget of ``wirelessfl tune`` and changes to the algorithms' search spaces."""

    trials: int = Field(20, ge=1, le=10_000, description="trials per curve (completed and pruned ones count)")
    rounds: int | None = Field(None, ge=1, description="rounds of each trial (default: the scenario's rounds)")
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = Field(
        None, min_length=1, max_length=MAX_SEEDS, description="seeds of each trial (default: the scenario's first seed)"
    )
    last_rounds: int = Field(3, ge=1, description="the objective: mean validation accuracy over this many last evaluated rounds")
    batch: int = Field(2, ge=1, le=64, description="trials of a curve sampled together and run at once (results do not depend on --workers)")
    sampler_seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the TPE sampler")
    startup_trials: int = Field(5, ge=0, description="random trials before TPE models the results")
    pruner: Literal["median", "none"] = Field("median", description="stop a trial whose validation curve is below the median of finished ones")
    warmup_rounds: int = Field(3, ge=0, description="rounds a trial always runs before it may be pruned")
    algorithms: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per algorithm: NAME -> {tunable: {low, high[, log]} | {choices: [...]} | null}"
    )

    @field_validator("rounds")
    @classmethod
    def _bounded_rounds(cls, rounds: int | None) -> int | None:
        return rounds if rounds is None else _bounded_rounds(rounds)

    @field_validator("algorithms")
    @classmethod
    def _valid_spaces(cls, blocks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, block in blocks.items():
            if ":" not in name and name not in registry.SPECS:
                raise ValueError(f"{name}: unknown algorithm; allowed: {', '.join(sorted(registry.SPECS))}")
            if not isinstance(block, dict):
                raise ValueError(f"{name}: must be a mapping of tunables to ranges, got {_yaml_type(block)}")
            allowed = tunables(registry.spec_of(name))
            for key, raw in block.items():
                if key not in allowed:
                    raise ValueError(f"{name}.{key}: not tunable for {name}; allowed: {', '.join(allowed)}")
                if raw is not None:
                    parse_param(raw, f"{name}.{key}")
        return blocks

    def overrides(self, name: str):
        """The ``Param`` (or ``None``: removed) per tunable this block gives for algorithm ``name``."""
        return {key: None if raw is None else parse_param(raw, key) for key, raw in self.algorithms.get(name, {}).items()}


class EvaluationConfig(_Strict):
    """``evaluation:``: how many clients each evaluated round measures (docs/results.md, "Sampled evaluation").
    ``every`` is read into ``eval_every`` (one field holds the cadence), so it is not kept here."""

    clients: int | Literal["all"] = Field(
        "all", description="a seeded sample of n clients per evaluated round (the last round evaluates all), or all"
    )

    @field_validator("clients", mode="before")
    @classmethod
    def _a_count_or_all(cls, clients: Any) -> Any:
        if clients != "all" and (not isinstance(clients, int) or isinstance(clients, bool) or clients < 2):
            raise ValueError(f"must be a number of clients, at least 2 (an interval needs two), or all; got {_shown(clients)}")
        return clients


class ClientStoreConfig(_Strict):
    """``client_store:``: where per-client state (Local's models, FedPer's heads, kept optimizer state) lives
    (``learning/client_store.py``); the traces are the same either way."""

    where: Literal["memory", "disk"] = Field(
        ..., description="memory (RAM) or disk (memory-mapped files; RAM holds the rows a round touches)"
    )
    path: str | None = Field(
        None, description="disk: the folder for the files (default: the run directory's store/ folder)"
    )

    @model_validator(mode="after")
    def _path_with_disk(self) -> ClientStoreConfig:
        if self.path is not None and self.where != "disk":
            raise ValueError("path: only where: disk takes a path")
        return self


class Scenario(_Strict):
    name: str = Field(
        ..., pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=MAX_NAME, description="run name (letters, digits, _ . -)"
    )
    description: str = Field("", max_length=MAX_DESCRIPTION)
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] = Field(
        default_factory=lambda: [0], min_length=1, max_length=MAX_SEEDS
    )
    rounds: int = Field(30, ge=1)
    eval_every: int = Field(1, ge=1)
    eval_last: int = Field(
        0, ge=0, description="also evaluate each of the last N rounds (for a mean over the last N rounds, as pflego.txt §4.4 reports)"
    )
    eval_train: bool = Field(
        False,
        description="also evaluate each client's model on its own training split at every evaluated round "
        "(fit_acc, fit_loss: one measure for every method, to tell under-fitting from over-fitting)",
    )
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig,
        description="{clients: n | all, every: r}: a seeded sample of n clients evaluated every r rounds (r is eval_every)",
    )
    target_accuracy: float = Field(0.8, gt=0, le=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    output: str = "results"
    checkpoint_every: int = Field(5, ge=1, description="rounds between resumable checkpoints")
    client_store: ClientStoreConfig | None = Field(
        None, description="{where: memory | disk, path}: where per-client state lives; none: memory, or disk when the memory guard's estimate needs it"
    )
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    algorithms: list[AlgorithmConfig] = Field(..., min_length=1, max_length=MAX_CURVES)
    networks: list[dict[str, Any]] = Field(
        default_factory=lambda: [{"preset": "wired"}], min_length=1, max_length=MAX_NETWORKS
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="grid for `wirelessfl sweep`: axis -> values (checked by wirelessfl.sweep; `simulate` ignores it)",
    )
    tune: TuneConfig | None = Field(None, description="budget and search spaces of `wirelessfl tune` (`simulate` ignores it)")
    tuned_from: str | None = Field(
        None, max_length=MAX_NAME,
        description="the tuning directory whose study chose this scenario's values (written by `wirelessfl tune` into tuned.yaml)",
    )

    _profiles: tuple = PrivateAttr(default=())

    @model_validator(mode="after")
    def _typed_profiles(self) -> Scenario:
        """The ``networks:`` entries parsed once into typed profiles (``profiles()``); first of the model
        checks, which read them."""
        profiles = _parse_profiles(self.networks)
        names = [profile.name for profile in profiles]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"networks: profile names must be unique, repeated: {', '.join(duplicates)} (set `name:`)")
        self._profiles = tuple(profiles)
        return self

    @field_validator("rounds")
    @classmethod
    def _bounded_rounds(cls, rounds: int) -> int:
        return _bounded_rounds(rounds)

    @model_validator(mode="before")
    @classmethod
    def _evaluation_every_is_eval_every(cls, raw: Any) -> Any:
        """``evaluation.every`` is another spelling of ``eval_every``: read into it, so that one field holds the
        cadence (and the resolved scenario writes it there); giving both is refused."""
        if not isinstance(raw, dict) or not isinstance(raw.get("evaluation"), dict) or "every" not in raw["evaluation"]:
            return raw
        evaluation = dict(raw["evaluation"])
        every = evaluation.pop("every")
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"evaluation.every: must be a whole number of rounds, at least 1; got {_shown(every)}")
        if "eval_every" in raw:
            raise ValueError("evaluation.every: eval_every also sets the rounds between evaluations; give one of them")
        return {**raw, "evaluation": evaluation, "eval_every": every}

    @model_validator(mode="after")
    def _evaluation_sample_within_clients(self) -> Scenario:
        """A sample cannot hold more clients than the population it is drawn from (the training clients)."""
        n = self.evaluation.clients
        m = self.data.clients
        held_out = min(m - 1, math.floor(self.training.unseen_fraction * m + 0.5)) if self.training.unseen_fraction > 0 else 0
        if n != "all" and n > m - held_out:
            population = (
                f"the clients (data.clients = {m})" if not held_out
                else f"the {m - held_out} training clients (data.clients = {m} less {held_out} held out by training.unseen_fraction)"
            )
            raise ValueError(f"evaluation.clients: {n} is more than {population}; at most {m - held_out}, or all")
        return self

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        repeated = sorted(s for s, n in Counter(seeds).items() if n > 1)
        if repeated:
            raise ValueError(f"must list each seed once; repeated: {', '.join(map(str, repeated))}")
        return seeds


    @field_validator("sweep")
    @classmethod
    def _bounded_sweep(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """Only the size: what the axes and values mean is ``wirelessfl.sweep``'s to check."""
        points = math.prod(len(values) for values in grid.values())
        if points > MAX_SWEEP_POINTS:
            sizes = " x ".join(str(len(values)) for values in grid.values())
            raise ValueError(f"the grid has {points} points ({sizes}); at most {MAX_SWEEP_POINTS} allowed")
        return grid

    @model_validator(mode="after")
    def _unique_curves(self) -> Scenario:
        total = sum(math.prod(len(v) for v in algo.variants.values()) for algo in self.algorithms)
        if total > MAX_CURVES:
            raise ValueError(f"algorithms: {total} curves in all (algorithms x variants); at most {MAX_CURVES} allowed")
        curves = [(index, curve) for index, algo in enumerate(self.algorithms) for _, curve, _ in algo.expand()]
        for index, curve in curves:
            if len(curve.encode()) > MAX_CURVE_BYTES:
                raise ValueError(
                    f"algorithms[{index}]: curve name {_shown(curve, 40)} is {len(curve.encode())} bytes (UTF-8), "
                    f"at most {MAX_CURVE_BYTES} (it names files; set a shorter `label:` or shorter variant values)"
                )
        counts = Counter(curve for _, curve in curves)
        repeated = sorted(c for c, n in counts.items() if n > 1)
        if repeated:
            raise ValueError(f"algorithms: curve names must be unique, repeated: {', '.join(repeated)} (set `label:`)")
        return self

    @model_validator(mode="after")
    def _algorithm_training_valid(self) -> Scenario:
        """Each algorithm's ``training:`` over the scenario's, checked by the same rules as ``training:``."""
        for index, algo in enumerate(self.algorithms):
            if algo.training:
                try:
                    self.training_for(algo.training)
                except ValidationError as err:
                    shown = [_describe(e) for e in err.errors(include_url=False)]
                    lines = [f"algorithms[{index}].{s if s.startswith('training.') else 'training.' + s}" for s in shown]
                    raise ValueError("; ".join(lines)) from None
                except ValueError as err:
                    raise ValueError(f"algorithms[{index}].{err}") from None
        return self

    @model_validator(mode="after")
    def _tune_names_known(self) -> Scenario:
        """A ``tune.algorithms`` entry names an algorithm of this scenario (a typo would tune nothing)."""
        if self.tune is not None:
            present = sorted({algo.name for algo in self.algorithms})
            for name in self.tune.algorithms:
                if name not in present:
                    raise ValueError(f"tune.algorithms.{name}: not an algorithm of this scenario; present: {', '.join(present)}")
        return self

    def training_for(self, overrides: dict[str, Any] | None) -> TrainingConfig:
        """``training:`` with an algorithm's own fields over it."""
        if not overrides:
            return self.training
        return TrainingConfig.model_validate({**self.training.model_dump(), **overrides})

    @model_validator(mode="after")
    def _params_valid(self) -> Scenario:
        """Every curve's parameters as its algorithm declares them (``AlgorithmSpec.params``)."""
        for index, algo in enumerate(self.algorithms):
            bad = algo.bad_params()
            if bad is not None:
                raise ValueError(f"algorithms[{index}].{bad}")
        return self

    @model_validator(mode="after")
    def _counts_within_clients(self) -> Scenario:
        """Per-client counts that cannot exceed the number of users m (each algorithm's ``client_bounds``):
        asking for more is asking for something that cannot exist (ucfl would silently run per-user
        aggregation instead)."""
        m = self.data.clients
        for index, algo in enumerate(self.algorithms):
            for bound in algo.spec().client_bounds:
                key = bound.param
                places = [("params", [algo.params[key]])] if key in algo.params else []
                places += [("variants", algo.variants[key])] if key in algo.variants else []
                if not places and bound.default_too:
                    places = [("params", [algo.spec().hparams[key]])]
                for place, values in places:
                    for value in values:
                        refusal = bound.refusal(value, m)
                        if refusal is not None:
                            raise ValueError(f"algorithms[{index}].{place}.{key}: {refusal}")
        return self

    @model_validator(mode="after")
    def _levers_fit_the_scenario(self) -> Scenario:
        """``scheduling.k`` at most the clients; a channel-aware policy only where every profile has a channel."""
        places = [("training", self.training)]
        places += [(f"algorithms[{i}].training", self.training_for(a.training)) for i, a in enumerate(self.algorithms) if a.training]
        m = self.data.clients
        for index, algo in enumerate(self.algorithms):
            _levers_apply(index, algo, self.training_for(algo.training))
        for where, training in places:
            _over_the_air_fits(where, training, self.profiles())
            _async_fits(where, training, self)
            scheduling = training.scheduling
            if scheduling is None:
                continue
            if scheduling.k > m:
                raise ValueError(f"{where}.scheduling.k: {scheduling.k} is more than the clients (data.clients = {m}); at most {m}")
            if scheduling.spec().reads_channel:
                for index, profile in enumerate(self.profiles()):
                    if profile.physical is None or profile.backend == "analytic":
                        raise ValueError(
                            f"{where}.scheduling.policy: {scheduling.policy} reads the uplink channel, which networks[{index}] "
                            f"({profile.name!r}) does not model (it needs physical: and backend: des); allowed there: random, "
                            "round_robin, age"
                        )
        return self

    def profiles(self) -> list:
        """The ``networks:`` entries as typed ``SystemProfile`` objects, parsed once (when the scenario was validated)."""
        return list(self._profiles)

    def energy_profiles(self) -> dict:
        """Profile name -> its ``EnergyProfile`` (the cited defaults where a ``networks:`` entry gives no ``energy:``);
        parsed once per distinct ``networks:`` list (a sweep unit asks for it per profile)."""
        return dict(_energy_profiles(json.dumps(self.networks, sort_keys=True)))

    def data_spec(self):
        from wirelessfl.learning.data.federated import DataSpec

        d = self.data
        return DataSpec(
            dataset=d.dataset,
            root=d.root,
            download=d.download,
            options=dict(d.options),
            num_clients=d.clients,
            samples=dict(d.samples),
            partition=tuple(dict(step) for step in d.partition),
            split=tuple(d.split),
        )


def _parse_profiles(entries: list[dict[str, Any]]) -> list:
    """Each ``networks:`` entry as a ``SystemProfile`` (its ``energy:`` checked against its compute groups); one
    ``ValueError`` line naming the entry when one is bad."""
    from wirelessfl.network import SystemProfile
    from wirelessfl.network.energy import EnergyProfile, split_entry

    profiles = []
    for index, raw in enumerate(entries):
        try:
            entry, energy = split_entry(raw)
            profile = SystemProfile.from_dict(entry)
            EnergyProfile.from_dict(energy).check_groups(profile.compute_groups)
        except ValueError as err:
            raise ValueError(f"networks[{index}]: {err}") from None
        except TypeError as err:  # e.g. a list as a preset name, which the preset registry cannot look up
            raise ValueError(f"networks[{index}]: a value of the wrong type in {_shown(raw)} ({err})") from None
        profiles.append(profile)
    return profiles


@lru_cache(maxsize=64)
def _energy_profiles(networks: str) -> dict:
    from wirelessfl.network import SystemProfile
    from wirelessfl.network.energy import EnergyProfile, split_entry

    entries = [split_entry(raw) for raw in json.loads(networks)]
    return {SystemProfile.from_dict(raw).name: EnergyProfile.from_dict(energy) for raw, energy in entries}


def _location(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("function-after", "function-before") or str(part).startswith(("function-", "tagged-union")):
            continue
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


_YAML_TYPES = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}


def _yaml_type(value: Any) -> str:
    return "null" if value is None else _YAML_TYPES.get(type(value), type(value).__name__)


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: a refused 10,000-character string is not echoed whole."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    loc = error["loc"]
    if loc and loc[-1] == "[key]":
        return f"{_location(loc[:-2])}: keys must be strings, got {_shown(error.get('input'))}"
    if kind == "invalid_key":
        return f"{_location(loc[:-1])}: keys must be strings, got {_shown(error.get('input'))}"
    where = _location(loc)
    if kind == "extra_forbidden":
        return f"{where}: unknown key (check the spelling; see README 'Scenario file')"
    if kind == "missing":
        return f"{where}: required field is missing"
    if kind in ("model_type", "dict_type"):
        return f"{where}: must be a mapping of keys to values ({{key: value, ...}}), got {_yaml_type(error.get('input'))}"
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if message.startswith(where) or (not loc and kind == "value_error"):
        return message
    if "input" in error and kind not in ("value_error",) and not isinstance(error["input"], (dict, list)):
        message += f" (got {_shown(error['input'])})"
    return f"{where}: {message}"


def _check_size(raw: Any, source: str) -> None:
    """Refuse a document with more than ``MAX_VALUES`` values or nested deeper than ``MAX_DEPTH``.

    Counted as the schema would walk it, each use of a YAML alias again, so an
    alias bomb (a few lines, billions of values) stops here after ``MAX_VALUES``
    steps instead of expanding in validation or in a curve name.
    """
    stack: list[tuple[Any, int, str]] = [(raw, 0, "")]
    count = 0
    while stack:
        value, depth, where = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ScenarioError(
                f"{source}: more than {MAX_VALUES:,} values (each use of a YAML alias counts); a scenario is a short file of settings"
            )
        if depth > MAX_DEPTH:
            raise ScenarioError(f"{source}: {where}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, (list, tuple, set)):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))


def parse_scenario(raw: Any, source: str = "scenario", import_models: bool = True) -> Scenario:
    """Validate a parsed YAML document; raise ``ScenarioError`` listing every bad field.

    Without ``import_models`` a ``package.module:factory`` model is checked for its spelling only and its
    module is not imported (importing runs its code): ``--resume`` first checks that the run's checkpoints
    were written for this scenario, then calls :func:`import_model`.
    """
    if raw is None:
        raise ScenarioError(f"{source}: the file is empty; a scenario needs at least name: and algorithms:")
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping of fields (name:, algorithms:, ...), got {type(raw).__name__}")
    _check_size(raw, source)
    try:
        return Scenario.model_validate(raw, context={"import_models": import_models})
    except ValidationError as err:
        lines = [_describe(e) for e in err.errors(include_url=False)]
        raise ScenarioError(f"{source}: " + "; ".join(lines)) from None


def apply_settings(raw: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """``--set PATH=VALUE`` overrides: a dotted YAML path (a number indexes a list) and a YAML value.

    ``training.lr=0.01`` or ``algorithms.0.params.temperature=0.1``. The result is
    validated like the file itself, so a misspelt key is rejected by the schema.
    """
    out = copy.deepcopy(raw)
    for setting in settings:
        path, sep, text = setting.partition("=")
        keys = path.strip().split(".")
        if not sep or not all(keys):
            raise ScenarioError(f"--set {setting}: expected PATH=VALUE, e.g. training.lr=0.01")
        if any(re.fullmatch(r"[^\[\]]*(\[\d+\])+", key) for key in keys):
            dotted = ".".join(re.sub(r"\[(\d+)\]", r".\1", key) for key in keys)
            raise ScenarioError(f"--set {setting}: a list position is a dotted index: {dotted}, not {path.strip()}")
        shown = setting if len(setting) <= 60 else setting[:57] + "..."
        try:
            value = yaml.load(text, Loader=_UniqueKeyLoader)
        except yaml.YAMLError:
            raise ScenarioError(f"--set {shown}: the value is not valid YAML") from None
        except ValueError:  # Python's limit on int("<more than 4300 digits>")
            raise ScenarioError(
                f"--set {shown}: the value has more digits than a number may have here (at most {sys.get_int_max_str_digits()})"
            ) from None
        node: Any = out
        for depth, key in enumerate(keys):
            where = ".".join(keys[: depth + 1])
            last = depth == len(keys) - 1
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise ScenarioError(f"--set {setting}: {where} must be a list index from 0 to {len(node) - 1}")
                key = int(key)
            elif not isinstance(node, dict):
                raise ScenarioError(f"--set {setting}: {'.'.join(keys[:depth])} is a value, not a mapping or list")
            if last:
                node[key] = value
            else:
                if isinstance(node, dict) and node.get(key) is None:
                    node[key] = {}
                node = node[key]
    return out


def load_scenario(
    path: str | Path, overrides: dict[str, Any] | None = None, settings: list[str] | None = None, import_models: bool = True
) -> Scenario:
    """Read, parse (safe YAML tags only, duplicate keys rejected) and validate a scenario file (``import_models``:
    see :func:`parse_scenario`)."""
    path = Path(path)
    if not path.exists():
        raise ScenarioError(f"{path}: no such scenario file")
    if not path.is_file():
        raise ScenarioError(f"{path}: not a file (give the path of a scenario YAML file)")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ScenarioError(
                f"{path}: the file is over {MAX_FILE_BYTES:,} bytes; a scenario is a short file of settings"
            )
        raw = yaml.load(data.decode("utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: not a UTF-8 text file (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read the scenario file: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or first_line(str(err))
        raise ScenarioError(f"{path}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: not valid YAML: nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ScenarioError:
        raise
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise ScenarioError(f"{path}: not valid YAML: {first_line(str(err))}") from None
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if given or settings:
        parse_scenario(raw, str(path), import_models)  # the file as written first: an override must not hide a bad value
    if isinstance(raw, dict) and given:
        raw = {**raw, **given}
    if isinstance(raw, dict) and settings:
        try:
            raw = apply_settings(raw, settings)
        except ScenarioError as err:
            raise ScenarioError(f"{path}: {err}") from None
    return parse_scenario(raw, str(path), import_models)


def names_user_model(scenario: Scenario) -> bool:
    """Whether the scenario's model is a user's ``package.module:factory`` (whose import runs its module)."""
    return scenario.model.name not in ARCHITECTURES


def names_user_dataset(scenario: Scenario) -> bool:
    """Whether the scenario's dataset is a user's ``package.module:loader`` (whose import runs its module)."""
    return ":" in scenario.data.dataset


def import_model(scenario: Scenario, source: str) -> None:
    """Import the model module (and a user dataset's loader module) of a scenario read with ``import_models=False``
    (this runs the module's code, as any Python import does); one ``ScenarioError`` line, as validation words it,
    when it cannot be imported."""
    from wirelessfl.learning.models import resolve_factory

    if names_user_model(scenario):
        try:
            resolve_factory(scenario.model.name)
        except ValueError as err:
            raise ScenarioError(f"{source}: model.name: {err}") from None
    if names_user_dataset(scenario):
        from wirelessfl.learning.data.user_datasets import resolve_loader

        try:
            resolve_loader(scenario.data.dataset)
        except ValueError as err:
            raise ScenarioError(f"{source}: {err}") from None


def algorithm_path(scenario: Scenario, error: ParamError) -> str:
    """``algorithms[i].params.key`` (or ``.variants.key``, or ``algorithms[i]``) for an algorithm's ``ParamError``:
    the first entry of that algorithm that sets the parameter at fault (else its first entry); "" when the
    scenario has no entry of that algorithm."""
    entries = [(i, algo) for i, algo in enumerate(scenario.algorithms) if registry.spec_of(algo.name).name == error.algorithm]
    if not entries:
        return ""
    key = error.param
    if key is not None:
        for index, algo in entries:
            if key in algo.variants:
                return f"algorithms[{index}].variants.{key}"
            if key in algo.params:
                return f"algorithms[{index}].params.{key}"
        return f"algorithms[{entries[0][0]}].params.{key}"
    return f"algorithms[{entries[0][0]}]"


def _levers_apply(index: int, algo: AlgorithmConfig, training: TrainingConfig) -> None:
    """Each lever set for ``algo`` (its own ``training:`` over the scenario's) is one its declaration composes with."""
    spec = algo.spec()
    for lever in PER_ALGORITHM_LEVERS:
        if getattr(training, lever) is not None and lever not in spec.levers:
            takers = ", ".join(sorted(name for name, other in registry.SPECS.items() if lever in other.levers))
            raise ValueError(f"algorithms[{index}]: {spec.name}: training.{lever} does not apply to {spec.name}; it applies to {takers}")


def _over_the_air_fits(where: str, training: TrainingConfig, profiles: list) -> None:
    """Over-the-air aggregation needs, in every profile, a physical uplink and no deadline (every device transmits
    together), and an update sent as it is (no compression). Block fading is per cell (docs/levers.md); its number
    of cells needs the model's size, so ``run.preflight`` checks it."""
    aggregation = training.aggregation
    if aggregation is None or aggregation.mode != "over_the_air":
        return
    field_ = f"{where}.aggregation.mode"
    if training.compression is not None:
        raise ValueError(f"{field_}: over_the_air sends each update in analog, uncompressed; remove {where}.compression")
    for index, profile in enumerate(profiles):
        named = f"networks[{index}] ({profile.name!r})"
        if profile.physical is None or profile.backend == "analytic":
            raise ValueError(
                f"{field_}: over_the_air needs a physical uplink, which {named} does not model (it needs physical: and backend: des)"
            )
        if profile.deadline is not None:
            raise ValueError(f"{field_}: over_the_air transmits every update together; {named} sets a deadline, which it does not model")


def _async_fits(where: str, training: TrainingConfig, scenario: Scenario) -> None:
    """Buffered asynchronous aggregation waits for ``buffer`` uploads of the clients in flight (the round's
    participants), keeps every idle client busy and makes its own server step, so it takes no scheduling,
    compression, server optimizer, deadline or battery budget (none of them is modelled with it)."""
    aggregation = training.aggregation
    if aggregation is None or aggregation.mode != "async":
        return
    m = scenario.data.clients
    if aggregation.buffer > m:
        raise ValueError(f"{where}.aggregation.buffer: {aggregation.buffer} is more than the clients (data.clients = {m}); at most {m}")
    held_out = min(m - 1, int(math.floor(training.unseen_fraction * m + 0.5))) if training.unseen_fraction > 0 else 0
    pool = m - held_out
    in_flight = pool if training.participation >= 1 else max(1, int(math.floor(training.participation * pool + 0.5)))
    if aggregation.buffer > in_flight:
        raise ValueError(
            f"{where}.aggregation.buffer: {aggregation.buffer} is more than the clients of a round ({in_flight}: participation "
            f"{training.participation:g} of {pool} training clients); at most {in_flight}"
        )
    field_ = f"{where}.aggregation.mode"
    for lever, why in (
        ("scheduling", "dispatches every idle client as soon as its update is taken"),
        ("compression", "sends each update uncompressed (compression with async is not built)"),
        ("server_optimizer", "makes its own server step (alpha)"),
    ):
        if getattr(training, lever) is not None:
            raise ValueError(f"{field_}: async {why}; remove {where}.{lever}")
    energies = scenario.energy_profiles()
    for index, profile in enumerate(scenario.profiles()):
        named = f"networks[{index}] ({profile.name!r})"
        if profile.deadline is not None:
            raise ValueError(f"{field_}: async has no round deadline (the buffer ends a round); {named} sets a deadline")
        if energies[profile.name].has_budget:
            raise ValueError(f"{field_}: async with battery budgets is not modelled; {named} sets a budget")


def canonical(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain data in the form its fingerprints hash: every field written out, network profiles
    included (a preset becomes its fields), except the optional blocks at their defaults, which are left out so
    that scenarios written before those blocks existed keep their fingerprints (``scenario_fingerprint``,
    ``run.keys.unit_fingerprint``, a sweep's unit keys). Two spellings of the same scenario compare equal."""
    content = scenario.model_dump(mode="json")
    content["networks"] = [profile.to_dict() for profile in scenario.profiles()]
    for key, default in _LEFT_OUT_AT_DEFAULT:
        if content[key] == default:
            del content[key]
    if content["evaluation"]["clients"] == "all":  # every client evaluated, as before the block existed
        del content["evaluation"]
    for key in TRAINING_LEFT_OUT_WHEN_NULL:
        if content["training"][key] is None:
            del content["training"][key]
    aggregation = content["training"].get("aggregation")
    if aggregation is not None:  # the async fields came later: left out when unset, so over-the-air stamps stay
        # (a digital or over-the-air block has them all unset)
        for key in AGGREGATION_LEFT_OUT_WHEN_NULL:
            if aggregation[key] is None:
                del aggregation[key]
    for algo in content["algorithms"]:
        if algo["training"] is None:
            del algo["training"]
    energies = scenario.energy_profiles()
    for entry, raw in zip(content["networks"], scenario.networks):
        if raw.get("energy") is not None:  # only where given, so scenarios without energy keep their fingerprint
            entry["energy"] = energies[entry["name"]].to_dict()
    return content


#: Top-level fields ``canonical`` leaves out at these values (they came after the first fingerprinted runs).
_LEFT_OUT_AT_DEFAULT = (("tune", None), ("tuned_from", None), ("eval_last", 0), ("eval_train", False), ("client_store", None))
#: ``training:`` fields ``canonical`` leaves out when null, for the same reason.
TRAINING_LEFT_OUT_WHEN_NULL = ("lr_schedule", "scheduling", "compression", "aggregation", "server_optimizer")
#: ``training.aggregation`` fields ``canonical`` leaves out when null (they came after over-the-air runs were stamped).
AGGREGATION_LEFT_OUT_WHEN_NULL = ("buffer", "staleness", "a", "b", "alpha")


def resolved(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain data with every default written out, in the schema's field order: what a run
    directory's scenario.yaml holds. Network profiles are resolved (a preset becomes its fields); a profile's
    ``energy:`` is written where the scenario gives one (the cited defaults otherwise, docs/results.md)."""
    complete = canonical(scenario)
    dumped = scenario.model_dump(mode="json")
    out = {key: complete.get(key, dumped[key]) for key in dumped}
    out["training"] = dumped["training"]
    aggregation = out["training"]["aggregation"]
    if aggregation is not None and aggregation["mode"] != "async":  # as written before async existed
        for key in AGGREGATION_LEFT_OUT_WHEN_NULL:
            del aggregation[key]
    for written, algo in zip(out["algorithms"], dumped["algorithms"]):
        written.setdefault("training", algo["training"])
    return out


def dump_scenario(scenario: Scenario) -> str:
    """The resolved scenario as YAML (every default written out, presets expanded); loads back to the same runs."""
    return yaml.safe_dump(resolved(scenario), sort_keys=False)


def is_dump_of(text: str, scenario: Scenario) -> bool:
    """Whether ``text`` is the scenario.yaml (or sweep.yaml, tune.yaml) that this version writes for ``scenario``,
    or the one versions before every default was written wrote (``canonical``): a folder written then still
    holds the same scenario."""
    return text in (dump_scenario(scenario), yaml.safe_dump(canonical(scenario), sort_keys=False))


#: Fields that cannot change what a unit trains or its records: editing them in a run folder's scenario.yaml
#: does not make its checkpoints stale (everything else does).
FINGERPRINT_IGNORES = ("description", "output", "checkpoint_every", "client_store", "target_accuracy", "sweep", "tune", "tuned_from")


def scenario_fingerprint(scenario: Scenario) -> str:
    """SHA-256 of what the scenario trains and times, to stamp checkpoints with.

    Profiles enter resolved (``{preset: wired}`` and its fields written out are
    the same network), so rewriting a scenario.yaml in canonical form keeps the
    stamp; ``FINGERPRINT_IGNORES`` are left out.
    """
    content = {key: value for key, value in canonical(scenario).items() if key not in FINGERPRINT_IGNORES}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
