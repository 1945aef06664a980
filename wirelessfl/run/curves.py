"""What a scenario trains: its curves, and whether the network can change what a curve trains.

Whether a curve trains once and is replayed through every profile, or trains
per profile, is decided here, from the scenario alone, before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirelessfl.algorithms import get_algorithm
from wirelessfl.config import Scenario
from wirelessfl.network import SystemProfile


@dataclass(frozen=True)
class Curve:
    """One line in the figures: an algorithm with one point of its variant grid."""

    algorithm: str
    variant: str
    curve: str
    params: dict[str, Any]
    #: the algorithm's own training fields over the scenario's ``training:`` (``algorithms[i].training``)
    training: dict[str, Any] = field(default_factory=dict)
    #: its ``scheduling`` policy reads each round's uplink channel (docs/levers.md): it trains per profile
    schedules_by_channel: bool = False
    #: its ``aggregation`` is over the air (docs/levers.md): the channel decides who is aggregated, it trains per profile
    over_the_air: bool = False
    #: its ``aggregation`` is asynchronous (docs/levers.md): the network's landings decide what each aggregation takes,
    #: so it trains per profile, physical or not
    asynchronous: bool = False


def curves_of(scenario: Scenario) -> list[Curve]:
    def by_channel(training: dict[str, Any] | None) -> bool:
        scheduling = scenario.training_for(training).scheduling
        return scheduling is not None and scheduling.spec().reads_channel

    def analog(training: dict[str, Any] | None) -> bool:
        aggregation = scenario.training_for(training).aggregation
        return aggregation is not None and aggregation.mode == "over_the_air"

    def buffered(training: dict[str, Any] | None) -> bool:
        aggregation = scenario.training_for(training).aggregation
        return aggregation is not None and aggregation.mode == "async"

    return [
        Curve(a.name, v, c, p, dict(a.training or {}), by_channel(a.training), analog(a.training), buffered(a.training))
        for a in scenario.algorithms for v, c, p in a.expand()
    ]


def profiles_can_change_training(profiles: list[SystemProfile], curve: Curve | None = None, budgets: bool = False) -> bool:
    """A deadline or a battery budget (``budgets``) lets the network decide who is aggregated; and ``curve``,
    when its algorithm reads the channel (``uses_channel``, e.g. channel-aware ucfl streams), trains
    differently under each physical cell, and so does one whose scheduling policy reads the uplink channel; an
    asynchronous curve trains per profile under any network (when its buffer fills is the network's timing)."""
    if budgets or any(p.deadline is not None for p in profiles):
        return True
    if curve is not None and curve.asynchronous:
        return True
    return (
        curve is not None
        and (get_algorithm(curve.algorithm).uses_channel(curve.params) or curve.schedules_by_channel or curve.over_the_air)
        and any(p.physical is not None for p in profiles)
    )


def has_budgets(scenario: Scenario) -> bool:
    """True when some profile gives its devices a battery budget (which decides who takes part)."""
    return any(energy.has_budget for energy in scenario.energy_profiles().values())
