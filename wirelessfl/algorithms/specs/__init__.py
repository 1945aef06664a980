"""The built-in algorithms' declarations (one torch-free module each): name -> ``AlgorithmSpec``."""

from wirelessfl.algorithms.spec import AlgorithmSpec
from wirelessfl.algorithms.specs import (
    apfl, cfl, ditto, fedavg, fedavg_ft, fedem, fedfomo, fedmoe, fedper, fedprox, fedrep, ifca, local, oracle, pfedme, pflego, scaffold, ucfl,
)

BUILT_INS: dict[str, AlgorithmSpec] = {
    module.SPEC.name: module.SPEC
    for module in (apfl, cfl, ditto, fedavg, fedavg_ft, fedem, fedfomo, fedmoe, fedper, fedprox, fedrep, ifca, local, oracle, pfedme, pflego, scaffold, ucfl)
}
