"""The one ``plotly.min.js`` that every HTML figure of a directory loads (``include_plotlyjs="directory"``).

Its own module because run figures, stream figures and sweep maps all need it
and none of them should import another to get it.
"""

from __future__ import annotations

from pathlib import Path

from plotly.offline import get_plotlyjs

from wirelessfl.results.io import atomic_write_bytes

PLOTLY_JS = "plotly.min.js"


def write_plotly_js(directory: Path) -> Path:
    """The bundled plotly.js beside the figures, written first (and only when missing or another version)."""
    path = Path(directory) / PLOTLY_JS
    script = get_plotlyjs().encode("utf-8")
    if not path.is_file() or path.stat().st_size != len(script) or path.read_bytes() != script:
        atomic_write_bytes(path, script)
    return path
