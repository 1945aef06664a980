"""Checkpoints that cannot carry code: safetensors holding tensors and one JSON tree.

A pickle (what ``torch.save`` writes) runs whatever its author put in it when it
is loaded, so ``--resume`` on a run directory someone sent, or any script that
reads its checkpoints, would run foreign code. A checkpoint here is one
safetensors file: every tensor and NumPy array is a tensor entry, and the rest
of the state is a JSON document stored as the uint8 tensor ``tree``. Reading it
parses JSON and copies bytes into tensors, nothing else; the only objects built
are plain values and the dataclasses passed in ``types`` (the seam's
``Stream``, ``CommPlan``, ``RoundTiming`` by default), from their fields.

Integrity: the metadata holds the SHA-256 of every entry's bytes (``sha256``, a
JSON object entry -> hex digest), checked before anything is decoded, so a
flipped bit in a model tensor is one line naming the file instead of a run that
resumes from garbage (safetensors checks lengths and offsets, not contents). A
caller may also stamp the file with a ``fingerprint`` string (simulate stores a
hash of the resolved scenario) and refuse a file whose stamp differs on load, and
with ``provenance`` (name -> value strings: how the state was made, such as the
seeding scheme), refused on load where a value is not the expected one or is
missing (a file written before that name existed).

Safetensors over ``torch.load(weights_only=True)``: that is still an unpickler
(a restricted one, which has had bypasses), while safetensors is a length-checked
header and raw bytes, so a truncated file is caught before anything is built.

JSON tree encoding: ``None``, bool, int, float (repr round-trips exactly, NaN
and infinities included), str, list and dicts with string keys are themselves;
everything else is a one-key object whose key starts with ``$``:
``$tensor``/``$ndarray`` (index of the tensor entry), ``$numpy`` (a NumPy scalar:
dtype and value), ``$tuple``, ``$set``, ``$frozenset`` (elements in iteration
order, as pickle keeps them), ``$dict`` (keys and values, for other keys or
keys starting with ``$``), ``$mappingproxy`` and ``$obj`` (type name, fields).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as _load_tensors
from safetensors.torch import save as _save_tensors

from wirelessfl.results.io import atomic_write_bytes
from wirelessfl.seam import CommPlan, RoundTiming, Stream, StreamDelivery

FORMAT = "wirelessfl-checkpoint"
VERSION = "2"
SUFFIX = ".safetensors"
SEAM_TYPES: tuple[type, ...] = (Stream, CommPlan, RoundTiming, StreamDelivery)
"""The dataclasses a checkpoint may rebuild unless the caller allows more (simulate adds its RoundRecord)."""

_NUMPY_KINDS = "biuf"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the text is one line naming the file and what to do."""


class FingerprintMismatch(CheckpointError):
    """A whole checkpoint whose ``fingerprint`` is not the one the caller expects (written for other settings)."""


class ProvenanceMismatch(CheckpointError):
    """A whole checkpoint whose ``provenance`` entry ``name`` is ``found`` (None: absent), not the expected value."""

    def __init__(self, path: Path | str, name: str, found: str | None) -> None:
        super().__init__(f"{path}: written with {name} {found!r}")
        self.path, self.name, self.found = Path(path), name, found


def _tag(name: str, value: Any) -> dict[str, Any]:
    return {name: value}


