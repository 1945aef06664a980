"""Dataset loaders: every dataset becomes one pooled ``Pool`` of images and labels.

Federated scenarios re-split a pool per client (``partition.py``), so a loader
only has to return *all* samples of the requested splits as tensors. The ordinary
torchvision loaders are used (``MNIST``, ``EMNIST``, ``FashionMNIST``,
``CIFAR10``, ``ImageFolder`` layouts); decoded ImageFolder tensors are cached in
``ROOT/.wirelessfl-cache`` because decoding 60k JPEGs takes seconds.

The ``synthetic`` dataset follows FedEM's synthetic mixture (Marfoq et al.,
"Federated Multi-Task Learning under a Mixture of Distributions", NeurIPS 2021,
Sec. 4 and App. I.1; generator in github.com/omarfoq/FedEM data/synthetic).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from wirelessfl.learning.data.catalog import DATASETS
from wirelessfl.learning.data.data_files import (  # noqa: F401 (resolve_root and the constants are this module's API too)
    DEFAULT_ROOT,
    HOW_TO_GET,
    OFFLINE_HINT,
    ROOT_ENV_VAR,
    idx_files,
    missing_message,
    resolve_root,
)

CACHE_DIR_NAME = ".wirelessfl-cache"
CACHE_FORMAT = 1
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


class DatasetError(ValueError):
    """A dataset is missing or unusable; the message says where we looked and how to get it."""


@dataclass(frozen=True)
class Normalisation:
    """Per-channel ``(x - mean) / std`` in float32: what turns stored samples into a model's inputs.

    Samples stay stored as the pool holds them (uint8 pixels: a quarter of float32) and are
    normalised where they are gathered for the model (``LockstepEngine(normalisation=...)``);
    the arithmetic is elementwise, so a gathered batch gets the bits a whole normalised copy would.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """A float32 copy of ``x`` [n, C, ...] normalised per channel (dimension 1), on ``x``'s device."""
        shape = (1, -1) + (1,) * (x.dim() - 2)
        mean = torch.tensor(self.mean, dtype=torch.float32, device=x.device).view(shape)
        std = torch.tensor(self.std, dtype=torch.float32, device=x.device).view(shape)
        return x.to(torch.float32, copy=True).sub_(mean).div_(std)


@dataclass(frozen=True)
class Pool:
    """All samples of a dataset's requested splits, pooled.

    ``x`` is ``[N, C, H, W]`` (uint8 pixels, or float32 features for
    ``synthetic``); normalise with ``(x - mean) / std`` per channel.
    ``latent`` holds each sample's hidden mixture component (``synthetic``
    only), so a partitioner can split over it the way FedEM does.
    """

    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    class_names: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    latent: torch.Tensor | None = None
    client_ids: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.x.dim() != 4:
            raise ValueError(f"Pool.x must be [N, C, H, W], got shape {tuple(self.x.shape)}")
        if self.y.shape != (self.x.shape[0],) or self.y.dtype != torch.int64:
            raise ValueError(f"Pool.y must be int64 of shape [{self.x.shape[0]}], got {self.y.dtype} {tuple(self.y.shape)}")
        if len(self.mean) != self.x.shape[1] or len(self.std) != self.x.shape[1]:
            raise ValueError(f"Pool.mean and Pool.std need one value per channel ({self.x.shape[1]})")
        if self.client_ids is not None and (self.client_ids.shape != self.y.shape or self.client_ids.dtype != torch.int64):
            raise ValueError(f"Pool.client_ids must be int64 of shape [{self.x.shape[0]}], got {self.client_ids.dtype} {tuple(self.client_ids.shape)}")

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.x.shape[1:])  # type: ignore[return-value]

    @property
    def normalisation(self) -> Normalisation:
        """What makes this pool's samples a model's inputs (per-channel mean 0 and std 1)."""
        return Normalisation(self.mean, self.std)

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """Float32 copy of ``x`` (samples of this pool) with per-channel mean 0 and std 1."""
        return self.normalisation(x)


_LOADERS: dict[str, Callable[[Path, bool, dict], Pool]] = {}
"""Each dataset's loader by name (its declaration: ``catalog.DATASETS``)."""


