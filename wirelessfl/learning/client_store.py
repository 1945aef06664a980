"""Per-client state, ``[N, ...]`` rows, in RAM or in a memory-mapped file, read and written for a round's participants.

A method that keeps something per client (Local's models, FedPer's personal
heads, the clients' optimizer state) holds N rows between rounds, but a round
reads and writes only its k participants' rows. At N = 100,000, LeNet-5 models
are 24.7 GB of float32: on disk (scenario ``client_store: {where: disk}``, or
when the memory guard's estimate needs it) the rows live in a sparse file mapped
with ``torch.from_file(shared=True)``, and RAM holds the pages of the rows a
round touches. Every method uses one interface (:class:`ClientStore`): ``gather``
the participants' rows, train, ``scatter`` them back.

Rows start equal to ``default`` (the initial model; zeros for an optimizer
state). On disk a row never written is never read (a mask says which were), so
the file stays sparse and gathering such a row costs no page; in RAM every row
is allocated at the start, as the methods held them before. Both give the same
numbers, so a run's traces do not depend on where its state lives.

Checkpoints: in RAM ``state_dict`` is the ``[N, ...]`` tensor (what the methods'
checkpoints held before). On disk it is a reference to a snapshot file of the
written rows, written once (temporary name, fsync, rename) and named by the
SHA-256 of the row ids and bytes, which the reference carries and a load checks:
later in-place writes to the live file cannot change what a checkpoint refers
to. A store keeps its two latest snapshots (the checkpoint on disk refers to the
older one while the next checkpoint is being written). Either kind of store
loads either kind of state, so a run may resume with its state elsewhere.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wirelessfl.results.io import fsync_directory

WHERE = ("memory", "disk")
"""Where a store's rows live."""

CHUNK_BYTES = 64 * 2**20
"""Rows copied per step when a disk store writes or reads a snapshot (bounds the RAM a checkpoint takes)."""

LIVE_SUFFIX = ".live"
SNAPSHOT_SUFFIX = ".rows"


class StoreError(ValueError):
    """A client-store snapshot that cannot be used; one line naming the file."""


_HANDING_OVER: ContextVar[bool] = ContextVar("client_store_handing_over", default=False)


@contextmanager
def handover() -> Iterator[None]:
    """Inside it ``state_dict`` returns the store itself (no snapshot file), for a state loaded at once into
    another algorithm in this process (a ``trains_as`` follower takes its trainer's state every round)."""
    token = _HANDING_OVER.set(True)
    try:
        yield
    finally:
        _HANDING_OVER.reset(token)


