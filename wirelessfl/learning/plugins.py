"""Accelerator plug-ins by name: the one place that knows the implementations.

The interface (``Accelerator``, ``Claim``, ``claims``) is ``accelerators.py``, which the stacked
model imports; the implementations import the stacked model, so naming them lives here, above both.
"""

from __future__ import annotations

import os

from wirelessfl.learning.accelerators import Accelerator


def by_name(name: str) -> Accelerator:
    """The plug-in called ``name``; one-line ValueError naming the known ones."""
    if name == "halide":
        from wirelessfl.learning.first_block import HalideFirstBlock

        return HalideFirstBlock()
    raise ValueError(f"unknown accelerator {name!r}; known: halide")


def from_environment() -> tuple[Accelerator, ...]:
    """The plug-ins ``$WIRELESSFL_ACCELERATORS`` names (comma-separated; unset or empty: none)."""
    names = [n.strip() for n in os.environ.get("WIRELESSFL_ACCELERATORS", "").split(",") if n.strip()]
    return tuple(by_name(name) for name in names)