def register_dataset(name: str):
    """Decorator: ``loader`` loads the dataset ``catalog.DATASETS[name]`` declares."""
    if name not in DATASETS:
        raise ValueError(f"dataset {name!r} is not declared in wirelessfl.learning.data.catalog.DATASETS")

    def decorate(loader: Callable[[Path, bool, dict], Pool]) -> Callable[[Path, bool, dict], Pool]:
        _LOADERS[name] = loader
        return loader

    return decorate


def load_pool(name: str, root: str | os.PathLike | None = None, download: bool = False, options: Mapping | None = None) -> Pool:
    """Load every requested split of dataset ``name`` as one ``Pool`` (a user's ``pkg.mod:loader``: ``user_datasets``)."""
    if name not in DATASETS:
        raise ValueError(f"data.dataset must be one of {', '.join(sorted(DATASETS))}; got {name!r}")
    info = DATASETS[name]
    given = dict(options or {})
    unknown = sorted(set(given) - set(info.options))
    if unknown:
        allowed = ", ".join(info.options) or "(none)"
        raise ValueError(f"data.options for dataset {name!r}: unknown option {unknown[0]!r}; allowed: {allowed}")
    resolved = {**info.options, **given}
    return _LOADERS[name](resolve_root(root), bool(download), resolved)


def channel_stats(x: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Exact per-channel mean and std of uint8 images [N, C, H, W], from a 256-bin histogram per channel."""
    if x.dtype != torch.uint8:
        raise ValueError(f"channel_stats expects uint8 pixels, got {x.dtype}")
    values = torch.arange(256, dtype=torch.float64)
    means, stds = [], []
    for channel in range(x.shape[1]):
        counts = torch.bincount(x[:, channel].reshape(-1), minlength=256).to(torch.float64)
        mean = (counts * values).sum() / counts.sum()
        var = (counts * (values - mean) ** 2).sum() / counts.sum()
        means.append(float(mean))
        stds.append(max(float(var.sqrt()), 1e-6))
    return tuple(means), tuple(stds)


def _pool(x: torch.Tensor, y: torch.Tensor, class_names: Sequence[str], latent: torch.Tensor | None = None) -> Pool:
    mean, std = channel_stats(x)
    y = y.to(torch.int64)
    return Pool(x.contiguous(), y, len(class_names), tuple(str(c) for c in class_names), mean, std, latent)


def _check_pool_option(name: str, pool: object) -> tuple[str, ...]:
    if isinstance(pool, str):
        pool = [pool]
    if not isinstance(pool, (list, tuple)) or not pool or any(p not in ("train", "test") for p in pool):
        raise ValueError(f"data.options.pool for dataset {name!r} must be a non-empty list of 'train' and/or 'test'; got {pool!r}")
    return tuple(dict.fromkeys(pool))


def _missing(dataset: str, where: Path | str, what: str, extra: str = "") -> DatasetError:
    """The one error for a missing dataset: the exact path looked at and how to get the data (per dataset)."""
    return DatasetError(missing_message(dataset, where, what, extra))


def _first_line(error: BaseException) -> str:
    """torchvision's download errors span lines; the CLI shows one line, so keep the first."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- digits (embedded in scikit-learn) ---------------------------------------------------------


DIGITS_SHAPE = (1797, 1, 8, 8)


@register_dataset("digits")
def _load_digits(root: Path, download: bool, options: dict) -> Pool:
    x, y, names = _digits_cached(root)
    return _pool(x, y, names)


def _digits_cached(root: Path) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """scikit-learn's digits as uint8 images [1797, 1, 8, 8] (pixel values 0..16), labels and class names, kept in
    ROOT/.wirelessfl-cache per scikit-learn version.

    Importing scikit-learn costs about 1.3 s of CPU in every process, 30 times the load itself; the cache makes the
    default dataset's later runs, sweep workers and trials skip it. A cache that does not read back as the digits'
    shapes is drawn again from scikit-learn; one that cannot be written is left out.
    """
    from importlib.metadata import version

    cache_file = root / CACHE_DIR_NAME / f"digits-scikit-learn-{version('scikit-learn')}.pt"
    try:
        cached = torch.load(cache_file, weights_only=True)
        x, y, names = cached["x"], cached["y"], cached["names"]
        if tuple(x.shape) == DIGITS_SHAPE and x.dtype == torch.uint8 and tuple(y.shape) == DIGITS_SHAPE[:1] and len(names) == 10:
            return x, y, list(names)
    except Exception:  # absent, partial or foreign: drawn again below
        pass
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.uint8)).unsqueeze(1)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    names = [str(c) for c in bunch.target_names]
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".tmp{os.getpid()}")
        torch.save({"x": x, "y": y, "names": names}, partial)
        os.replace(partial, cache_file)
    except OSError:
        pass
    return x, y, names


