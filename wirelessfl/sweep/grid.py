"""Grid expansion: a base scenario and ``{axis: values}`` -> training units and generated profiles.

Three kinds of axis:

* network axes, a ``SystemProfile`` field (``rho``, ``mu``, ``channels``, ...)
  or ``physical.<field>`` or ``energy.<field>``: every base profile of ``networks:`` times every
  network point becomes one generated profile (``wired rho=2 mu=1``) of the
  SAME unit, so the network grid is timed by replay and costs no training;
* algorithm axes, ``algorithms.<name>.<param>``: the entry named (label, else
  name) gets ``variants: {param: values}``; the values are curves of one unit;
* scenario axes, any dotted path ``--set`` accepts (``training.lr``,
  ``data.partition.0.alpha``, ``seeds``): every point is its own unit. A
  wireless lever's field is one (``training.scheduling.k``,
  ``training.compression.bits``), also for one algorithm entry by its label or
  name (``algorithms.fedavg-q.training.compression.bits``, docs/levers.md); the
  block must be set where the axis sweeps it.

Every generated profile and unit scenario is validated here, before anything
runs; an error is one line naming the grid key and value. No torch here.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
import sys
from dataclasses import dataclass, fields
from typing import Any

import yaml

from wirelessfl.config import (
    MAX_NETWORKS, MAX_SWEEP_POINTS, PER_ALGORITHM_LEVERS, Scenario, ScenarioError, _UniqueKeyLoader, apply_settings, canonical,
    parse_scenario,
)
from wirelessfl.network import SystemProfile
from wirelessfl.network.energy import EnergyProfile, split_entry
from wirelessfl.network.profile import PhysicalChannel

NETWORK_FIELDS = tuple(f.name for f in fields(SystemProfile) if f.name not in ("name", "description"))
PHYSICAL_FIELDS = tuple(f.name for f in fields(PhysicalChannel))
NOT_AXES = ("name", "description", "output", "networks", "sweep")
UNKNOWN_AXIS = (
    "unknown sweep axis; use a network field (rho, mu, ...), physical.<field>, energy.<field>, "
    "or a scenario path such as training.lr or algorithms.ucfl.streams"
)


class SweepError(ValueError):
    """A grid the sweep cannot run; one line naming the key (and value)."""


def value_text(value: Any) -> str:
    """An axis value as the user wrote it: ``0.05``, ``inf``, ``m``, ``[1, 2]``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return "inf" if value == math.inf else "-inf" if value == -math.inf else repr(value)
    if isinstance(value, (list, tuple, dict)):
        return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return str(value)


def assignment_text(assignment: tuple[tuple[str, Any], ...]) -> str:
    return " ".join(f"{key}={value_text(value)}" for key, value in assignment)


def parse_grid_option(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> (key, values); each value a YAML scalar (``inf``, ``m`` stay strings)."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(f"--grid {text}: expected KEY=V1,V2,..., e.g. rho=1,2,4")
    try:
        parsed = yaml.load(f"[{values}]", Loader=_UniqueKeyLoader)
    except yaml.YAMLError:
        raise SweepError(f"--grid {_cut(text)}: the values are not valid YAML") from None
    except ValueError:  # Python's limit on int("<more than 4300 digits>"), the only ValueError a scalar raises
        raise SweepError(
            f"--grid {_cut(text)}: a value has more digits than a number may have here (at most {sys.get_int_max_str_digits()})"
        ) from None
    return key, parsed


def _cut(text: str, limit: int = 60) -> str:
    """A user's ``--grid`` text cut to ``limit`` characters, so a 5,000-digit value stays a one-line error."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def merge_grids(file_grid: dict[str, list[Any]], options: list[str] | None) -> dict[str, list[Any]]:
    """The scenario's ``sweep:`` block, then ``--grid`` options (a key given again replaces the file's values)."""
    grid = {key: list(values) for key, values in file_grid.items()}
    for option in options or []:
        key, values = parse_grid_option(option)
        grid[key] = values
    return grid


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple[Any, ...]
    kind: str
    """``network``, ``algorithm`` or ``scenario``."""
    entries: tuple[int, ...] = ()
    """For an algorithm axis, or a scenario axis of entries' ``training``: the ``algorithms:`` entries it varies."""

    @property
    def param(self) -> str:
        return self.key.split(".", 2)[2]


