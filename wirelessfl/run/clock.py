"""A unit's simulated clock: the time its progress reports, kept under one profile as rounds are trained.

A unit trained once (replayed through every profile) still needs a time while it
trains; it keeps the first profile's. The rounds timed for it are reused for that
profile's rows when they cover the whole run, so replay does not time them twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.seam import RoundTiming


@dataclass
class Clock:
    """The profile and network a unit's rounds are timed under while it trains, their timings, and the time."""

    profile: SystemProfile
    network: NetworkModel
    timings: list[RoundTiming] = field(default_factory=list)
    #: simulated time since round 0, in the profile's unit (a checkpoint's ``clock``)
    now: float = 0.0

    def tick(self, timing: RoundTiming) -> None:
        """One more round, timed ``timing``."""
        self.now += timing.duration
        self.timings.append(timing)

    def follow(self, other: Clock) -> None:
        """Take ``other``'s last round as this clock's own (a follower shares its trainer's timing)."""
        self.now = other.now
        self.timings.append(other.timings[-1])

    def timed_every_round(self, profile: SystemProfile, rounds: int) -> bool:
        """Whether this clock timed all ``rounds`` trained rounds under ``profile`` (a resumed unit did not)."""
        return profile.name == self.profile.name and len(self.timings) == rounds