# --- MNIST-family (idx files read by torchvision) ---------------------------------------------


def _mnist_family(
    dataset: str, cls, folder: str, root: Path, download: bool, pool: tuple[str, ...], files: Callable[[str], list[str]], both: bool, **kwargs
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Read each split with torchvision. ``files(split)`` lists a split's raw files; ``both`` says that
    torchvision checks both splits' files even for one split (MNIST, FashionMNIST), so a missing file of
    the other split is named as the reason."""
    xs, ys, classes = [], [], None
    raw = root / folder / "raw"
    for split in pool:
        try:
            ds = cls(str(root), train=split == "train", download=download, **kwargs)
        except (RuntimeError, OSError) as error:  # not found, or the download failed (no network, refused, ...)
            checked = [split, *({"train", "test"} - {split})] if both else [split]
            owner, name = next(((s, n) for s in checked for n in files(s) if not (raw / n).is_file()), (split, files(split)[0]))
            what = f"the {split} split" if owner == split else f"the {owner} split (torchvision's {cls.__name__} needs it to read the {split} split)"
            extra = f" (download failed: {_first_line(error)})" if download else ""
            raise _missing(dataset, raw / name, what, extra) from error
        xs.append(ds.data)
        ys.append(torch.as_tensor(ds.targets))
        classes = ds.classes
    return torch.cat(xs).unsqueeze(1), torch.cat(ys), classes


def _idx_files(prefix: str = "") -> Callable[[str], list[str]]:
    """Raw idx file names of a split (see ``data_files.idx_files``)."""
    return lambda split: idx_files(split, prefix)


@register_dataset("mnist")
def _load_mnist(root: Path, download: bool, options: dict) -> Pool:
    from torchvision.datasets import MNIST

    pool = _check_pool_option("mnist", options["pool"])
    x, y, classes = _mnist_family("mnist", MNIST, "MNIST", root, download, pool, _idx_files(), both=True)
    return _pool(x, y, [c.split(" - ")[0] for c in classes])


@register_dataset("fashion_mnist")
def _load_fashion_mnist(root: Path, download: bool, options: dict) -> Pool:
    from torchvision.datasets import FashionMNIST

    pool = _check_pool_option("fashion_mnist", options["pool"])
    x, y, classes = _mnist_family("fashion_mnist", FashionMNIST, "FashionMNIST", root, download, pool, _idx_files(), both=True)
    return _pool(x, y, classes)


@register_dataset("emnist")
def _load_emnist(root: Path, download: bool, options: dict) -> Pool:
    from torchvision.datasets import EMNIST

    split = options["split"]
    if split not in EMNIST.splits:
        raise ValueError(f"data.options.split for dataset 'emnist' must be one of {', '.join(EMNIST.splits)}; got {split!r}")
    pool = _check_pool_option("emnist", options["pool"])
    x, y, classes = _mnist_family("emnist", EMNIST, "EMNIST", root, download, pool, _idx_files(f"emnist-{split}-"), both=False, split=split)
    # EMNIST files store images transposed; make them upright so rotations mean what they say.
    return _pool(x.transpose(-1, -2), y, classes)


# --- CIFAR-10 (original pickles or an ImageFolder copy) ------------------------------------------


@register_dataset("cifar10")
def _load_cifar10(root: Path, download: bool, options: dict) -> Pool:
    from torchvision.datasets import CIFAR10

    pool = _check_pool_option("cifar10", options["pool"])
    pickles = root / CIFAR10.base_folder
    image_folder = root / "cifar10-jpeg"
    folders = [image_folder / split for split in pool]
    if not pickles.is_dir() and image_folder.is_dir() and (not download or all(f.is_dir() for f in folders)):
        x, y, classes = _load_image_folders("cifar10", root, folders, image_size=32, channels=3, expected=CIFAR10_CLASSES)
        return _pool(x, y, classes)
    xs, ys = [], []
    for split in pool:
        try:
            ds = CIFAR10(str(root), train=split == "train", download=download)
        except (RuntimeError, OSError) as error:
            if download:
                raise _missing("cifar10", pickles, f"the {split} split", f" (download failed: {_first_line(error)})") from error
            if pickles.is_dir():
                raise _missing("cifar10", pickles, f"the {split} split (torchvision pickles with the official MD5 sums)") from error
            raise _missing("cifar10", f"{pickles} (torchvision pickles) nor at {image_folder / split} (ImageFolder)", f"the {split} split") from error
        xs.append(torch.from_numpy(ds.data).permute(0, 3, 1, 2))
        ys.append(torch.as_tensor(ds.targets))
    return _pool(torch.cat(xs), torch.cat(ys), CIFAR10_CLASSES)


# --- any ImageFolder ----------------------------------------------------------------------------


@register_dataset("imagefolder")
def _load_imagefolder(root: Path, download: bool, options: dict) -> Pool:
    image_size, channels, path = options["image_size"], options["channels"], options["path"]
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1:
        raise ValueError(f"data.options.image_size for dataset 'imagefolder' must be a positive integer; got {image_size!r}")
    if channels not in (1, 3):
        raise ValueError(f"data.options.channels for dataset 'imagefolder' must be 1 or 3; got {channels!r}")
    if not isinstance(path, str) or not path:
        raise ValueError(f"data.options.path for dataset 'imagefolder' must be a folder name (relative to data.root, or absolute); got {path!r}")
    pool = options["pool"]
    if isinstance(pool, str):
        pool = [pool]
    if not isinstance(pool, (list, tuple)) or not pool or not all(isinstance(p, str) for p in pool):
        raise ValueError(f"data.options.pool for dataset 'imagefolder' must be a non-empty list of sub-folders of path; got {pool!r}")
    base = (root / Path(path).expanduser()).resolve()
    x, y, classes = _load_image_folders("imagefolder", root, [base / p for p in pool], image_size, channels)
    return _pool(x, y, classes)


def _load_image_folders(dataset: str, root: Path, folders: Sequence[Path], image_size: int, channels: int, expected: Sequence[str] | None = None):
    """Pool ImageFolder trees; their class lists must agree (and equal ``expected`` when given) before anything is decoded."""
    from torchvision.datasets.folder import find_classes, make_dataset

    listed = []
    for folder in folders:
        if not folder.is_dir():
            raise _missing(dataset, folder, "the ImageFolder directory")
        try:
            folder_classes, class_to_idx = find_classes(str(folder))
            samples = make_dataset(str(folder), class_to_idx, extensions=IMAGE_EXTENSIONS)
        except (FileNotFoundError, OSError) as error:
            raise _missing(dataset, folder, "an ImageFolder tree <class>/<image> with images", f" (torchvision: {_first_line(error)})") from error
        if expected is not None and tuple(folder_classes) != tuple(expected):
            raise DatasetError(f"dataset {dataset!r}: ImageFolder {folder} has classes {folder_classes}, expected {list(expected)}")
        if listed and folder_classes != listed[0][1]:
            raise DatasetError(f"dataset {dataset!r}: ImageFolder {folder} has classes {folder_classes}, but the other pooled folders have {listed[0][1]}")
        listed.append((folder, folder_classes, samples))
    xs = [_decode_cached(root, folder, samples, image_size, channels) for folder, _, samples in listed]
    ys = [torch.tensor([label for _, label in samples], dtype=torch.int64) for _, _, samples in listed]
    return torch.cat(xs), torch.cat(ys), listed[0][1]


def _decode_cached(root: Path, folder: Path, samples: list[tuple[str, int]], image_size: int, channels: int) -> torch.Tensor:
    """Decoded uint8 images [N, C, S, S], from ROOT/.wirelessfl-cache when the folder is unchanged."""
    fingerprint = hashlib.sha1(f"{CACHE_FORMAT}|{folder}|{image_size}|{channels}".encode())
    for path, label in samples:
        stat = os.stat(path)
        fingerprint.update(f"|{path}|{label}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    cache_file = root / CACHE_DIR_NAME / f"{folder.name}-{fingerprint.hexdigest()[:16]}.pt"
    if cache_file.is_file():
        return torch.load(cache_file, weights_only=True)
    x = _decode_images([path for path, _ in samples], image_size, channels)
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial = cache_file.with_suffix(f".tmp{os.getpid()}")
        torch.save(x, partial)
        os.replace(partial, cache_file)
    except OSError as error:
        warnings.warn(f"could not cache decoded images at {cache_file} ({error}); they will be decoded again next time", stacklevel=2)
    return x


def _decode_images(paths: Sequence[str], image_size: int, channels: int, chunk: int = 2048) -> torch.Tensor:
    """Decode image files to uint8 [N, C, S, S]: batched JPEG decode, resize only where needed."""
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg
    from torchvision.transforms.v2.functional import resize

    mode = ImageReadMode.RGB if channels == 3 else ImageReadMode.GRAY
    out = torch.empty((len(paths), channels, image_size, image_size), dtype=torch.uint8)

    def read(path: str) -> torch.Tensor:
        with open(path, "rb") as handle:
            return torch.frombuffer(bytearray(handle.read()), dtype=torch.uint8)

    def fit(image: torch.Tensor) -> torch.Tensor:
        if image.shape[-2:] != (image_size, image_size):
            image = resize(image, [image_size, image_size], antialias=True)
        return image

    def decode_chunk(start: int) -> None:
        names = paths[start : start + chunk]
        data = [read(p) for p in names]
        jpeg = [i for i, p in enumerate(names) if p.lower().endswith((".jpg", ".jpeg"))]
        decoded: list[torch.Tensor | None] = [None] * len(names)
        if jpeg:
            for i, image in zip(jpeg, decode_jpeg([data[i] for i in jpeg], mode=mode)):
                decoded[i] = image
        for i, image in enumerate(decoded):
            out[start + i] = fit(image if image is not None else decode_image(data[i], mode=mode))

    starts = range(0, len(paths), chunk)
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as workers:
        list(workers.map(decode_chunk, starts))
    return out


# --- synthetic mixture (FedEM) -----------------------------------------------------------------


@register_dataset("synthetic")
def _load_synthetic(root: Path, download: bool, options: dict) -> Pool:
    for key in ("num_samples", "dim", "components", "seed"):
        value = options[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "seed" else 1):
            raise ValueError(f"data.options.{key} for dataset 'synthetic' must be an integer >= {0 if key == 'seed' else 1}; got {value!r}")
    if not (isinstance(options["noise"], (int, float)) and options["noise"] >= 0):
        raise ValueError(f"data.options.noise for dataset 'synthetic' must be a number >= 0; got {options['noise']!r}")
    x, y, latent, _ = synthetic_mixture(
        np.random.default_rng(options["seed"]), options["num_samples"], options["dim"], options["components"], float(options["noise"])
    )
    # Features are already centred in [-1, 1]: keep them as they are (mean 0, std 1 means "no scaling").
    return Pool(
        torch.from_numpy(x).view(-1, 1, 1, options["dim"]),
        torch.from_numpy(y),
        2,
        ("0", "1"),
        (0.0,),
        (1.0,),
        torch.from_numpy(latent),
    )


def synthetic_mixture(rng: np.random.Generator, num_samples: int, dim: int, components: int, noise: float):
    """FedEM's generator: component m has theta_m ~ U[-1,1]^dim; a sample of component m is
    x ~ U[-1,1]^dim, y = round(sigmoid(<theta_m, x> + N(0, noise^2))). Components are equally frequent
    in the pool; a Dirichlet split over ``latent`` gives each client its own mixture weights.
    Returns (x [N, dim] float32, y [N], latent [N], theta [components, dim])."""
    theta = rng.uniform(-1.0, 1.0, size=(components, dim))
    latent = rng.integers(0, components, size=num_samples)
    x = rng.uniform(-1.0, 1.0, size=(num_samples, dim))
    logits = np.einsum("nd,nd->n", x, theta[latent]) + rng.normal(0.0, noise, size=num_samples)
    y = (logits > 0).astype(np.int64)  # round(sigmoid(z)) == 1 exactly when z > 0
    return x.astype(np.float32), y, latent.astype(np.int64), theta
