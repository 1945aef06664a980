"""Where a unit's wall time went, by phase (``runtime.json``), when units share an engine and followers ride along.

The engine is shared by a seed's units and reports cumulative phase times, so
each unit charges only what it added since its last mark, less what its
followers spent on their own evaluation (``theirs``), which they charge to themselves.
"""

from __future__ import annotations

import time

Mark = tuple[dict[str, float], float]


def mark(engine) -> Mark:
    """The engine's phase times and a clock reading, to charge from."""
    return engine.phase_times(), time.perf_counter()


def charge_phases(phases: dict[str, float], engine, since: Mark, theirs: dict[str, float]) -> tuple[dict[str, float], Mark]:
    """``phases`` plus the wall time since ``since``, less what followers spent (``theirs``, emptied), and a
    new mark. Whatever no engine phase claims is "other"."""
    before, began = since
    now, times = time.perf_counter(), engine.phase_times()
    phases = dict(phases)
    phases["other"] = phases.get("other", 0.0) + now - began - theirs.pop("wall", 0.0)
    for label, seconds in times.items():
        added = seconds - before.get(label, 0.0) - theirs.get(label, 0.0)
        if added:
            phases[label] = phases.get(label, 0.0) + added
            phases["other"] -= added
    theirs.clear()
    return phases, (times, now)


def charge_follower(phases: dict[str, float], engine, since: Mark, theirs: dict[str, float]) -> float:
    """Add a follower's wall and engine-phase time since ``since`` to its ``phases`` (in place) and to
    ``theirs`` (what its trainer must not count); returns the wall seconds spent."""
    before, began = since
    spent = time.perf_counter() - began
    phases["other"] = phases.get("other", 0.0) + spent
    theirs["wall"] = theirs.get("wall", 0.0) + spent
    for label, seconds in engine.phase_times().items():
        added = seconds - before.get(label, 0.0)
        if added:
            phases[label] = phases.get(label, 0.0) + added
            phases["other"] -= added
            theirs[label] = theirs.get(label, 0.0) + added
    return spent
