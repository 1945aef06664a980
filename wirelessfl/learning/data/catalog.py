"""What datasets and partitioners exist, as plain data: readable without torch.

The schema checks ``data.dataset`` and ``data.partition`` against these
declarations (so ``wirelessfl validate`` answers without loading torch);
``datasets.py`` and ``partition.py`` register the code that carries each one out
(``register_dataset(name)``, ``register_partitioner(name)``), and refuse a name
that is not declared here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset: a one-line description and its options with defaults (its loader: ``datasets.py``)."""

    name: str
    description: str
    options: Mapping[str, object]

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


DATASETS: dict[str, DatasetInfo] = {info.name: info for info in (
    DatasetInfo(
        "digits",
        "scikit-learn's embedded handwritten digits: 1,797 images, 8x8, 10 classes (offline default)",
        {},
    ),
    DatasetInfo(
        "mnist",
        "torchvision MNIST: 70,000 handwritten digits, 28x28, 10 classes",
        {"pool": ("train", "test")},
    ),
    DatasetInfo(
        "fashion_mnist",
        "torchvision FashionMNIST: 70,000 clothing images, 28x28, 10 classes",
        {"pool": ("train", "test")},
    ),
    DatasetInfo(
        "emnist",
        "torchvision EMNIST (any split; offline only byclass 'test' exists: 116,323 images, 28x28, 62 classes); images made upright",
        {"split": "byclass", "pool": ("train", "test")},
    ),
    DatasetInfo(
        "cifar10",
        "CIFAR-10: 60,000 colour images, 32x32, 10 classes; torchvision pickles at ROOT/cifar-10-batches-py or an ImageFolder copy at ROOT/cifar10-jpeg/{train,test}",
        {"pool": ("train", "test")},
    ),
    DatasetInfo(
        "imagefolder",
        "any torchvision ImageFolder tree (root/<class>/<image>); images resized to image_size, cached after the first decode",
        {"path": ".", "pool": (".",), "image_size": 32, "channels": 3},
    ),
    DatasetInfo(
        "synthetic",
        "FedEM's synthetic mixture: x ~ U[-1,1]^dim, y = round(sigmoid(<theta_m, x> + noise)) for a hidden component m; shape [N,1,1,dim], 2 classes",
        {"num_samples": 100_000, "dim": 150, "components": 3, "noise": 0.1, "seed": 12345},
    ),
)}


class PartitionError(ValueError):
    """A partition cannot be built as asked; the message names the step, client or field."""


@dataclass(frozen=True)
class PartitionerInfo:
    """A partitioner: ``kind`` is ``"splitter"`` or ``"shift"`` (its function: ``partition.py``).

    A splitter's ``sizes`` says who decides the client sizes: ``"given"`` splitters are called as
    ``function(step, pool, sizes, rng)`` and give client i exactly ``sizes[i]`` samples;
    ``"outcome"`` splitters are called as ``function(step, pool, total, num_clients, rng)``, deal
    ``total`` samples and let the split decide how many each client gets; ``"natural"`` splitters are
    called as ``function(step, pool, num_clients)`` and give each client what the dataset says is its own.
    """

    name: str
    kind: str
    description: str
    params: Mapping[str, object]
    sizes: str = "given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))


PARTITIONERS: dict[str, PartitionerInfo] = {info.name: info for info in (
    PartitionerInfo("iid", "splitter", "uniform random split of the pool", {}),
    PartitionerInfo(
        "dirichlet", "splitter",
        "label shift: client i's class proportions q_i ~ Dir(alpha); over: 'latent' splits synthetic's mixture components instead (FedEM)",
        {"alpha": 0.4, "over": "label"},
    ),
    PartitionerInfo(
        "per_class_dirichlet", "splitter",
        "each class's samples divided among the clients by p_k ~ Dir(alpha) over the clients; client sizes are an outcome (FedEM)",
        {"alpha": 0.4},
        sizes="outcome",
    ),
    PartitionerInfo(
        "shards", "splitter",
        "pathological split: each client holds exactly `classes` classes, in equal parts",
        {"classes": 2},
    ),
    PartitionerInfo(
        "random_classes", "splitter",
        "each client holds `classes` randomly chosen classes; each class is dealt round-robin among its holders; client sizes are an outcome (PFLEGO)",
        {"classes": 2},
        sizes="outcome",
    ),
    PartitionerInfo(
        "majority", "splitter",
        "2 majority classes make exactly a fraction p of each client's data, the rest is sampled uniformly from the others (rest: even spreads it evenly)",
        {"p": 0.8, "classes": 2, "rest": "sampled"},
    ),
    PartitionerInfo(
        "natural", "splitter",
        "each client id of the dataset (a user loader's third array, e.g. FEMNIST's writer) is one client with all its samples",
        {},
        sizes="natural",
    ),
    PartitionerInfo(
        "rotation", "shift",
        "covariate groups: clients of group g see images rotated by angles[g] (default 360*g/groups: 0/90/180/270 for 4)",
        {"groups": 4, "angles": None, "assign": "blocks"},
    ),
    PartitionerInfo(
        "label_permutation", "shift",
        "concept groups: clients of group g see labels mapped by a random permutation pi_g (group 0: identity)",
        {"groups": 4, "assign": "blocks"},
    ),
    PartitionerInfo(
        "local_labels", "shift",
        "each client's labels re-indexed 0..K_i-1 in ascending class order (per-client label spaces, PFLEGO); no ground-truth groups",
        {},
    ),
)}


