"""wirelessfl: personalized federated learning co-simulated over wireless networks.

``wirelessfl.network`` (SimPy, no torch) times rounds; ``wirelessfl.learning``
and ``wirelessfl.algorithms`` (torch, no simpy) train; ``wirelessfl.seam``
holds the only two types that cross between them; ``wirelessfl.simulate`` (made of ``wirelessfl.run``)
runs the loop; ``wirelessfl.sweep`` runs grids of it; ``wirelessfl.tune``
searches hyper-parameters on the validation split; ``wirelessfl.results``
writes traces, tables and figures.

``wirelessfl.simulate(scenario, ...)``, ``wirelessfl.sweep(scenario, grid)`` and
``wirelessfl.tune(scenario, out)`` are also the Python API (``wirelessfl.api``):
those submodules are callable, so ``import wirelessfl.simulate`` still gives the module. Nothing
heavy is imported until one is used (the network side stays torch-free).
"""

import importlib
import sys
import types

__version__ = "0.1.0"
__all__ = ["simulate", "sweep", "tune"]


class _CallableModule(types.ModuleType):
    """A submodule that is also its API function: ``wirelessfl.sweep(...)`` is ``wirelessfl.api.sweep(...)``."""

    def __call__(self, *args, **kwargs):
        from wirelessfl import api

        return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


def _callable_submodule(name: str) -> property:
    def get(package):
        module = package.__dict__.get(name)
        if module is None:
            module = importlib.import_module(f"{package.__name__}.{name}")
        if type(module) is types.ModuleType:
            module.__class__ = _CallableModule
        return module

    def set_(package, value) -> None:
        package.__dict__[name] = value

    return property(get, set_, doc=f"the {name} submodule, callable as wirelessfl.api.{name}")


class _Package(types.ModuleType):
    simulate = _callable_submodule("simulate")
    sweep = _callable_submodule("sweep")
    tune = _callable_submodule("tune")


sys.modules[__name__].__class__ = _Package