class _Encoder:
    def __init__(self, types: Iterable[type]) -> None:
        self.types = {cls: cls.__name__ for cls in types}
        self.tensors: dict[str, torch.Tensor] = {}
        self.storages: set[int] = set()

    def tensor(self, value: torch.Tensor) -> int:
        """A CPU tensor that owns all of its storage (safetensors refuses views and shared storage)."""
        t = value.detach().cpu()
        storage = t.untyped_storage()
        if (
            not t.is_contiguous()
            or t.storage_offset() != 0
            or storage.nbytes() != t.numel() * t.element_size()
            or (t.numel() and storage.data_ptr() in self.storages)
        ):
            t = t.clone(memory_format=torch.contiguous_format)
        if t.numel():
            self.storages.add(t.untyped_storage().data_ptr())
        index = len(self.tensors)
        self.tensors[str(index)] = t
        return index

    def encode(self, value: Any, where: str) -> Any:
        if isinstance(value, np.generic):
            if value.dtype.kind not in _NUMPY_KINDS:
                raise TypeError(f"checkpoint: cannot store a NumPy {value.dtype} scalar at {where}")
            return _tag("$numpy", [value.dtype.str, value.item()])
        if value is None or type(value) in (bool, int, float, str):
            return value
        if isinstance(value, torch.Tensor):
            return _tag("$tensor", self.tensor(value))
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in _NUMPY_KINDS:
                raise TypeError(f"checkpoint: cannot store a NumPy array of {value.dtype} at {where}")
            return _tag("$ndarray", self.tensor(torch.from_numpy(np.array(value, order="C", copy=True))))
        if type(value) is list:
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if type(value) is tuple:
            return _tag("$tuple", [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)])
        if type(value) in (set, frozenset):
            name = "$set" if type(value) is set else "$frozenset"
            return _tag(name, [self.encode(v, f"{where}{{}}") for v in value])
        if type(value) is MappingProxyType:
            return _tag("$mappingproxy", self.encode(dict(value), where))
        if type(value) is dict:
            if all(type(k) is str and not k.startswith("$") for k in value):
                return {k: self.encode(v, f"{where}.{k}") for k, v in value.items()}
            keys = [self.encode(k, f"{where} key") for k in value]
            return _tag("$dict", [keys, [self.encode(v, f"{where}[{k!r}]") for k, v in value.items()]])
        if type(value) in self.types:
            fields = {f.name: self.encode(getattr(value, f.name), f"{where}.{f.name}") for f in dataclasses.fields(value) if f.init}
            return _tag("$obj", [self.types[type(value)], fields])
        raise TypeError(f"checkpoint: cannot store {type(value).__qualname__} at {where} (not a plain value, tensor, array or allowed dataclass)")


class _Damaged(Exception):
    """Raised inside decoding; becomes a CheckpointError naming the file."""


class _Refused(Exception):
    """The file is a pickle; it is never unpickled."""


class _Decoder:
    def __init__(self, types: Iterable[type], tensors: dict[str, torch.Tensor]) -> None:
        self.types = {cls.__name__: cls for cls in types}
        self.tensors = tensors

    def tensor(self, index: Any) -> torch.Tensor:
        if type(index) is not int or str(index) not in self.tensors:
            raise _Damaged(f"tensor {index!r} is missing")
        return self.tensors[str(index)]

    def decode(self, node: Any) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            return [self.decode(v) for v in node]
        if type(node) is not dict:
            raise _Damaged(f"unexpected {type(node).__name__} in the tree")
        if len(node) != 1 or not next(iter(node)).startswith("$"):
            if any(k.startswith("$") for k in node):
                raise _Damaged(f"malformed tag {sorted(node)}")
            return {k: self.decode(v) for k, v in node.items()}
        (tag, body), = node.items()
        if tag == "$tensor":
            return self.tensor(body)
        if tag == "$ndarray":
            return self.tensor(body).numpy()
        if tag == "$numpy":
            if type(body) is not list or len(body) != 2 or type(body[0]) is not str:
                raise _Damaged("malformed NumPy scalar")
            dtype = np.dtype(body[0])
            if dtype.kind not in _NUMPY_KINDS:
                raise _Damaged(f"NumPy scalar of {dtype}")
            return dtype.type(body[1])
        if tag == "$obj":
            if type(body) is not list or len(body) != 2 or type(body[1]) is not dict:
                raise _Damaged("malformed object")
            name, fields = body
            if name not in self.types:
                raise _Damaged(f"object type {name!r} is not one a checkpoint may hold")
            return self.types[name](**{k: self.decode(v) for k, v in fields.items()})
        if tag == "$mappingproxy":
            mapping = self.decode(body)
            if type(mapping) is not dict:
                raise _Damaged("malformed $mappingproxy")
            return MappingProxyType(mapping)
        if type(body) is not list:
            raise _Damaged(f"malformed {tag}")
        if tag == "$tuple":
            return tuple(self.decode(v) for v in body)
        if tag == "$set":
            return {self.decode(v) for v in body}
        if tag == "$frozenset":
            return frozenset(self.decode(v) for v in body)
        if tag == "$dict":
            if len(body) != 2 or type(body[0]) is not list or type(body[1]) is not list or len(body[0]) != len(body[1]):
                raise _Damaged("malformed $dict")
            return {self.decode(k): self.decode(v) for k, v in zip(*body)}
        raise _Damaged(f"unknown tag {tag!r}")