@dataclass(frozen=True)
class Step:
    """One validated partition step: its registry entry and its parameters with defaults filled in."""

    index: int
    info: PartitionerInfo
    params: Mapping[str, object]

    @property
    def where(self) -> str:
        return f"data.partition[{self.index}] ({self.info.name})"


def parse_steps(steps: Sequence[Mapping]) -> tuple[Step, list[Step]]:
    """Validate partition steps; return the splitter and the shifts (in the order given)."""
    if isinstance(steps, Mapping) or not isinstance(steps, Sequence) or isinstance(steps, str):
        raise PartitionError(f"data.partition must be a list of steps like {{'name': 'dirichlet', 'alpha': 0.4}}; got {steps!r}")
    parsed: list[Step] = []
    for index, step in enumerate(steps):
        if not isinstance(step, Mapping) or "name" not in step:
            raise PartitionError(f"data.partition[{index}] must be a mapping with a 'name'; got {step!r}")
        name = step["name"]
        if name not in PARTITIONERS:
            raise PartitionError(f"data.partition[{index}].name must be one of: {', '.join(sorted(PARTITIONERS))}; got {name!r}")
        info = PARTITIONERS[name]
        unknown = sorted(set(step) - {"name"} - set(info.params))
        if unknown:
            allowed = ", ".join(info.params) or "(none)"
            raise PartitionError(f"data.partition[{index}] ({name}): unknown parameter {unknown[0]!r}; allowed: {allowed}")
        params = {**info.params, **{k: v for k, v in step.items() if k != "name"}}
        parsed.append(Step(index, info, MappingProxyType(params)))
    splitters = [s for s in parsed if s.info.kind == "splitter"]
    if len(splitters) != 1:
        names = ", ".join(n for n, i in sorted(PARTITIONERS.items()) if i.kind == "splitter")
        found = ", ".join(s.info.name for s in splitters) or "none"
        raise PartitionError(f"data.partition must contain exactly one sample splitter ({names}); got {len(splitters)}: {found}")
    return splitters[0], [s for s in parsed if s.info.kind == "shift"]


SAMPLES_KEYS = ("per_client", "total", "distribution", "sigma", "reuse")


def check_samples_spec(samples: object) -> None:
    """``data.samples`` on its own: its keys and the type and range of each value (the schema runs this, so
    ``wirelessfl validate`` answers it; what needs the pool and the split is ``partition.client_sizes``'s)."""
    if not isinstance(samples, Mapping):
        raise PartitionError(f"data.samples must be a mapping like {{'per_client': 80}} or {{'total': 10000}}; got {samples!r}")
    unknown = sorted(set(samples) - set(SAMPLES_KEYS), key=str)
    if unknown:
        raise PartitionError(f"data.samples: unknown key {unknown[0]!r}; allowed: {', '.join(SAMPLES_KEYS)}")
    if ("per_client" in samples) == ("total" in samples):
        raise PartitionError(f"data.samples must give exactly one of 'per_client' or 'total'; got {dict(samples)!r}")
    distribution = samples.get("distribution", "equal")
    if distribution not in ("equal", "lognormal"):
        raise PartitionError(f"data.samples.distribution must be 'equal' or 'lognormal'; got {distribution!r}")
    if "sigma" in samples and distribution != "lognormal":
        raise PartitionError("data.samples.sigma only applies to distribution 'lognormal'")
    if "per_client" in samples:
        per_client = samples["per_client"]
        if not is_int(per_client) or per_client < 1:
            raise PartitionError(f"data.samples.per_client must be a positive integer; got {per_client!r}")
        if distribution != "equal":
            raise PartitionError("data.samples.distribution needs 'total' (the number to distribute), not 'per_client'")
        reuse = samples.get("reuse", 1)
        if not is_int(reuse) or reuse < 1:
            raise PartitionError(f"data.samples.reuse must be a positive integer (how many clients may share a sample); got {reuse!r}")
        return
    if "reuse" in samples:
        raise PartitionError(
            "data.samples.reuse needs per_client (each pass over the pool deals whole clients of n samples); got "
            f"{dict(samples)!r}"
        )
    total = samples["total"]
    if total != "all" and (not is_int(total) or total < 1):
        raise PartitionError(f"data.samples.total must be a positive integer or 'all'; got {total!r}")
    sigma = samples.get("sigma", 1.0)
    if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) or not (sigma >= 0 and math.isfinite(sigma)):
        raise PartitionError(f"data.samples.sigma must be a finite number >= 0; got {sigma!r}")


def is_int(value: object) -> bool:
    """An integer of any kind (Python's or NumPy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_samples(splitter: Step, samples: Mapping) -> None:
    """An ``outcome`` splitter decides the client sizes, so of ``data.samples`` only the total it deals means anything."""
    if splitter.info.sizes == "natural" and dict(samples) != {"total": "all"}:
        raise PartitionError(
            f"{splitter.where}: every client gets all the samples of its client id, so data.samples must be "
            f"{{total: all}} (the default); got {dict(samples)!r}"
        )
    if splitter.info.sizes == "outcome" and ("per_client" in samples or samples.get("distribution", "equal") != "equal"):
        raise PartitionError(
            f"{splitter.where}: client sizes are an outcome of this split, so data.samples must be {{total: N}} or "
            f"{{total: all}} (how many pool samples it deals out); got {dict(samples)!r}"
        )
