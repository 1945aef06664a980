"""Every configuration error the schema cannot see, raised as one line before a run writes anything.

The links of every profile (Sionna's tables for ``nr``), the first seed's units
(data, model, every algorithm), a user algorithm's state that a checkpoint could
not store, and a link budget that leaves nearly every client in outage.
"""

from __future__ import annotations

from wirelessfl.algorithms.base import is_registered
from wirelessfl.algorithms.spec import ParamError
from wirelessfl.config import Scenario, ScenarioError, algorithm_path, first_line
from wirelessfl.network import NetworkModel, SystemProfile
from wirelessfl.network.over_the_air import MAX_CELLS, cell_count
from wirelessfl.network.physical import OUTAGE_S, in_outage
from wirelessfl.network.physical import link_model as physical_link_model
from wirelessfl.run.build import build_units
from wirelessfl.run.checkpoints import check_checkpointable
from wirelessfl.run.curves import curves_of
from wirelessfl.run.seeds import static_rng

OUTAGE_REFUSED = 0.9
"""A profile whose link budget leaves at least this share of the clients in outage is refused: nearly nobody
could take part, and the rounds would last years."""


def preflight(scenario: Scenario, source: str = "scenario", client_store: str | None = None) -> None:
    """Build the data, the model and every curve's algorithm once (first seed), as a run starts.

    Raises every configuration error the schema cannot see (a missing dataset,
    a parameter out of range for this data) as one ``ScenarioError`` line
    prefixed with ``source``; an algorithm's error also with the YAML path of
    the parameter its ``ParamError`` names (``config.algorithm_path``). ``client_store``: where the
    algorithms keep per-client state (the cost check's choice; disk stores go to temporary folders here).
    """
    check_links(scenario, source)
    try:
        units = build_units(scenario, scenario.seeds[0], client_store=client_store)
        for unit in units:
            if not is_registered(type(unit.algorithm)):
                check_checkpointable(unit)
    except ValueError as err:
        message = first_line(str(err), type(err).__name__)
        where = algorithm_path(scenario, err) if isinstance(err, ParamError) else ""
        raise ScenarioError(f"{source}: {where + ': ' if where else ''}{message}") from None
    check_outage(scenario, units[0].algorithm.ctx.arch.param_count, source)
    check_analog_cells(scenario, units[0].algorithm.ctx.arch.param_count, source)


def check_analog_cells(scenario: Scenario, model_params: int, source: str = "scenario") -> None:
    """Refuse, in one line, an over-the-air curve under block fading whose d analog symbols span more than
    ``over_the_air.MAX_CELLS`` cells (fading blocks x subbands): each cell is a set of contributors per round."""
    problem = analog_cells_problem(scenario, model_params)
    if problem is not None:
        raise ScenarioError(f"{source}: {problem}")


def analog_cells_problem(scenario: Scenario, model_params: int) -> str | None:
    """What ``check_analog_cells`` refuses, as its line without the source; None when every profile fits."""
    if not any(curve.over_the_air for curve in curves_of(scenario)):
        return None
    for index, profile in enumerate(scenario.profiles()):
        cells = cell_count(profile.physical, model_params)
        if cells > MAX_CELLS:
            return (
                f"training.aggregation.mode: over_the_air on networks[{index}] ({profile.name!r}): the model's "
                f"{model_params} analog symbols span {cells // profile.physical.subbands} fading blocks x "
                f"{profile.physical.subbands} subbands = {cells} cells; at most {MAX_CELLS} (set a longer "
                "physical.coherence_s, a lower ue_speed_mps or fewer physical.subbands)"
            )
    return None


def check_outage(scenario: Scenario, model_params: int, source: str = "scenario") -> None:
    """Refuse, in one ``ScenarioError`` line, a physical profile whose link budget leaves (almost) every client
    in outage: one model (``model_params`` x its ``bits_per_parameter``) takes longer than
    ``physical.OUTAGE_S`` to receive or send at the client's mean rate over fading, for the first seed's drop
    (``physical.in_outage``). A run where fewer but most are says so when it ends (``results.links``)."""
    for profile in scenario.profiles():
        channel = profile.physical
        if channel is None:
            continue
        network = NetworkModel(profile, scenario.data.clients, static_rng(scenario.seeds[0], profile))
        bits = model_params * profile.bits_per_parameter
        out = int(in_outage(channel, network.path_loss_db, bits, network.uplink_loss_db, network.los).sum())
        if out >= OUTAGE_REFUSED * scenario.data.clients:
            raise ScenarioError(
                f"{source}: network {profile.name!r}: its link budget leaves {out} of {scenario.data.clients} clients in "
                f"outage (one model, {bits / 1e6:.3g} Mbit, takes over {OUTAGE_S:,.0f} s to receive or send at their mean "
                f"rate: bs_power_dbm {channel.bs_power_dbm:g}, ue_power_dbm {channel.ue_power_dbm:g}, cell_radius_m "
                f"{channel.cell_radius_m:g}); raise the powers or make the cell smaller"
            )


def check_links(scenario: Scenario, source: str = "scenario") -> None:
    """Every profile's links built (``prepare_links``), a failure as one ``ScenarioError`` line naming the profile."""
    for profile in scenario.profiles():
        try:
            prepare_links(profile)
        except ValueError as err:
            raise ScenarioError(f"{source}: network {profile.name!r}: {err}") from None


def prepare_links(profile: SystemProfile) -> None:
    """Build a profile's link abstractions now (``nr``: Sionna's tables, once, in a child process), so a
    missing Sionna is one line before anything is written rather than an error mid-run."""
    if profile.physical is not None:
        for direction in ("dl", "ul"):
            physical_link_model(profile.physical, direction)