@dataclass(frozen=True)
class ProfilePoint:
    """One generated profile: a base profile of ``networks:`` at one network point."""

    base: str
    name: str
    assignment: tuple[tuple[str, Any], ...]
    time_unit: str


@dataclass(frozen=True)
class UnitSpec:
    """One training unit: a resolved scenario holding every generated profile."""

    key: str
    label: str
    assignment: tuple[tuple[str, Any], ...]
    scenario: Scenario


@dataclass(frozen=True)
class SweepPlan:
    base: Scenario
    grid: dict[str, list[Any]]
    axes: tuple[Axis, ...]
    profiles: tuple[ProfilePoint, ...]
    units: tuple[UnitSpec, ...]

    def curve_axes(self, unit: UnitSpec) -> dict[str, tuple[tuple[str, Any], ...]]:
        """Per curve of ``unit``: the algorithm-axis values it was run with (none for other entries' curves)."""
        out: dict[str, tuple[tuple[str, Any], ...]] = {}
        for index, entry in enumerate(unit.scenario.algorithms):
            mine = [axis for axis in self.axes if axis.kind == "algorithm" and index in axis.entries]
            for _, curve, params in entry.expand():
                out[curve] = tuple((axis.key, params[axis.param]) for axis in mine)
        return out


def classify(key: str, values: list[Any], raw: dict[str, Any]) -> Axis:
    parts = key.split(".")
    if not isinstance(values, list) or not values:
        raise SweepError(f"--grid {key}: give at least one value")
    seen: set[str] = set()
    repeated = [v for v in values if value_text(v) in seen or seen.add(value_text(v))]
    if repeated:
        raise SweepError(f"--grid {key}: give each value once; repeated: {', '.join(value_text(v) for v in repeated)}")
    if key in NETWORK_FIELDS or (parts[0] in ("physical", "energy") and len(parts) == 2 and parts[1]):
        return Axis(key, tuple(values), "network")
    if parts[0] == "algorithms" and len(parts) == 3 and not parts[1].isdigit() and all(parts):
        return Axis(key, tuple(values), "algorithm", _entries(key, parts[1], raw))
    if parts[0] == "algorithms" and len(parts) > 3 and parts[2] == "training" and not parts[1].isdigit() and all(parts):
        chosen = _entries(key, parts[1], raw)
        for index in chosen:
            _check_lever_block(key, parts[3:], {**raw["training"], **(raw["algorithms"][index].get("training") or {})}, f"algorithms[{index}].training")
        return Axis(key, tuple(values), "scenario", chosen)
    if parts[0] in Scenario.model_fields and parts[0] not in NOT_AXES and all(parts):
        if parts[0] == "training":
            _check_lever_block(key, parts[1:], raw["training"], "training")
        return Axis(key, tuple(values), "scenario")
    raise SweepError(f"--grid {key}: {UNKNOWN_AXIS}")


def _entries(key: str, name: str, raw: dict[str, Any]) -> tuple[int, ...]:
    """The ``algorithms:`` entries an axis names: by label, else by name."""
    entries = raw.get("algorithms") or []
    chosen = tuple(i for i, e in enumerate(entries) if e.get("label") == name)
    chosen = chosen or tuple(i for i, e in enumerate(entries) if e.get("name") == name)
    if not chosen:
        names = ", ".join(str(e.get("label") or e.get("name")) for e in entries)
        raise SweepError(f"--grid {key}: no algorithm entry named {name!r} (by label or name); entries: {names}")
    return chosen


def _check_lever_block(key: str, path: list[str], training: dict[str, Any], where: str) -> None:
    """A lever's field is swept only where its block is set (its other fields, say the method, come from there)."""
    if len(path) > 1 and path[0] in PER_ALGORITHM_LEVERS and training.get(path[0]) is None:
        raise SweepError(
            f"--grid {key}: {where}.{path[0]} is not set, so its {'.'.join(path[1:])} cannot be swept; "
            f"set {where}.{path[0]} in the scenario (docs/levers.md)"
        )


