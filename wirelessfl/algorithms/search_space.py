"""What ``wirelessfl tune`` may search, as plain data: the :class:`Param` type, the per-algorithm training
fields and the space every method searches unless its declaration says otherwise.

Torch-free and low in the layering, so that algorithm declarations (``wirelessfl.algorithms.specs``) and the
scenario schema read it without loading the learning stack.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Training fields a tuned scenario may set per algorithm (``algorithms[i].training``): how a client trains.
PER_ALGORITHM_TRAINING = (
    "local_epochs", "batch_size", "optimizer", "lr", "momentum", "nesterov", "betas", "eps", "weight_decay", "clip_norm",
)
TRAINING_PREFIX = "training."
#: The wireless levers' fields that are hyper-parameters (numbers a search can vary); a lever's policy or method
#: is a choice of design, set in the scenario. None is in a default space: accuracy alone would pick the
#: costliest setting (every client, 32 bits); name one in ``tune.algorithms`` to search it. Which algorithms
#: may search them is each one's declaration (``AlgorithmSpec.levers``).
LEVER_TUNABLES: dict[str, tuple[str, ...]] = {
    "scheduling": ("k",),
    "compression": ("bits", "fraction"),
    "aggregation": ("truncation_db", "buffer", "a", "b", "alpha"),
}


@dataclass(frozen=True)
class Param:
    """A range ``[low, high]`` (integers when both ends are, ``log`` for a log-uniform draw) or a list of ``choices``."""

    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None

    @classmethod
    def range(cls, low: float | int, high: float | int, log: bool = False) -> Param:
        """Integers when both ends are ints (``range(1, 5)``), else reals (``range(1e-3, 0.3, log=True)``)."""
        return cls(low, high, log)

    @classmethod
    def of(cls, *choices: Any) -> Param:
        return cls(choices=tuple(choices))

    @property
    def integer(self) -> bool:
        return self.choices is None and _is_int(self.low) and _is_int(self.high)

    def endpoints(self) -> list[Any]:
        """The values a scenario must accept for the whole space to be valid: both ends, or every choice."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, **({"log": True} if self.log else {})}

    def describe(self) -> str:
        if self.choices is not None:
            return "{" + ", ".join(map(str, self.choices)) + "}"
        return f"[{self.low:g}, {self.high:g}]{' log' if self.log else ''}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_param(raw: Any, where: str) -> Param:
    """A ``Param`` from YAML: ``{low: 1e-3, high: 0.3, log: true}`` or ``{choices: [1, 2]}``; one line naming ``where`` if bad."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be {{low: L, high: H[, log: true]}} or {{choices: [...]}}, got {raw!r}")
    keys = set(raw)
    if "choices" in raw:
        if keys != {"choices"}:
            raise ValueError(f"{where}: choices: stands alone (no low, high or log beside it)")
        choices = raw["choices"]
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"{where}.choices: must be a non-empty list, got {choices!r}")
        if any(isinstance(c, (dict, list)) for c in choices):
            raise ValueError(f"{where}.choices: each choice must be a number, a string, a boolean or null")
        if len({repr(c) for c in choices}) != len(choices):
            raise ValueError(f"{where}.choices: must list each value once, got {choices!r}")
        return Param(choices=tuple(choices))
    unknown = sorted(keys - {"low", "high", "log"})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: low, high, log, or choices alone")
    if not {"low", "high"} <= keys:
        raise ValueError(f"{where}: needs low: and high: (or choices:)")
    low, high, log = raw["low"], raw["high"], raw.get("log", False)
    if not (_is_number(low) and _is_number(high)):
        raise ValueError(f"{where}: low and high must be finite numbers, got low={low!r}, high={high!r}")
    if not isinstance(log, bool):
        raise ValueError(f"{where}.log: must be true or false, got {log!r}")
    if not low < high:
        raise ValueError(f"{where}: low must be below high, got low={low!r}, high={high!r}")
    if log and low <= 0:
        raise ValueError(f"{where}: a log range needs low > 0, got low={low!r}")
    return Param(low, high, log)


def tunables(algorithm: Any) -> list[str]:
    """Every name ``algorithm`` (its ``AlgorithmSpec`` or its class) can search: its hyper-parameters, the
    per-algorithm training fields and the fields ``training.<lever>.<field>`` of the wireless levers it
    composes with (its ``levers``; docs/levers.md)."""
    levers = getattr(algorithm, "levers", frozenset())
    lever_fields = [f"{TRAINING_PREFIX}{lever}.{name}" for lever, names in LEVER_TUNABLES.items() if lever in levers for name in names]
    return [*sorted(algorithm.hparams), *(TRAINING_PREFIX + f for f in PER_ALGORITHM_TRAINING), *lever_fields]


def lever_of(tunable: str) -> str | None:
    """The lever block a ``training.<lever>.<field>`` tunable searches in, else None."""
    parts = tunable.split(".")
    return parts[1] if len(parts) == 3 and parts[0] + "." == TRAINING_PREFIX and parts[1] in LEVER_TUNABLES else None


#: What ``wirelessfl tune`` searches for every method unless its declaration says otherwise: the client learning
#: rate (log-uniform over two and a half decades around the usual SGD rates) and one or two local epochs.
COMMON_SEARCH_SPACE: dict[str, Param] = {
    "training.lr": Param.range(1e-3, 0.3, log=True),
    "training.local_epochs": Param.of(1, 2),
}
