"""A user's dataset named by import path: ``data: {dataset: "pkg.mod:loader", options: {...}}``.

The loader is called as ``loader(**options)`` and returns ``(inputs, labels)``
or ``(inputs, labels, client_ids)``: numpy arrays or torch tensors with one row
per sample. The result is checked here and turned into the same ``Pool`` the
built-in datasets give, so partitioning, shifts and the per-client splits work
unchanged. A client id per sample (a writer, a speaker, a device) is what the
``natural`` splitter deals by, as LEAF's FEMNIST and Shakespeare are split.

Inputs of shape ``[N, D]`` become ``[N, 1, 1, D]`` (as ``synthetic``), ``[N, H, W]``
become ``[N, 1, H, W]``, ``[N, C, H, W]`` stay. uint8 inputs are pixels,
normalised per channel like the image datasets; floating-point inputs are used
as they are (the loader owns their scaling), like ``synthetic``'s features.
Every message is one line that starts with ``data.dataset 'pkg.mod:loader'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from wirelessfl.learning.data.datasets import DatasetError, Pool, channel_stats
from wirelessfl.user_code import import_user_module, split_import_path

MAX_CLASSES = 100_000
"""Labels are class indices below this: a stray label of 10**9 would otherwise size the model's output layer."""


def is_user_dataset(name: object) -> bool:
    """Whether ``data.dataset`` names a loader by import path rather than a registered dataset."""
    return isinstance(name, str) and ":" in name


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else "(no message)"


def resolve_loader(path: str) -> Callable[..., object]:
    """The callable ``package.module:loader`` names, imported through ``user_code``; one-line DatasetError otherwise."""
    parts = split_import_path(path)
    if parts is None:
        raise DatasetError(f"data.dataset {path!r}: a dataset by import path is written 'package.module:loader'")
    module_name, attribute = parts
    try:
        target: object = import_user_module(module_name)
    except Exception as err:  # the user's module may raise anything while importing
        raise DatasetError(f"data.dataset {path!r}: cannot import module {module_name!r} ({type(err).__name__}: {_first_line(err)})") from None
    except SystemExit as err:
        raise DatasetError(f"data.dataset {path!r}: importing module {module_name!r} called sys.exit({err.code!r})") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise DatasetError(f"data.dataset {path!r}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise DatasetError(f"data.dataset {path!r}: {attribute!r} is a {type(target).__name__}, not a callable returning (inputs, labels[, client_ids])")
    return target


def _as_numpy(value: object, what: str, path: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise DatasetError(f"data.dataset {path!r}: the loader's {what} must be a numpy array or a torch tensor; got a {type(value).__name__}")


def load_user_pool(path: str, options: Mapping) -> Pool:
    """Call the loader with ``options`` as keyword arguments and check what it returns (see the module docstring)."""
    loader = resolve_loader(path)
    try:
        returned = loader(**dict(options))
    except Exception as err:  # the user's loader may raise anything
        raise DatasetError(f"data.dataset {path!r}: the loader raised {type(err).__name__}: {_first_line(err)}") from None
    if not isinstance(returned, (tuple, list)) or len(returned) not in (2, 3):
        kind = f"a {type(returned).__name__}" + (f" of {len(returned)}" if isinstance(returned, (tuple, list)) else "")
        raise DatasetError(f"data.dataset {path!r}: the loader must return (inputs, labels) or (inputs, labels, client_ids); got {kind}")
    x = _as_numpy(returned[0], "inputs", path)
    y = _as_numpy(returned[1], "labels", path)
    ids = _as_numpy(returned[2], "client_ids", path) if len(returned) == 3 else None
    return pool_from_arrays(path, x, y, ids)


def pool_from_arrays(path: str, x: np.ndarray, y: np.ndarray, ids: np.ndarray | None) -> Pool:
    """A ``Pool`` of checked inputs, labels and (dense, 0-based) client ids."""
    where = f"data.dataset {path!r}"
    if x.ndim not in (2, 3, 4) or x.shape[0] < 1 or 0 in x.shape:
        raise DatasetError(f"{where}: inputs must have shape [N, D], [N, H, W] or [N, C, H, W] with N >= 1 and no empty axis; got {list(x.shape)}")
    n = int(x.shape[0])
    if x.dtype != np.uint8 and x.dtype.kind != "f":
        raise DatasetError(f"{where}: inputs must be uint8 (pixels) or floating point (features); got {x.dtype}")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise DatasetError(f"{where}: inputs hold NaN or infinite values (sample {int(np.flatnonzero(~np.isfinite(x.reshape(n, -1)).all(axis=1))[0])})")
    if y.shape != (n,) or y.dtype.kind not in "iu":
        raise DatasetError(f"{where}: labels must be integers of shape [{n}] (one per input); got {y.dtype} of shape {list(y.shape)}")
    bad = np.flatnonzero((y < 0) | (y >= MAX_CLASSES))
    if len(bad):
        raise DatasetError(f"{where}: labels must be class indices from 0 to {MAX_CLASSES - 1:,}; got {int(y[bad[0]])} at sample {int(bad[0])}")
    client_ids = None
    if ids is not None:
        if ids.shape != (n,) or ids.dtype.kind not in "iuU":
            raise DatasetError(f"{where}: client_ids must be integers or strings of shape [{n}] (one per input); got {ids.dtype} of shape {list(ids.shape)}")
        _, codes = np.unique(ids, return_inverse=True)  # sorted ids -> clients 0, 1, ...
        client_ids = torch.from_numpy(codes.reshape(-1).astype(np.int64))
    shape = {2: (n, 1, 1, x.shape[-1]), 3: (n, 1, *x.shape[1:]), 4: x.shape}[x.ndim]
    tensor = torch.from_numpy(np.ascontiguousarray(x).reshape(shape))
    channels = int(shape[1])
    if tensor.dtype == torch.uint8:
        mean, std = channel_stats(tensor)
    else:
        tensor = tensor.to(torch.float32)
        mean, std = (0.0,) * channels, (1.0,) * channels  # used as they are
    num_classes = int(y.max()) + 1
    labels = torch.from_numpy(y.astype(np.int64))
    return Pool(tensor, labels, num_classes, tuple(str(c) for c in range(num_classes)), mean, std, None, client_ids)


__all__ = ["MAX_CLASSES", "is_user_dataset", "load_user_pool", "pool_from_arrays", "resolve_loader"]
