"""The network side of the co-simulation: how long each federated round takes.

Implements the system model of user-centric-fl.txt §IV-C (Mestoukirdi et al.,
"User-Centric Federated Learning") as a SimPy discrete-event model, plus its
closed form and a physical channel. Never imports torch: it reads a
``wirelessfl.seam.CommPlan`` and returns a ``wirelessfl.seam.RoundTiming``.

What is modelled (times relative to the round start)
* Downlink: the base station sends the plan's streams one after another; a
  stream of payload p (model units, 1.0 = one model) lasts ``p·t_dl``. Order:
  the plan's, or ``largest_first`` (largest receiver group first).
* Compute: ``T_i = t_min_i + Exp(mu_i)``, ``mu = inf`` = deterministic, per
  client or per contiguous group, optionally times the plan's relative work.
* Uplink: ``channels`` orthogonal slots, FIFO in order of finishing compute
  (1 channel = TDMA); an upload of payload p lasts ``p·rho·t_dl``.
* Schedules: ``phased`` (paper) -- downlink phase, then everyone computes, then the
  uplink phase once the slowest client is done: round = k·T_dl + max_i T_i +
  uplink time. ``pipelined`` -- a client computes as soon as its own streams have
  arrived and uploads once done and a channel is free; ``duplex='fdd'`` lets
  downlink and uplink overlap, ``'tdd'`` makes them share one medium (the base
  station takes the whole medium for each stream, ahead of queued uploads, so no
  upload starts before the last stream ends).
* Deadline: a client whose compute would end after the deadline drops out at
  once (it knows its own compute time), so a phased round waits only for the
  others; an upload landing after the deadline does not arrive. ``t_uploaded``
  is inf for drop-outs; the round ends at the last landing, cut at the deadline.
* Units: normalised (``time_unit='T_dl'``; t_min, 1/mu and deadline share the unit
  of t_dl) or, with ``physical`` set, seconds (``time_unit='s'``): users in a cell,
  log-distance path loss, Rayleigh block fading per round, Shannon rates; a
  multicast goes at its weakest receiver's rate.
* Device energy (``energy.py``): computation κ·c·samples·f², transmit, receive
  and idle power over each participant's activities in the round, battery
  budgets; parameters per profile (a ``networks:`` entry's ``energy:``).
* Backends: ``des`` (random draws; every schedule has a closed form given the
  draws, which tests prove identical to SimPy; pass ``record_events=True`` for
  SimPy's log) and
  ``analytic`` (expected timing, the paper's k·T_dl + T_min + H_m/mu + uplink term).

Why the presets are ``phased`` with ``channels=1``: the paper does not say how
uploads share the medium, and its Fig. 3 claims (extra downlink streams are
negligible when rho is large, but k must be chosen when rho is in [1, 2]) hold
only for phased rounds with serialized uploads. With 100 users: phased, one
channel, rho=1 gives 102 / 105 / 201 for k = 1 / 4 / 100 streams, but pipelined
FDD gives 102 for every k, and one shared parallel uplink phase makes k=100 ~10x
slower even at rho=4 (see docs/network.md and benchmarks/bench_network.py).
"""

from .energy import EnergyProfile
from .model import NetworkModel, analytic_round_time, make_network
from .profile import PRESETS, PhysicalChannel, SystemProfile

__all__ = [
    "PRESETS", "EnergyProfile", "NetworkModel", "PhysicalChannel", "SystemProfile", "analytic_round_time", "make_network",
]
