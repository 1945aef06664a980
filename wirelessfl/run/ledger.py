"""Battery budgets during training: the one part of energy accounting that acts on who takes part.

Energy is otherwise accounted after the fact (``wirelessfl.accounting``); a
budget must be charged round by round while training, and recharged from the
recorded rounds when a unit resumes, so its batteries are as they were.
"""

from __future__ import annotations

from wirelessfl.accounting import Ledger
from wirelessfl.config import Scenario
from wirelessfl.network import SystemProfile


def budget_ledger(
    scenario: Scenario, profile: SystemProfile | None, num_clients: int, train_sizes, local_epochs: int
) -> Ledger | None:
    """The ledger a unit trained under ``profile`` charges, or None when that profile has no battery budget."""
    energy = scenario.energy_profiles()[profile.name] if profile is not None else None
    if energy is None or not energy.has_budget:
        return None
    return Ledger(energy, num_clients, train_sizes, local_epochs)


def recharge(ledger: Ledger, records, timings) -> None:
    """Charge ``ledger`` with every recorded round again: the batteries as they were after the last one."""
    for rec, timing in zip(records[1:], timings):
        ledger.charge(rec.round, rec.plan, timing)
