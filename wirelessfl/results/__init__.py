"""What turns a finished trace into files a researcher reads (see docs/results.md).

Imports neither torch nor simpy: pandas, numpy, plotly, matplotlib (and pyyaml for the run's scenario) only.
The names below load on first use (PEP 562 ``__getattr__``), so a process that only writes traces (a sweep's
worker, a resumed unit) does not pay for plotly, matplotlib and scipy.stats at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_FROM = {
    **dict.fromkeys(
        ("Written", "fig_accuracy_vs_round", "fig_accuracy_vs_time", "fig_worst_client", "plot_run", "report_run", "write_figures"),
        "wirelessfl.results.figures",
    ),
    **dict.fromkeys(
        ("CLIENT_COLUMNS", "TRACE_COLUMNS", "atomic_write_bytes", "atomic_write_frame", "atomic_write_text", "new_run_dir",
         "read_clients", "read_trace", "validate_clients", "validate_trace", "write_trace"),
        "wirelessfl.results.io",
    ),
    **dict.fromkeys(("STATIC_FORMATS", "static_figure", "write_static"), "wirelessfl.results.static"),
    **dict.fromkeys(
        ("fit_table", "paired_ranking", "summary_table", "time_to_target", "worst_client_table", "write_summary_md"),
        "wirelessfl.results.tables",
    ),
}

__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FROM[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM))
