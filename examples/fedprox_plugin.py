"""FedProx as a user's plugin, written only against wirelessfl's public algorithm API.

Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
Heterogeneous Networks", MLSys 2020, Algorithm 2: client k approximately
minimises eq. (2), F_k(w) + (mu / 2) ||w - w^t||^2, with the scenario's local
optimizer, and the server averages the uploads that arrived, as FedAvg does.

Run it beside the built-ins, from the repository root (or with this file's
folder on PYTHONPATH)::

    algorithms:
      - {name: fedavg}
      - {name: "examples.fedprox_plugin:FedProxPlugin", params: {mu: 0.01}}

Everything comes from ``wirelessfl.algorithms`` (docs/extending.md): the
class declares itself with an ``AlgorithmSpec`` (its typed parameters, read as
``self.params.mu``, so ``mu: -1`` is refused at ``algorithms[i].params.mu``
before anything is built; its search space), and the ``MixingAlgorithm`` base
plans FedAvg's round (one broadcast, every participant uploads, work 1), trains
the participants in one lockstep call and averages what arrived by sample
count; this class changes only the local objective.
"""

from __future__ import annotations

from wirelessfl.algorithms import COMMON_SEARCH_SPACE, AlgorithmSpec, GradientCorrection, MixingAlgorithm, Param, Params, finite


class FedProxPluginParams(Params):
    mu: finite(0.0) = 0.01
    """The proximal weight of eq. 2 (0: FedAvg)."""


class FedProxPlugin(MixingAlgorithm):
    """FedAvg whose clients add ``mu (w - w^t)`` to every local gradient (the gradient of eq. 2's proximal term)."""

    spec = AlgorithmSpec(
        name="fedprox_plugin",
        paper="Li et al., MLSys 2020",
        description="FedProx written as a plugin (examples/fedprox_plugin.py)",
        params=FedProxPluginParams,
        implementation="examples.fedprox_plugin:FedProxPlugin",
        search_space={**COMMON_SEARCH_SPACE, "mu": Param.of(0.001, 0.01, 0.1, 1.0)},
    )

    def local_training(self, round, members):
        """Each participant starts from the global model w^t and is pulled back towards it while it trains."""
        start = self.received(members)
        pull = GradientCorrection(mu=float(self.params.mu), anchor=start)
        return self.train_clients(round, members, start, correction=pull)
