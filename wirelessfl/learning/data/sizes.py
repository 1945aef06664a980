"""What building a scenario's data allocates, from the spec's numbers alone: no torch, nothing allocated.

The run's memory estimate (``learning/memory.py``) needs every client's split
sizes, which only building the data gives; but building the data is itself
what a scenario's sizes can make too big (``synthetic`` with ``dim: 1e9``
draws a 22 GiB matrix first). So ``wirelessfl/cost.py`` compares this estimate
with the memory available before the first sample is loaded or drawn.

The peak is the larger of two moments. *Loading* the pool: the loader's own
arrays (``synthetic``: the features in float64, the gathered component
weights for the inner products, the float32 copy, the component weights;
the image datasets: the decoded uint8 images, their concatenation and the
contiguous copy). *Federating* it (``federated._clients``): the pool, plus the
dealt samples gathered in the pool's dtype and one shift's copy of them (the
engine normalises them to float32 only where it gathers them for a model). The pool
sizes of the fixed datasets are torchvision's; ``imagefolder`` counts its
image files (as torchvision's ``make_dataset`` lists them) and ``synthetic``
takes ``num_samples``. A user's loader (``pkg.mod:loader``) cannot be sized before
it runs: ``data_size`` returns None for it, and the run's estimate measures the
data once it is built (``cost.check_run``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wirelessfl.learning.data.data_files import EMNIST_SPLITS, resolve_root

FLOAT32, FLOAT64, INDEX = 4, 8, 8

#: (train, test) pool samples and the image shape of the datasets whose size is fixed.
FIXED_POOLS: dict[str, tuple[dict[str, tuple[int, int]], tuple[int, int, int]]] = {
    "digits": ({"": (1_797, 0)}, (1, 8, 8)),
    "mnist": ({"": (60_000, 10_000)}, (1, 28, 28)),
    "fashion_mnist": ({"": (60_000, 10_000)}, (1, 28, 28)),
    "emnist": (
        {
            "byclass": (697_932, 116_323),
            "bymerge": (697_932, 116_323),
            "balanced": (112_800, 18_800),
            "letters": (124_800, 20_800),
            "digits": (240_000, 40_000),
            "mnist": (60_000, 10_000),
        },
        (1, 28, 28),
    ),
    "cifar10": ({"": (50_000, 10_000)}, (3, 32, 32)),
}
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
"""As ``datasets.IMAGE_EXTENSIONS`` (a test checks they agree)."""


@dataclass(frozen=True)
class DataSize:
    """The pool a scenario's data comes from, and the bytes building the data needs at its peak."""

    pool_samples: int
    input_shape: tuple[int, int, int]
    loading: int
    """Peak bytes while the loader builds the pool."""
    federating: int
    """Peak bytes while the pool is dealt to the clients, normalised and cut per client."""
    advice: str
    """Which fields make it smaller, for the refusal."""
    detail: str = ""
    """What else the loader allocates that the pool's shape does not show (``synthetic``'s components)."""

    @property
    def peak(self) -> int:
        return max(self.loading, self.federating)

    def describe(self) -> str:
        """``a pool of 100,000 samples of 1x1x150, 3 components``."""
        return f"a pool of {self.pool_samples:,} samples of {'x'.join(map(str, self.input_shape))}{self.detail}"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pool_split(options: Mapping) -> tuple[str, ...] | None:
    pool = options.get("pool", ("train", "test"))
    if isinstance(pool, str):
        pool = [pool]
    if not isinstance(pool, (list, tuple)) or not pool or any(p not in ("train", "test") for p in pool):
        return None
    return tuple(dict.fromkeys(pool))


def _count_images(folder: Path) -> int:
    """Image files under ``folder``'s class folders, as ``torchvision.datasets.folder.make_dataset`` lists them."""
    count = 0
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        for _, _, files in os.walk(entry.path, followlinks=True):
            count += sum(1 for name in files if name.lower().endswith(IMAGE_EXTENSIONS))
    return count


