"""Joining a Ray cluster, torch-free: the one place that imports ``ray`` and says in one line what is wrong.

Ray stays optional: only ``--executor ray`` (a sweep's units, a tune's trials,
or one simulation's training groups, :mod:`wirelessfl.learning.ray_shards`)
reaches this module's :func:`import_ray`.
"""

from __future__ import annotations

import socket

RAY_MISSING = '--executor ray: Ray is not installed; pip install -e ".[ray]"'
CONNECT_TIMEOUT_S = 5.0


def import_ray():
    """``ray``, or the one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    return ray


def check_address(address: str | None) -> None:
    """A ``host:port`` address must answer within seconds (``ray.init`` would retry for a minute first); one line if not."""
    if address is None or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--address must be host:port, ray://host:port or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError:
        raise ValueError(f"--address {address}: no Ray cluster answers there; start one with `ray start --head`") from None


def join(ray, address: str | None) -> bool:
    """Join ``address`` (else the running Ray, else start a local one) unless connected; whether this call started it."""
    check_address(address)  # a bad address is refused even where this process already holds a Ray
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, TimeoutError) as err:
        raise ValueError(f"--address {address or 'auto'}: could not join a Ray cluster ({str(err).splitlines()[0]})") from None
    return True
