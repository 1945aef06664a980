"""Curve colours shared by every figure of a run (one colour per curve, the same in every panel and figure)."""

from __future__ import annotations

from plotly.colors import qualitative

PALETTE = qualitative.Plotly + qualitative.D3
LARGE_PALETTE = qualitative.Dark24
"""More than ten curves: 24 distinct dark colours (Plotly's and D3's first colours are both blues, reds...)."""
LARGE_DASHES = ("solid",) * 8 + ("dash", "dash", "solid") + ("dash",) * 4 + ("dot", "solid", "dash", "dash") + ("dot",) * 5
"""Line dash of each ``LARGE_PALETTE`` colour: any two of its colours closer than 40 CIELAB units (Dark24's
magentas, pinks and reds) get different dashes, so that 13 curves still read apart in print."""


def curve_colors(curves: list[str]) -> dict[str, str]:
    """One colour per curve, the same in every panel and figure; distinct for up to 24 curves."""
    palette = PALETTE if len(curves) <= 10 else LARGE_PALETTE
    return {curve: palette[i % len(palette)] for i, curve in enumerate(curves)}


def curve_dashes(curves: list[str]) -> dict[str, str]:
    """One line dash per curve, paired with :func:`curve_colors`: solid up to ten curves, beyond them the dash
    that tells apart the large palette's look-alike colours."""
    if len(curves) <= 10:
        return dict.fromkeys(curves, "solid")
    return {curve: LARGE_DASHES[i % len(LARGE_DASHES)] for i, curve in enumerate(curves)}
