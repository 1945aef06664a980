"""A unit's name (its checkpoint files' stem) and its stamp (what its checkpoints were written for).

A unit is one curve x seed (x profile when the network changes its training).
Its stamp covers only what that unit trains, so a run that gains a curve or a
seed keeps every finished unit, and an edit to a unit's own settings refuses it.
"""

from __future__ import annotations

import hashlib
import json

from wirelessfl.config import FINGERPRINT_IGNORES, Scenario, resolved, scenario_fingerprint
from wirelessfl.network import SystemProfile
from wirelessfl.run.curves import Curve, curves_of, has_budgets, profiles_can_change_training


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def unit_key(seed: int, curve: Curve, profile: SystemProfile | None) -> str:
    """The name of a unit's checkpoints: ``seed{seed}__{curve}`` (``__{profile}`` when trained per profile)."""
    suffix = f"__{profile.name}" if profile is not None else ""
    return f"seed{seed}__{_slug(curve.curve)}{suffix}"


def unit_fingerprint(scenario: Scenario, curve: Curve, seed: int) -> str:
    """SHA-256 of what one unit trains and times: the scenario's fingerprinted fields but its list of
    algorithms and seeds, plus this curve (algorithm, variant, label, parameters, training) and seed.

    Common random numbers make a unit's trace independent of the other curves and seeds, so a run whose
    scenario.yaml gains a curve or a seed resumes with every finished unit kept, and only an edit that
    changes a unit's own settings refuses its checkpoints."""
    content = {
        key: value
        for key, value in resolved(scenario).items()
        if key not in FINGERPRINT_IGNORES and key not in ("algorithms", "seeds")
    }
    content["unit"] = {
        "seed": seed, "algorithm": curve.algorithm, "variant": curve.variant, "curve": curve.curve,
        "params": curve.params, "training": curve.training,
    }  # fmt: skip
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def unit_keys(scenario: Scenario) -> list[list[tuple[int, str]]]:
    """Per curve of :func:`curves_of`, its units as ``(seed, unit key)``: one per seed, or one per seed and
    profile when the profiles can change what it trains."""
    profiles, budgets = scenario.profiles(), has_budgets(scenario)
    keys = []
    for curve in curves_of(scenario):
        each = profiles if profiles_can_change_training(profiles, curve, budgets) else [None]
        keys.append([(seed, unit_key(seed, curve, profile)) for seed in scenario.seeds for profile in each])
    return keys


def unit_stamps(scenario: Scenario) -> dict[str, tuple[str, ...]]:
    """``{unit key: the stamps its checkpoints may carry}``: the unit's fingerprint, and the whole
    scenario's (:func:`scenario_fingerprint`), which checkpoints written before units had their own carry
    (still valid while the scenario is unchanged)."""
    legacy = scenario_fingerprint(scenario)
    return {
        key: (unit_fingerprint(scenario, curve, seed), legacy)
        for curve, units in zip(curves_of(scenario), unit_keys(scenario))
        for seed, key in units
    }
