"""Search spaces for ``wirelessfl tune``: what may be searched, over which values, written once per algorithm.

A space maps a *tunable* to a :class:`Param`. A tunable is one of the
algorithm's own hyper-parameters (``temperature``, ``components``...), a
per-client training field written ``training.<field>`` (``training.lr``,
``training.local_epochs``), which a tuned scenario sets per algorithm, or a
wireless lever's field ``training.<lever>.<field>`` (``training.scheduling.k``,
``training.compression.bits``; docs/levers.md) for an algorithm whose
declaration lists the lever in its ``levers``, searched within the lever block
the curve runs with. Each algorithm declares its default space as
``search_space`` (its ``AlgorithmSpec``, ``wirelessfl/algorithms/spec.py``); a
scenario's ``tune.algorithms.<name>`` block adds or replaces entries (``null``
removes one). :class:`Param`, the tunables and the lever fields live torch-free
in ``wirelessfl.algorithms.search_space``, which the schema reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wirelessfl.algorithms.search_space import LEVER_TUNABLES, TRAINING_PREFIX, Param, lever_of


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
    """``(algorithm params, training overrides)`` of a trial's sampled ``values``; a lever's field becomes
    ``{lever: {field: value}}``, to be merged into the curve's lever block (:func:`merge_training`)."""
    params = {k: v for k, v in values.items() if not k.startswith(TRAINING_PREFIX)}
    training: dict[str, Any] = {}
    for key, value in values.items():
        if not key.startswith(TRAINING_PREFIX):
            continue
        lever = lever_of(key)
        if lever is None:
            training[key[len(TRAINING_PREFIX):]] = value
        else:
            training.setdefault(lever, {})[key.rsplit(".", 1)[1]] = value
    return params, training


def merge_training(fixed: Mapping[str, Any], sampled: Mapping[str, Any]) -> dict[str, Any]:
    """A curve's ``training`` overrides with a trial's over them; a lever's sampled fields go into its block."""
    out = dict(fixed)
    for key, value in sampled.items():
        out[key] = {**(fixed.get(key) or {}), **value} if key in LEVER_TUNABLES else value
    return out