def _apply_axis(raw: dict[str, Any], axis: Axis, value: Any) -> dict[str, Any]:
    """A scenario axis at ``value``; one of entries' ``training`` sets each entry's own, starting from the
    lever block the entry uses (its own, else the scenario's), so the block's other fields stay."""
    if not axis.entries:
        return _apply(raw, axis.key, value)
    field = axis.key.split(".", 3)[3]
    block = field.split(".", 1)[0]
    out = raw
    for index in axis.entries:
        entry = out["algorithms"][index]
        own = dict(entry.get("training") or {})
        if block in PER_ALGORITHM_LEVERS and own.get(block) is None and raw["training"].get(block) is not None:
            out = copy.deepcopy(out)
            out["algorithms"][index]["training"] = {**own, block: copy.deepcopy(raw["training"][block])}
        out = _apply_entry(out, axis.key, f"algorithms.{index}.training.{field}", value)
    return out


def _apply_entry(raw: dict[str, Any], key: str, path: str, value: Any) -> dict[str, Any]:
    setting = f"{path}={_yaml_value(value)}"
    try:
        return apply_settings(raw, [setting])
    except ScenarioError as err:
        raise SweepError(f"--grid {key}={value_text(value)}: {str(err)[len(f'--set {setting}: '):]}") from None


def _profile_raw(base: dict[str, Any], assignment: tuple[tuple[str, Any], ...], name: str) -> dict[str, Any]:
    raw = dict(base)
    for key, value in assignment:
        if key.startswith("physical."):
            current = raw.get("physical")
            if current is None:
                current = _system_profile(base).physical
                current = current.to_dict() if current is not None else {}
            raw["physical"] = {**current, key.split(".", 1)[1]: value}
        elif key.startswith("energy."):
            raw["energy"] = {**(raw.get("energy") or {}), key.split(".", 1)[1]: value}
        else:
            raw[key] = value
    raw["name"] = name
    return raw


def _profiles(raw: dict[str, Any], axes: list[Axis]) -> tuple[list[dict[str, Any]], list[ProfilePoint]]:
    """Every base profile at every network point, each validated by ``SystemProfile.from_dict``."""
    bases = [(dict(p), _system_profile(p).name) for p in raw["networks"]]
    for axis in axes:
        for value in axis.values:
            for base, name in bases:
                _check_profile(base, ((axis.key, value),), name)
    out_raw, points = [], []
    for values in itertools.product(*(axis.values for axis in axes)):
        assignment = tuple(zip((axis.key for axis in axes), values))
        for base, name in bases:
            profile = _check_profile(base, assignment, f"{name} {assignment_text(assignment)}".strip())
            out_raw.append(_profile_raw(base, assignment, profile.name))
            points.append(ProfilePoint(name, profile.name, assignment, profile.time_unit))
    return out_raw, points


def _system_profile(entry: dict[str, Any]) -> SystemProfile:
    """The profile of a ``networks:`` entry, its ``energy:`` checked against it."""
    raw, energy = split_entry(entry)
    profile = SystemProfile.from_dict(raw)
    EnergyProfile.from_dict(energy).check_groups(profile.compute_groups)
    return profile


def _check_profile(base: dict[str, Any], assignment: tuple[tuple[str, Any], ...], name: str) -> SystemProfile:
    try:
        return _system_profile(_profile_raw(base, assignment, name))
    except ValueError as err:
        raise SweepError(f"--grid {assignment_text(assignment)}: {err}") from None


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("...\n").strip()