def _pool_of(dataset: str, root: str | None, options: Mapping) -> tuple[int, tuple[int, int, int], int, str, str] | None:
    """(samples, input shape, loading peak bytes, advice, detail), or None where the loader will refuse the options
    itself (before it allocates) or the pool cannot be counted without loading it."""
    if dataset == "synthetic":
        num_samples, dim, components = (_int(options.get(key, default)) for key, default in (("num_samples", 100_000), ("dim", 150), ("components", 3)))
        if num_samples is None or dim is None or components is None or min(num_samples, dim, components) < 1:
            return None
        # theta, latent, x (float64), theta[latent] inside the inner products, noise, logits, labels; then float32 x beside x
        loading = FLOAT64 * components * dim + 2 * FLOAT64 * num_samples * dim + 5 * INDEX * num_samples
        return num_samples, (1, 1, dim), loading, "a smaller data.options.num_samples, dim or components", f", {components:,} components"
    if dataset == "imagefolder":
        size, channels, path = options.get("image_size", 32), options.get("channels", 3), options.get("path", ".")
        pool = options.get("pool", (".",))
        pool = [pool] if isinstance(pool, str) else pool
        if _int(size) is None or size < 1 or channels not in (1, 3) or not isinstance(path, str) or not path:
            return None
        if not isinstance(pool, (list, tuple)) or not pool or not all(isinstance(p, str) for p in pool):
            return None
        base = (resolve_root(root) / Path(path).expanduser()).resolve()
        try:
            samples = sum(_count_images(base / p) for p in pool)
        except OSError:
            return None  # a missing folder: the loader's message says which
        pixels = channels * size * size
        # decoded images, their concatenation and the pool's contiguous copy
        return samples, (channels, size, size), 3 * samples * pixels, "a smaller data.options.image_size or fewer images", ""
    if dataset not in FIXED_POOLS:
        return None
    counts, shape = FIXED_POOLS[dataset]
    split = options.get("split", "byclass") if dataset == "emnist" else ""
    pool = ("train",) if dataset == "digits" else _pool_split(options)
    if pool is None or (dataset == "emnist" and split not in EMNIST_SPLITS):
        return None
    train, test = counts[split]
    samples = sum(train if p == "train" else test for p in pool)
    # torchvision's arrays, their concatenation, the contiguous (EMNIST: upright) copy and one channel's histogram input
    return samples, shape, 4 * samples * math.prod(shape), "fewer samples (data.samples) or one pool split (data.options.pool)", ""


def data_size(
    dataset: str, root: str | None, options: Mapping, clients: int, samples: Mapping, shifted: bool = True
) -> DataSize | None:
    """The sizes of the scenario's data (``data:`` fields), or None where the spec leaves them to the loader
    (options it refuses before allocating, a dataset registered elsewhere). ``shifted``: a partition step transforms
    samples (rotation, label permutation), so clients dealt more samples than the pool holds get a copy of them."""
    pool = _pool_of(dataset, root, options)
    if pool is None:
        return None
    pool_samples, shape, loading, advice, detail = pool
    stored = FLOAT32 if dataset == "synthetic" else 1
    per_sample = math.prod(shape)
    dealt = pool_samples
    reuse = _int(samples.get("reuse", 1)) or 1
    if _int(samples.get("per_client")) is not None:
        dealt = min(pool_samples * reuse, samples["per_client"] * clients)
    elif _int(samples.get("total")) is not None:
        dealt = min(pool_samples, samples["total"])
    # the pool, then the dealt samples twice in the pool's dtype: gathered, and a shift's copy of them; more samples
    # than the pool holds, unshifted, are rows into it (federated.ClientViews.rows)
    copied = 0 if dealt > pool_samples and not shifted else 2 * dealt * per_sample * stored
    federating = pool_samples * per_sample * stored + copied + 4 * INDEX * (pool_samples + dealt)
    return DataSize(pool_samples, shape, int(loading), int(federating), advice, detail)


__all__ = ["DataSize", "FIXED_POOLS", "data_size"]
