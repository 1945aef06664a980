"""Curve colours shared by every figure of a run (one colour per curve, the same in every panel and figure)."""

from __future__ import annotations

from plotly.colors import qualitative

PALETTE = qualitative.Plotly + qualitative.D3
LARGE_PALETTE = qualitative.Dark24
"""More than ten curves: 24 distinct dark colours (Plotly's and D3's first colours are both blues, reds...)."""


def curve_colors(curves: list[str]) -> dict[str, str]:
    """One colour per curve, the same in every panel and figure; distinct for up to 24 curves."""
    palette = PALETTE if len(curves) <= 10 else LARGE_PALETTE
    return {curve: palette[i % len(palette)] for i, curve in enumerate(curves)}
