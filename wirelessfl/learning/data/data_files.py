"""Where each dataset's files live, and a check that they are there, without importing torch.

``validate`` and ``simulate`` refuse a scenario whose dataset is missing. The
loaders in ``datasets.py`` find that out too, but only after torchvision is
imported and the run's cost probe has trained (4.3 s unloaded, 13-38 s were
seen under load), so the CLI asks :func:`missing_dataset` first (2.4 s, most of
it importing the algorithm registry, which validates the scenario). It answers only when nothing is at the place the
loader would look (the dataset's folder absent), and then with the loader's own
words; anything subtler (a missing file inside the folder, a bad option) is left
to the loader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT_ROOT = Path("~/.cache/wirelessfl")
ROOT_ENV_VAR = "WIRELESSFL_DATA"
OFFLINE_HINT = "python ../shared/data/prepare.py ROOT"
EMNIST_SPLITS = ("byclass", "bymerge", "balanced", "letters", "digits", "mnist")
"""torchvision's ``EMNIST.splits`` (a test checks they agree)."""

HOW_TO_GET = {
    "mnist": "Get it with `download: true` (needs internet); the offline machines have no copy of it (see ../shared/data/README.md)",
    "fashion_mnist": "Get it with `download: true` (needs internet); the offline machines have no copy of it (see ../shared/data/README.md)",
    "emnist": (
        f"Get it with `download: true` (needs internet), or on the offline machines run `{OFFLINE_HINT}` "
        "and set data.root to that ROOT (it holds only the byclass test split: set data.options to {split: byclass, pool: [test]})"
    ),
    "cifar10": f"Get it with `download: true` (needs internet), or on the offline machines run `{OFFLINE_HINT}` and set data.root to that ROOT",
    "imagefolder": (
        "Point data.root, or data.options.path (relative to data.root, or absolute), at a folder laid out as "
        "<folder>/<class>/<image>; `download` cannot fetch an arbitrary ImageFolder"
    ),
}

_IDX_FOLDERS = {"mnist": ("MNIST", ""), "fashion_mnist": ("FashionMNIST", ""), "emnist": ("EMNIST", "emnist-{split}-")}
_DEFAULT_POOL = ("train", "test")


def resolve_root(root: str | os.PathLike | None) -> Path:
    """``root`` if given, else ``$WIRELESSFL_DATA``, else ``~/.cache/wirelessfl``."""
    if root is None or str(root) == "":
        root = os.environ.get(ROOT_ENV_VAR) or DEFAULT_ROOT
    return Path(root).expanduser().resolve()


def idx_files(split: str, prefix: str = "") -> list[str]:
    """Raw idx file names of a split: MNIST-style (``train``/``t10k``) or EMNIST-style (``emnist-<split>-train``)."""
    stem = f"{prefix}{split}" if prefix else ("train" if split == "train" else "t10k")
    return [f"{stem}-images-idx3-ubyte", f"{stem}-labels-idx1-ubyte"]


def missing_message(dataset: str, where: Path | str, what: str, extra: str = "") -> str:
    """The one message for a missing dataset: the exact path looked at and how to get the data."""
    return f"dataset {dataset!r}: {what} not found at {where}{extra}. {HOW_TO_GET[dataset]}"


def missing_dataset(dataset: str, root: str | os.PathLike | None, download: bool, options: Mapping | None) -> str | None:
    """The loader's message when the dataset's folder is absent and cannot be downloaded; None otherwise."""
    if download or dataset not in (*_IDX_FOLDERS, "cifar10"):
        return None
    options = dict(options or {})
    pool = options.get("pool", _DEFAULT_POOL)
    if not isinstance(pool, (list, tuple)) or not pool or any(p not in _DEFAULT_POOL for p in pool):
        return None
    base = resolve_root(root)
    split = pool[0]
    if dataset == "cifar10":
        pickles, image_folder = base / "cifar-10-batches-py", base / "cifar10-jpeg"
        if pickles.exists() or image_folder.exists():
            return None
        return missing_message(dataset, f"{pickles} (torchvision pickles) nor at {image_folder / split} (ImageFolder)", f"the {split} split")
    folder, prefix = _IDX_FOLDERS[dataset]
    if dataset == "emnist":
        name = options.get("split", "byclass")
        if name not in EMNIST_SPLITS:
            return None
        prefix = prefix.format(split=name)
    raw = base / folder / "raw"
    if raw.exists():
        return None
    return missing_message(dataset, raw / idx_files(split, prefix)[0], f"the {split} split")
