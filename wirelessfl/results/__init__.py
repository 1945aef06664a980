"""What turns a finished trace into files a researcher reads (see docs/results.md).

Imports neither torch nor simpy: pandas, numpy, plotly, matplotlib (and pyyaml for the run's scenario) only.
"""

from wirelessfl.results.figures import (
    Written,
    fig_accuracy_vs_round,
    fig_accuracy_vs_time,
    fig_worst_client,
    plot_run,
    report_run,
    write_figures,
)
from wirelessfl.results.io import (
    CLIENT_COLUMNS,
    TRACE_COLUMNS,
    atomic_write_bytes,
    atomic_write_frame,
    atomic_write_text,
    new_run_dir,
    read_clients,
    read_trace,
    validate_clients,
    validate_trace,
    write_trace,
)
from wirelessfl.results.static import STATIC_FORMATS, static_figure, write_static
from wirelessfl.results.tables import fit_table, paired_ranking, summary_table, time_to_target, worst_client_table, write_summary_md

__all__ = [
    "CLIENT_COLUMNS",
    "STATIC_FORMATS",
    "TRACE_COLUMNS",
    "Written",
    "atomic_write_bytes",
    "atomic_write_frame",
    "atomic_write_text",
    "fig_accuracy_vs_round",
    "fig_accuracy_vs_time",
    "fig_worst_client",
    "fit_table",
    "paired_ranking",
    "new_run_dir",
    "plot_run",
    "read_clients",
    "read_trace",
    "report_run",
    "static_figure",
    "summary_table",
    "time_to_target",
    "validate_clients",
    "validate_trace",
    "worst_client_table",
    "write_figures",
    "write_static",
    "write_summary_md",
    "write_trace",
]