class ClientStore:
    """``rows`` rows shaped like ``default``, each starting equal to it; see the module docstring."""

    where = "memory"

    def __init__(self, name: str, rows: int, default: torch.Tensor, directory: Path | None) -> None:
        self.name = name
        self.rows = int(rows)
        self.default = default.detach()
        self.shape = tuple(default.shape)
        self.directory = directory  # where snapshots are read from (and, on disk, written)

    @property
    def row_bytes(self) -> int:
        return math.prod(self.shape) * self.default.element_size()

    def gather(self, index) -> torch.Tensor:
        """``[len(index), *shape]``: a copy of the rows of ``index`` on the default's device."""
        raise NotImplementedError

    def scatter(self, index, values: torch.Tensor) -> None:
        """Row ``index[r]`` becomes ``values[r]``."""
        raise NotImplementedError

    def compact(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        """``(params, rows)`` with ``params[rows[r]]`` the row of ``index[r]``, for ``engine.evaluate(params, rows=rows)``:
        no ``[len(index), *shape]`` copy where the rows can be read in place, or rows equal to the default shared."""
        raise NotImplementedError

    def full(self) -> torch.Tensor:
        """``[rows, *shape]``: every row (a copy on disk; for small populations)."""
        raise NotImplementedError

    def state_dict(self) -> Any:
        raise NotImplementedError

    def load_state_dict(self, state: Any) -> None:
        raise NotImplementedError

    @property
    def chunk_rows(self) -> int:
        return max(1, CHUNK_BYTES // max(1, self.row_bytes))

    def chunks(self) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        """``(ids, rows)`` of the rows that differ from the default (on disk: the written ones), chunk by chunk."""
        raise NotImplementedError

    def _state_rows(self, state: Any) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        """``(ids, rows)`` chunks of a state: a whole ``[N, ...]`` tensor, a disk snapshot (verified), or another
        store (handed over)."""
        if isinstance(state, ClientStore):
            yield from state.chunks()
            return
        if isinstance(state, torch.Tensor):
            if tuple(state.shape) != (self.rows, *self.shape):
                raise StoreError(f"client store {self.name!r}: checkpointed rows have shape {list(state.shape)}, expected {[self.rows, *self.shape]}")
            step = max(1, CHUNK_BYTES // max(1, self.row_bytes))
            for start in range(0, self.rows, step):
                yield np.arange(start, min(self.rows, start + step), dtype=np.int64), state[start : start + step]
            return
        yield from read_snapshot(self, state)


class MemoryStore(ClientStore):
    """The rows as one tensor on the device."""

    def __init__(self, name: str, rows: int, default: torch.Tensor, directory: Path | None = None) -> None:
        super().__init__(name, rows, default, directory)
        self.data = self.default.expand(self.rows, *self.shape).clone()

    def _index(self, index) -> torch.Tensor:
        return torch.as_tensor(index, dtype=torch.long, device=self.data.device)

    def gather(self, index) -> torch.Tensor:
        return self.data[self._index(index)]

    def scatter(self, index, values: torch.Tensor) -> None:
        self.data[self._index(index)] = values

    def compact(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data, torch.as_tensor(index, dtype=torch.long)

    def full(self) -> torch.Tensor:
        return self.data

    def chunks(self) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        for start in range(0, self.rows, self.chunk_rows):
            yield np.arange(start, min(self.rows, start + self.chunk_rows), dtype=np.int64), self.data[start : start + self.chunk_rows]

    def state_dict(self) -> torch.Tensor | ClientStore:
        if _HANDING_OVER.get():
            return self
        return self.data.detach().cpu().clone()

    def load_state_dict(self, state: Any) -> None:
        if isinstance(state, torch.Tensor):
            self.data = state.to(self.default.device).clone()
            return
        if isinstance(state, MemoryStore):
            self.data = state.data.clone()
            return
        data = self.default.expand(self.rows, *self.shape).clone()
        for ids, rows in self._state_rows(state):
            data[torch.as_tensor(ids, device=data.device)] = rows.to(data.device, data.dtype)
        self.data = data


class DiskStore(ClientStore):
    """The rows in ``directory/<name>.live``, a sparse file mapped shared; a mask of the rows written."""

    where = "disk"

    def __init__(self, name: str, rows: int, default: torch.Tensor, directory: Path) -> None:
        super().__init__(name, rows, default, directory)
        self.snapshots: list[str] = []
        self._open()

    @property
    def live(self) -> Path:
        return self.directory / f"{self.name}{LIVE_SUFFIX}"

    def _open(self) -> None:
        """A fresh sparse live file: nothing written yet (what a previous run left there is not read)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.live.unlink(missing_ok=True)
        size = self.rows * math.prod(self.shape)
        self.data = torch.from_file(str(self.live), shared=True, size=size, dtype=self.default.dtype).view(self.rows, *self.shape)
        self.written = np.zeros(self.rows, dtype=bool)

    def gather(self, index) -> torch.Tensor:
        ids = np.asarray(index, dtype=np.int64).reshape(-1)
        out = self.default.expand(len(ids), *self.shape).clone()
        hit = np.flatnonzero(self.written[ids])
        if len(hit):
            rows = self.data.index_select(0, torch.from_numpy(ids[hit]))
            out[torch.from_numpy(hit).to(out.device)] = rows.to(out.device)
        return out

    def scatter(self, index, values: torch.Tensor) -> None:
        ids = np.asarray(index, dtype=np.int64).reshape(-1)
        self.data.index_copy_(0, torch.from_numpy(ids), values.detach().to("cpu", self.default.dtype))
        self.written[ids] = True

    def compact(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        """Row 0 the default (shared by every unwritten row), then each distinct written row once."""
        ids = np.asarray(index, dtype=np.int64).reshape(-1)
        hit = self.written[ids]
        distinct = np.unique(ids[hit])
        params = torch.cat([self.default[None], self.data.index_select(0, torch.from_numpy(distinct)).to(self.default.device)])
        rows = np.zeros(len(ids), dtype=np.int64)
        rows[hit] = 1 + np.searchsorted(distinct, ids[hit])
        return params, torch.from_numpy(rows)

    def full(self) -> torch.Tensor:
        return self.gather(np.arange(self.rows))

    def chunks(self) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
        ids = np.flatnonzero(self.written).astype(np.int64)
        for start in range(0, len(ids), self.chunk_rows):
            part = ids[start : start + self.chunk_rows]
            yield part, self.data.index_select(0, torch.from_numpy(part))

    def state_dict(self) -> dict[str, Any] | ClientStore:
        """A snapshot of the written rows (see the module docstring) and its reference."""
        if _HANDING_OVER.get():
            return self
        ids = np.flatnonzero(self.written).astype(np.int64)
        digest = hashlib.sha256(ids.tobytes())
        temporary = self.directory / f".{self.name}{SNAPSHOT_SUFFIX}.tmp"
        with open(temporary, "wb") as handle:
            for _, rows in self.chunks():
                chunk = rows.numpy().tobytes()
                digest.update(chunk)
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        sha = digest.hexdigest()
        name = f"{self.name}.{sha[:16]}{SNAPSHOT_SUFFIX}"
        os.replace(temporary, self.directory / name)
        fsync_directory(self.directory)
        self._keep(name)
        return {"store": "disk", "file": name, "rows": ids, "sha256": sha}

    def _keep(self, name: str) -> None:
        """Keep ``name`` and the snapshot before it; remove this store's older ones (only files it wrote or
        loaded: a file of another store is never touched)."""
        if name in self.snapshots:
            self.snapshots.remove(name)
        older, self.snapshots = self.snapshots[:-1], [*self.snapshots[-1:], name]
        for stale in older:
            (self.directory / stale).unlink(missing_ok=True)

    def load_state_dict(self, state: Any) -> None:
        if state is self:
            return
        self._open()
        for ids, rows in self._state_rows(state):
            self.scatter(ids, rows)
        if isinstance(state, dict):
            self.snapshots = [state["file"]]

    def close(self) -> None:
        """Unmap the live file (the unit is finished)."""
        self.data = None


def read_snapshot(store: ClientStore, state: Any) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
    """The rows of a disk store's snapshot reference ``state``, in chunks; ``StoreError`` when the file is missing,
    has another size or other bytes than the reference's SHA-256."""
    if not (isinstance(state, dict) and state.get("store") == "disk" and {"file", "rows", "sha256"} <= set(state)):
        raise StoreError(f"client store {store.name!r}: the checkpoint holds no rows for it")
    if store.directory is None:
        raise StoreError(f"client store {store.name!r}: its checkpoint refers to a snapshot file, but this run has no store folder")
    path = store.directory / Path(str(state["file"])).name
    ids = np.asarray(state["rows"], dtype=np.int64)
    expected = len(ids) * store.row_bytes
    try:
        size = path.stat().st_size
    except OSError as err:
        raise StoreError(f"{path}: cannot read the client-store snapshot: {err.strerror or err}; delete the unit's checkpoint to retrain it") from None
    if size != expected:
        raise StoreError(f"{path}: client-store snapshot of {size} bytes, its checkpoint expects {expected}; delete the unit's checkpoint to retrain it")
    digest = hashlib.sha256(ids.tobytes())
    step = max(1, CHUNK_BYTES // max(1, store.row_bytes))
    with open(path, "rb") as handle:
        for start in range(0, len(ids), step):
            part = ids[start : start + step]
            raw = handle.read(len(part) * store.row_bytes)
            digest.update(raw)
            rows = torch.frombuffer(bytearray(raw), dtype=store.default.dtype).view(len(part), *store.shape)
            yield part, rows
    if digest.hexdigest() != state["sha256"]:
        raise StoreError(f"{path}: checksum mismatch: the client-store snapshot changed after its checkpoint was written; delete the unit's checkpoint to retrain it")


class ClientStores:
    """Makes one unit's stores, all in RAM or all on disk under ``directory`` (when None, a temporary folder in
    ``temporary_parent``, or the system's).

    Names are made unique in the order stores are asked for (``optimizer``, ``optimizer-2``), which an algorithm
    repeats when it is built again, so a resumed run finds its files.
    """

    def __init__(self, where: str = "memory", directory: Path | None = None, temporary_parent: Path | None = None) -> None:
        if where not in WHERE:
            raise ValueError(f"client store where must be one of {', '.join(WHERE)}, got {where!r}")
        self.where = where
        self._temporary: tempfile.TemporaryDirectory | None = None
        if where == "disk" and directory is None:
            if temporary_parent is not None:
                temporary_parent.mkdir(parents=True, exist_ok=True)
            self._temporary = tempfile.TemporaryDirectory(prefix="wirelessfl-store-", dir=temporary_parent)
            directory = Path(self._temporary.name)
        self.directory = directory
        self.stores: list[ClientStore] = []

    def new(self, name: str, rows: int, default: torch.Tensor) -> ClientStore:
        """A store of ``rows`` rows, each starting as ``default``."""
        taken = {store.name for store in self.stores}
        unique, count = name, 1
        while unique in taken:
            count += 1
            unique = f"{name}-{count}"
        kind = DiskStore if self.where == "disk" else MemoryStore
        store = kind(unique, rows, default, self.directory)
        self.stores.append(store)
        return store

    def release(self, keep_latest: bool = False) -> None:
        """A finished unit's disk files: everything in its folder but, with ``keep_latest``, each store's latest
        snapshot (its last checkpoint refers to them)."""
        kept = set()
        for store in self.stores:
            if isinstance(store, DiskStore):
                store.close()
                kept.update(store.snapshots[-1:] if keep_latest else [])
        if self._temporary is not None:
            self._temporary.cleanup()
        elif self.directory is not None and self.directory.is_dir():
            for path in self.directory.iterdir():
                if path.name not in kept and path.is_file() and path.name.endswith((LIVE_SUFFIX, SNAPSHOT_SUFFIX, ".tmp")):
                    path.unlink()
            if not any(self.directory.iterdir()):
                self.directory.rmdir()
