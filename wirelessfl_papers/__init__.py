"""The reproduced papers, one module each; each defines ``PAPER`` (wirelessfl.results.reproduction.Paper).

Paper material lives here, outside the ``wirelessfl`` package: its numbers,
claims and page layout. :func:`papers` imports every module of this package, and
``wirelessfl.results.reproduction`` finds a run's paper among them by its
scenario name (each paper lists its scenarios), so adding a paper adds a module
here and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from wirelessfl.results.reproduction import Paper


@cache
def papers() -> dict[str, Paper]:
    """Every paper by name; raises ValueError when two papers name the same scenario or share a name."""
    found: dict[str, Paper] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        paper = getattr(importlib.import_module(f"{__name__}.{info.name}"), "PAPER", None)
        if paper is None:
            continue
        if paper.name in found:
            raise ValueError(f"papers: two modules define the paper name {paper.name!r}")
        for scenario in paper.scenarios:
            if scenario in owner:
                raise ValueError(f"papers: scenario {scenario!r} is listed by both {owner[scenario]!r} and {paper.name!r}")
            owner[scenario] = paper.name
        found[paper.name] = paper
    return found
