"""Every file of a finished run directory, written one way for the CLI, the Python API and sweep units.

``result`` is what :func:`wirelessfl.simulate.simulate` returns (trace, clients,
diagnostics, runtime, trained_units, replayed); it is read, never imported, so
this module stays free of torch. The trace and per-client tables are written
last: a sweep counts a unit finished once they exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wirelessfl.results.energy import energy_summary_md
from wirelessfl.results.io import PROVENANCE_FILE, atomic_write_frame, atomic_write_json, shares_draws, write_trace
from wirelessfl.results.links import outage_warnings, write_link_report
from wirelessfl.results.sampled import sample_section
from wirelessfl.results.streams import stream_report, stream_summary_md, write_stream_outputs
from wirelessfl.results.tables import write_summary_md

#: ``figures`` of :func:`write_run_outputs`: HTML and PNG, HTML only, or none (sweep units, where the map is the figure).
FIGURES = ("png", "html", "none")


def write_run_outputs(run_dir, scenario, result, elapsed: float, figures: str = "png", notes: list[str] = ()) -> list[str]:
    """provenance.json, diagnostics.json, runtime.json, streams, figures, summary.md, then the trace; returns the
    figures' notes.

    ``notes`` come first in summary.md's notes. With ``figures="none"`` the
    streams section is still in summary.md, without its streams.html.
    """
    if figures not in FIGURES:
        raise ValueError(f"figures must be one of {', '.join(FIGURES)}, got {figures!r}")
    from wirelessfl.results.figures import write_figures  # plotly and matplotlib only when figures are wanted

    run_dir = Path(run_dir)
    notes = list(notes)
    if getattr(scenario, "tuned_from", None):
        notes.insert(0, tuned_note(scenario.tuned_from))
    sections: list[str] = []
    provenance = getattr(result, "provenance", None) or {}
    if provenance:
        atomic_write_json(run_dir / PROVENANCE_FILE, provenance)
    if result.diagnostics:
        diagnostics = atomic_write_json(run_dir / "diagnostics.json", result.diagnostics)
        notes.append("diagnostics.json: per-round algorithm diagnostics (e.g. ucfl silhouette curve, cfl splits).")
        if figures == "none":
            sections = stream_summary_md(stream_report(diagnostics, result.clients))
        else:
            sections = write_stream_outputs(run_dir, diagnostics, result.clients)
            if sections:
                notes.append("streams.html: who is in which stream / cluster against the true groups (ARI above).")
    notes.append(f"{result.trained_units} training runs ({_training_mode(result)}); wall time {elapsed:.1f} s.")
    notes.extend(f"{p.name}: {p.physical.summary()}." for p in scenario.profiles() if p.physical is not None)
    notes.extend(write_link_report(run_dir, getattr(result, "links", None)))
    if result.runtime:
        atomic_write_json(run_dir / "runtime.json", result.runtime)
        wall = sum(unit["wall_s"] for unit in result.runtime.values())
        samples = sum(unit["rounds"] * unit["train_samples_per_round"] for unit in result.runtime.values())
        notes.append(
            f"runtime.json: training wall time per run, summed over resumptions: {wall:.1f} s in all, "
            f"{samples / wall:,.0f} local-training samples/s (nominal: train-set sizes x local epochs)."
        )
    rounds = getattr(result, "client_rounds", None)
    if rounds is None and figures != "none":
        from wirelessfl.accounting import CLIENT_ROUNDS_LIMIT, client_round_rows

        if client_round_rows(scenario) > CLIENT_ROUNDS_LIMIT:
            notes.append(
                f"no client_rounds.parquet and timeline.html: the run has up to {client_round_rows(scenario):,} "
                f"participant-rounds, more than {CLIENT_ROUNDS_LIMIT:,} (the energy columns of the trace and clients tables are complete)."
            )
    if rounds is not None and (rounds["time_unit"] == "s").any():
        from wirelessfl.network.physical import OUTAGE_S  # loaded already: the run was timed by it

        notes[:0] = [f"**warning** {line}" for line in outage_warnings(rounds, OUTAGE_S)]
    if rounds is not None:
        from wirelessfl.results.timeline import CLIENT_ROUNDS_FILE

        atomic_write_frame(run_dir / CLIENT_ROUNDS_FILE, rounds)
        notes.append(f"{CLIENT_ROUNDS_FILE}: per client and round, what the network did and what it cost (docs/results.md).")
    sections = energy_summary_md(result.trace, scenario.target_accuracy) + sample_section(result.trace) + sections
    figure_notes = [] if figures == "none" else write_figures(
        run_dir, result.trace, result.clients, image_format="png" if figures == "png" else None, client_rounds=rounds, target=scenario.target_accuracy
    )
    write_summary_md(
        run_dir, result.trace, result.clients, scenario.name, scenario.target_accuracy, notes + figure_notes, sections,
        shared_draws=shares_draws(provenance),
    )
    write_trace(run_dir, result.trace, result.clients)
    return figure_notes


def tuned_note(study: str) -> str:
    """summary.md's note on a run of tuned.yaml: which tuning chose its values."""
    return (
        f"tuned: the values `wirelessfl tune` chose on the validation split in the tuning directory {study} "
        "(its summary.md, study.csv and study.db); this run measures them on the test split."
    )


def _training_mode(result: Any) -> str:
    if result.replayed:
        return "trained once per curve and seed, replayed through every profile"
    return (
        "trained per profile where the network changes training (a deadline decides who is aggregated, "
        "or a channel-aware algorithm reads the cell), replayed elsewhere"
    )
