"""The built-in algorithms' declarations (one torch-free module each): name -> ``AlgorithmSpec``."""

from wirelessfl.algorithms.spec import AlgorithmSpec
from wirelessfl.algorithms.specs import (
    cfl, ditto, fedavg, fedavg_ft, fedem, fedfomo, fedmoe, fedper, fedprox, fedrep, ifca, local, oracle, pflego, scaffold, ucfl,
)

BUILT_INS: dict[str, AlgorithmSpec] = {
    module.SPEC.name: module.SPEC
    for module in (cfl, ditto, fedavg, fedavg_ft, fedem, fedfomo, fedmoe, fedper, fedprox, fedrep, ifca, local, oracle, pflego, scaffold, ucfl)
}
