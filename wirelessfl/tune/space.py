"""Search spaces for ``wirelessfl tune``: what may be searched, over which values, written once per algorithm.

A space maps a *tunable* to a :class:`Param`. A tunable is one of the
algorithm's own hyper-parameters (``temperature``, ``components``...) or a
per-client training field written ``training.<field>`` (``training.lr``,
``training.local_epochs``), which a tuned scenario sets per algorithm. Each
algorithm declares its default space as ``search_space`` (its ``AlgorithmSpec``,
``wirelessfl/algorithms/spec.py``); a scenario's ``tune.algorithms.<name>`` block
adds or replaces entries (``null`` removes one). The :class:`Param` type itself lives
torch-free in ``wirelessfl.algorithms.search_space``, which the schema reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wirelessfl.algorithms.search_space import TRAINING_PREFIX, Param


def resolve_space(algorithm, fixed: Mapping[str, Any], override: Mapping[str, Param | None] | None) -> dict[str, Param]:
    """The space of one curve: ``algorithm.search_space`` less what the scenario fixes in ``params`` or
    ``variants`` (``fixed``), then the ``tune:`` block's entries (``None`` removes one); a name the block
    gives explicitly is searched even when the scenario fixes it."""
    space = {key: param for key, param in algorithm.search_space.items() if key not in fixed}
    for key, param in (override or {}).items():
        if param is None:
            space.pop(key, None)
        else:
            space[key] = param
    return space


def split_trial(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(algorithm params, training overrides)`` of a trial's sampled ``values``."""
    params = {k: v for k, v in values.items() if not k.startswith(TRAINING_PREFIX)}
    training = {k[len(TRAINING_PREFIX):]: v for k, v in values.items() if k.startswith(TRAINING_PREFIX)}
    return params, training
