"""Buffered asynchronous aggregation, the network side: when the server's buffer fills (docs/levers.md).

The server aggregates as soon as ``buffer`` uploads have landed (FedBuff: Nguyen et al., "Federated Learning
with Buffered Asynchronous Aggregation", AISTATS 2022; ``buffer: 1`` is FedAsync: Xie, Koyejo, Gupta,
"Asynchronous Federated Optimization", 2019). One round of the run is the time between two aggregations. The
clients dispatched at a round's start (the plan's participants) are timed by the network as a round of
their own. Their uploads land at ``t_uploaded``, measured from that start. Uploads still on their way from
earlier rounds are carried in ``in_flight``: client -> landing time, measured from this round's start.

The round ends at the ``buffer``-th earliest of all those landings (ties go to the lower client id). The
uploads that landed by then are aggregated (the timing's ``arrived``) and the others stay in flight into the
next round, their landing times shifted to its start. Jobs dispatched in different rounds are timed apart:
they do not share the downlink or the uplink channels with each other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from wirelessfl.seam import RoundTiming


def buffered_timing(
    timing: RoundTiming, in_flight: Mapping[int, float], buffer: int
) -> tuple[RoundTiming, dict[int, float]]:
    """``timing`` (the network's timing of this round's dispatched clients) with ``arrived`` the ``buffer``
    earliest landings among those clients and ``in_flight``, and ``t_next`` the time of the buffer-th landing;
    and the uploads left in flight, their landing times measured from the next round's start.

    Clients whose upload never lands (``t_uploaded`` inf: outage) stay in flight for ever, so they never fill
    the buffer. If fewer than ``buffer`` uploads can land, ``t_next`` is inf: the server waits for ever, as a
    synchronous round waits on an upload that never lands."""
    if buffer < 1:
        raise ValueError(f"buffer must be at least 1 upload, got {buffer}")
    landings = dict(in_flight)
    for client, landed in timing.t_uploaded.items():
        if client in landings:
            raise ValueError(f"client {client} was dispatched again while its upload is still in flight")
        landings[client] = landed
    order = sorted(landings, key=lambda c: (landings[c], c))
    taken = [c for c in order[:buffer] if math.isfinite(landings[c])]
    if len(taken) < buffer:
        return replace(timing, arrived=frozenset(), t_next=math.inf), landings
    t_next = landings[taken[-1]]
    rest = {c: landings[c] - t_next for c in order[buffer:]}
    return replace(timing, arrived=frozenset(taken), t_next=t_next), rest
