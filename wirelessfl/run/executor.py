"""Where one run's local training goes: ``local`` (the engine's threads) or ``ray`` (actors on a Ray cluster).

The one place both doors (``wirelessfl simulate --executor``, ``wirelessfl.simulate(executor=...)``) turn the
options into a backend for ``simulate(..., shards=...)``, before anything is written, so a missing Ray, an
address that does not answer or a GPU run is one line. Torch and Ray load only for ``ray``.
"""

from __future__ import annotations

EXECUTORS = ("local", "ray")


def open_shards(executor: str | None, address: str | None, workers: int | None, device: str):
    """The joined cluster's ``RayShards`` (close it with ``__exit__``), or None for ``local``."""
    if executor not in (None, *EXECUTORS):
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor != "ray":
        given = [flag for flag, value in (("--address", address), ("--workers", workers)) if value is not None]
        if given:
            raise ValueError(f"{' and '.join(given)}: use with --executor ray")
        return None
    from wirelessfl.learning.ray_shards import RayShards

    if device == "cuda":
        raise ValueError(RayShards.cpu_only)
    return RayShards(address, workers).__enter__()