def dumps(
    state: Any, types: Iterable[type] = SEAM_TYPES, fingerprint: str = "", provenance: Mapping[str, str] | None = None
) -> bytes:
    """``state`` as safetensors bytes; TypeError names the first value that a checkpoint cannot hold.

    The file is serialised twice: the first pass lays out the entries, whose
    bytes are hashed into the metadata of the second (the data section does not
    depend on the metadata, so the digests describe the final file).
    """
    encoder = _Encoder(types)
    tree = json.dumps(encoder.encode(state, "state"), separators=(",", ":")).encode("utf-8")
    tensors = {"tree": torch.frombuffer(bytearray(tree), dtype=torch.uint8), **encoder.tensors}
    meta = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint}
    if provenance:
        meta["provenance"] = json.dumps(dict(provenance), sort_keys=True, separators=(",", ":"))
    first = _save_tensors(tensors, metadata=meta)
    size = int.from_bytes(first[:8], "little")
    with memoryview(first) as whole, whole[8 + size:] as data:  # hashed in place: a slice of bytes would copy it
        digests = {key: hashlib.sha256(data[start:end]).hexdigest() for key, (start, end) in _offsets(json.loads(first[8:8 + size])).items()}
    del first  # freed before the second pass, so the state is held once beside one serialised copy at a time
    return _save_tensors(tensors, metadata={**meta, "sha256": json.dumps(digests, sort_keys=True, separators=(",", ":"))})


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + size]), data[8 + size :]