def _apply(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    if key == "seeds" and isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    setting = f"{key}={_yaml_value(value)}"
    try:
        return apply_settings(raw, [setting])
    except ScenarioError as err:
        raise SweepError(f"--grid {key}={value_text(value)}: {str(err)[len(f'--set {setting}: '):]}") from None


def _with_variants(raw: dict[str, Any], axes: list[Axis]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for axis in axes:
        for index in axis.entries:
            entry = out["algorithms"][index]
            entry["params"] = {k: v for k, v in (entry.get("params") or {}).items() if k != axis.param}
            entry["variants"] = {**(entry.get("variants") or {}), axis.param: list(axis.values)}
    return out


def _parse(raw: dict[str, Any], where: str) -> Scenario:
    try:
        return parse_scenario(raw, source=f"--grid {where}")
    except ScenarioError as err:
        raise SweepError(str(err)) from None


def unit_key(scenario: Scenario) -> str:
    """The cache key of a unit: 16 hex digits of the SHA-256 of its canonical form (``config.canonical``: the
    fingerprinted one, so keys stay those of earlier versions) as YAML, keys sorted (file order is no change)."""
    content = yaml.safe_load(yaml.safe_dump(canonical(scenario), sort_keys=False))
    return hashlib.sha256(yaml.safe_dump(content, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _sizes(keys_and_counts: list[tuple[str, int]]) -> str:
    return " x ".join(f"{key} ({count} values)" for key, count in keys_and_counts)


def _check_points(grid: dict[str, list[Any]]) -> None:
    """Refuse a grid of more than ``MAX_SWEEP_POINTS`` points from its axis lengths alone, before any is expanded
    (a 1000 x 1000 grid used to be refused only after its million profiles were built and validated)."""
    points = math.prod(len(values) for values in grid.values())
    if points > MAX_SWEEP_POINTS:
        sizes = _sizes([(key, len(values)) for key, values in grid.items()])
        raise SweepError(f"grid too large: {sizes} = {points:,} points; at most {MAX_SWEEP_POINTS:,} points")


def _check_profiles(networks: int, axes: list[Axis]) -> None:
    """Every unit holds each ``networks:`` entry at every network point: at most ``MAX_NETWORKS`` profiles."""
    profiles = networks * math.prod(len(axis.values) for axis in axes)
    if profiles > MAX_NETWORKS:
        sizes = _sizes([(axis.key, len(axis.values)) for axis in axes])
        raise SweepError(
            f"grid too large: {sizes} x {networks} base profile{'s' if networks > 1 else ''} (networks:) = "
            f"{profiles:,} network profiles per unit; at most {MAX_NETWORKS}"
        )


def plan_sweep(base: Scenario, grid: dict[str, list[Any]] | None = None) -> SweepPlan:
    """Expand and validate ``grid`` (default: the scenario's ``sweep:`` block) over ``base``."""
    grid = {key: list(values) for key, values in (base.sweep if grid is None else grid).items()}
    _check_points(grid)
    raw = base.model_dump()
    raw["sweep"] = {}
    axes = tuple(classify(key, values, raw) for key, values in grid.items())
    network = [a for a in axes if a.kind == "network"]
    _check_profiles(len(raw["networks"]), network)
    algorithm = [a for a in axes if a.kind == "algorithm"]
    scenario = [a for a in axes if a.kind == "scenario"]
    networks, profiles = _profiles(raw, network)
    raw = _with_variants(raw, algorithm)
    raw["networks"] = networks
    for axis in algorithm:
        _parse(_with_variants(base.model_dump() | {"sweep": {}}, [axis]), f"{axis.key}={','.join(map(value_text, axis.values))}")
    for axis in scenario:
        for value in axis.values:
            _parse(_apply_axis(raw, axis, value), f"{axis.key}={value_text(value)}")
    units = []
    for values in itertools.product(*(axis.values for axis in scenario)):
        assignment = tuple(zip((axis.key for axis in scenario), values))
        point = raw
        for axis, value in zip(scenario, values):
            point = _apply_axis(point, axis, value)
        resolved = _parse(point, assignment_text(assignment) or "(base point)")
        units.append(UnitSpec(unit_key(resolved), assignment_text(assignment) or "base", assignment, resolved))
    resolved_base = _parse(base.model_dump() | {"sweep": grid}, "(sweep block)")
    return SweepPlan(resolved_base, grid, axes, tuple(profiles), tuple(units))
