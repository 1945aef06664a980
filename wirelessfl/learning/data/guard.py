"""The data guard: a scenario whose data alone would not fit in memory is refused before a sample is drawn.

Torch-free, so that ``wirelessfl validate`` answers it in a second: the sizes come
from the spec alone (``sizes.data_size``: the loader's and the dealing's peak),
the memory from ``psutil`` capped by a cgroup v2 limit. ``cost.check_run`` calls it
first and then estimates the whole run, which needs the model and torch.
"""

from __future__ import annotations

from pathlib import Path

from wirelessfl.learning.data.catalog import PARTITIONERS
from wirelessfl.learning.data.sizes import DataSize, data_size

#: A run may use this fraction of the available memory; the rest is the safety margin.
MEMORY_FRACTION = 0.8


def format_bytes(value: float) -> str:
    """``1.2 GB`` / ``340 MB`` / ``12 kB`` (decimal units)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            number = value / size
            return f"{number:.1f} {unit}" if number < 100 else f"{number:,.0f} {unit}"
    return f"{int(value)} B"


def available_ram() -> int:
    """Available RAM, capped by a cgroup v2 limit (where the data is built, whatever the run's device)."""
    import psutil

    available = int(psutil.virtual_memory().available)
    limit, current = Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")
    try:
        text = limit.read_text().strip()
        if text != "max":
            available = min(available, int(text) - int(current.read_text().strip()))
    except (OSError, ValueError):
        pass
    return max(available, 0)


def check_data(scenario, available: int | None = None) -> DataSize | None:
    """Refuse, in one ``ValueError`` line, a scenario whose data alone would not fit in ``MEMORY_FRACTION`` of the
    available RAM (``available`` overrides it), from the spec's sizes, before any of the data is loaded or drawn.
    None where the spec leaves the sizes to the loader (see :func:`wirelessfl.learning.data.sizes.data_size`)."""
    d = scenario.data
    shifted = any(getattr(PARTITIONERS.get(step.get("name")), "kind", None) == "shift" for step in d.partition)
    size = data_size(d.dataset, d.root, d.options, d.clients, d.samples, shifted)
    if size is None:
        return None
    free = available_ram() if available is None else int(available)
    if size.peak > MEMORY_FRACTION * free:
        raise ValueError(
            f"memory: building the data needs about {format_bytes(size.peak)} at its peak ({size.describe()}) "
            f"but {format_bytes(free)} is available and a run may use {MEMORY_FRACTION:.0%} of it; use {size.advice}"
        )
    return size