def _offsets(header: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {key: tuple(entry["data_offsets"]) for key, entry in header.items() if key != "__metadata__"}


def _looks_like_pickle(data: bytes) -> bool:
    """A torch.save zip archive or a bare pickle (protocol 2 and up start with PROTO)."""
    return data[:4] == b"PK\x03\x04" or (len(data) > 1 and data[0] == 0x80 and 2 <= data[1] <= 5)


def loads(
    data: bytes,
    path: Path | str,
    types: Iterable[type] = SEAM_TYPES,
    fingerprint: str | Collection[str] | None = None,
    provenance: Mapping[str, str] | None = None,
) -> Any:
    """The state written by :func:`dumps`; CheckpointError (one line naming ``path``) for anything else.

    With ``provenance``, a file whose entry differs or is missing raises ``ProvenanceMismatch`` (checked
    before the fingerprint: a file made another way says so first); with ``fingerprint`` (one stamp, or
    the stamps accepted), a file stamped with another one raises ``FingerprintMismatch``.
    """
    try:
        return _decode(data, types, fingerprint, provenance)
    except _OtherProvenance as other:
        raise ProvenanceMismatch(path, other.name, other.found) from None
    except _Refused:
        raise CheckpointError(
            f"{path}: refused: the file is a Python pickle, which could run code when loaded "
            "(wirelessfl checkpoints are safetensors); delete it to retrain that unit"
        ) from None
    except _OtherSettings:
        raise FingerprintMismatch(f"{path}: written for other settings") from None
    except MemoryError:
        raise
    except Exception as err:  # JSON, safetensors, a malformed tree or fields: all mean a damaged file
        reason = " ".join(str(err).split())[:120] or type(err).__name__
        run = Path(path).parent.parent
        raise CheckpointError(
            f"{path}: damaged checkpoint ({reason}); delete it and run `wirelessfl simulate --resume {run}` "
            "to retrain that unit"
        ) from None


class _OtherSettings(Exception):
    """The stamp differs from the expected one; the caller words the message."""


class _OtherProvenance(Exception):
    def __init__(self, name: str, found: str | None) -> None:
        super().__init__(name)
        self.name, self.found = name, found


def _accepted(fingerprint: str | Collection[str]) -> Collection[str]:
    return (fingerprint,) if isinstance(fingerprint, str) else fingerprint


def _decode(
    data: bytes,
    types: Iterable[type],
    fingerprint: str | Collection[str] | None = None,
    provenance: Mapping[str, str] | None = None,
) -> Any:
    if len(data) < 9 or data[8:9] != b"{":
        if _looks_like_pickle(data):
            raise _Refused
        raise _Damaged("not a safetensors file" if len(data) >= 9 else f"only {len(data)} bytes")
    size = int.from_bytes(data[:8], "little")
    if 8 + size > len(data):
        raise _Damaged(f"truncated: the header alone needs {8 + size} bytes, the file has {len(data)}")
    header = json.loads(data[8 : 8 + size])
    meta = header.get("__metadata__") or {}
    if meta.get("format") != FORMAT:
        raise _Damaged("a safetensors file, but not a wirelessfl checkpoint")
    if meta.get("version") != VERSION:
        if meta.get("version") == "1":
            raise _Damaged("written by an older wirelessfl, without the checksums this one verifies")
        raise _Damaged(f"format version {meta.get('version')!r}, this wirelessfl reads {VERSION!r}")
    total = 8 + size + max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if len(data) < total:
        raise _Damaged(f"truncated: {len(data)} bytes of {total}")
    if len(data) > total:
        raise _Damaged(f"{len(data) - total} bytes after the end of the data")
    digests = json.loads(meta.get("sha256") or "{}")
    body = data[8 + size :]
    for key, (start, end) in _offsets(header).items():
        if digests.get(key) != hashlib.sha256(body[start:end]).hexdigest():
            raise _Damaged(f"checksum mismatch in entry {key!r}: its bytes changed after it was written")
    written = json.loads(meta.get("provenance") or "{}")
    for name, expected in (provenance or {}).items():
        if written.get(name) != expected:
            raise _OtherProvenance(name, written.get(name))
    if fingerprint is not None and meta.get("fingerprint") not in _accepted(fingerprint):
        raise _OtherSettings
    tensors = _load_tensors(data)
    if "tree" not in tensors:
        raise _Damaged("no tree")
    tree = json.loads(tensors.pop("tree").numpy().tobytes().decode("utf-8"))
    return _Decoder(types, tensors).decode(tree)


def save_checkpoint(
    path: Path | str,
    state: Any,
    types: Iterable[type] = SEAM_TYPES,
    fingerprint: str = "",
    provenance: Mapping[str, str] | None = None,
) -> None:
    """Write ``state`` atomically (the previous file stays whole if writing fails)."""
    atomic_write_bytes(path, dumps(state, types, fingerprint, provenance))


def fingerprint_of(path: Path | str) -> str | None:
    """The stamp a checkpoint was written with (its header only; None when the file has none or is unreadable)."""
    try:
        with open(path, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
        return (header.get("__metadata__") or {}).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def load_checkpoint(
    path: Path | str,
    types: Iterable[type] = SEAM_TYPES,
    fingerprint: str | Collection[str] | None = None,
    provenance: Mapping[str, str] | None = None,
) -> Any:
    """Read a checkpoint written by :func:`save_checkpoint`, refusing pickles, damaged files and (with
    ``fingerprint`` / ``provenance``) files stamped for other settings or made another way with one line.

    Only a regular file is opened: a symlink or a FIFO (which would block the
    read) in a run folder is refused, so a checkpoint cannot pull in a file from
    elsewhere or hang a resume.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read the checkpoint: {err.strerror or err}") from None
    if not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise CheckpointError(
            f"{path}: refused: {kind} (a checkpoint must be a regular file inside the run folder); "
            "delete it to retrain that unit"
        )
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read the checkpoint: {err.strerror or err}") from None
    return loads(data, path, types, fingerprint, provenance)
