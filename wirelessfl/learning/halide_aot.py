"""Halide pipelines compiled ahead of time into a shared library and called through ctypes.

Why not Halide's own Python call: its JIT callables hold the GIL for the whole
call, so the engine's two worker threads ran one after the other (measured:
2 x 100 calls took 2.08x one thread's 100). A ``ctypes`` call releases the GIL.
So a pipeline is compiled once with ``compile_to_static_library``, linked into
a ``.so`` with the system C compiler driver, and cached on disk under a key of
everything that changes its code; later processes load the ``.so`` without
importing Halide at all.

``halide_buffer_t`` below mirrors ``HalideRuntime.h``; a buffer is a view of a
torch tensor's memory (no copy), dimensions listed innermost first. The
pipelines keep Halide's runtime checks (asserts and bounds queries): a buffer
of an unexpected shape or stride raises instead of reading the wrong memory.
A cold build takes 30-90 s per pipeline with the system compiler (more under
load); the cache keeps the few most recently used libraries per pipeline.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import torch


class _Dimension(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class _Type(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Buffer(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_uint64),
        ("device_interface", ctypes.c_void_p),
        ("host", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("type", _Type),
        ("dimensions", ctypes.c_int32),
        ("dim", ctypes.POINTER(_Dimension)),
        ("padding", ctypes.c_void_p),
    ]


_TYPE_CODES = {torch.float32: (2, 32), torch.uint8: (1, 8)}  # halide_type_float / halide_type_uint


def _buffer(t: torch.Tensor) -> tuple[_Buffer, ctypes.Array]:
    """A ``halide_buffer_t`` over ``t``'s memory (CPU); the dimension array must outlive the call."""
    code, bits = _TYPE_CODES[t.dtype]
    dims = (_Dimension * t.dim())(*[_Dimension(0, t.shape[k], t.stride(k), 0) for k in reversed(range(t.dim()))])
    return _Buffer(0, None, t.data_ptr(), 0, _Type(code, bits, 1), t.dim(), dims, None), dims


def cache_dir() -> Path:
    """``$WIRELESSFL_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/wirelessfl/kernels`` (``~/.cache/...``)."""
    if os.environ.get("WIRELESSFL_KERNEL_CACHE"):
        return Path(os.environ["WIRELESSFL_KERNEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "wirelessfl" / "kernels"


class KernelUnavailable(RuntimeError):
    """A pipeline could not be built here (no Halide, no C compiler driver, a failed link)."""


class CompiledPipeline:
    """A Halide pipeline as a C function of ``halide_buffer_t`` pointers, called on torch tensors."""

    def __init__(self, library: Path, name: str, arity: int):
        self._library = ctypes.CDLL(str(library))
        # the runtime linked into the library aborts the process on a failed check unless told otherwise
        self._library.halide_set_error_handler.argtypes = [_ERROR_HANDLER]
        self._library.halide_set_error_handler(_on_error)
        self._function = getattr(self._library, name)
        self._function.argtypes = [ctypes.POINTER(_Buffer)] * arity
        self._function.restype = ctypes.c_int
        self.arity = arity

    def __call__(self, *tensors: torch.Tensor) -> None:
        if len(tensors) != self.arity:
            raise TypeError(f"pipeline takes {self.arity} tensors, got {len(tensors)}")
        buffers = [_buffer(t) for t in tensors]
        _ERRORS.message = ""
        status = self._function(*[ctypes.byref(b) for b, _ in buffers])
        if status != 0:
            raise RuntimeError(f"Halide pipeline failed with status {status}: {_ERRORS.message.strip()}")


_ERRORS = threading.local()
_ERROR_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


@_ERROR_HANDLER
def _on_error(user_context, message: bytes) -> None:
    """Keep the runtime's message for the exception (the pipeline then returns its error status)."""
    _ERRORS.message = message.decode(errors="replace")


_BUILD_LOCK = threading.Lock()
_LOADED: dict[str, CompiledPipeline] = {}


@functools.cache
def _machine() -> str:
    """What the generated code depends on: the CPU's feature flags (a cache shared by other CPUs must not mix)."""
    try:
        with open("/proc/cpuinfo") as info:
            flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{platform.system()} {platform.machine()} {flags.strip()}"


def _halide_version() -> str | None:
    try:
        return metadata.version("halide")
    except metadata.PackageNotFoundError:
        return None


def build(name: str, key: str, arity: int, define: Callable[[], tuple]) -> CompiledPipeline:
    """Load pipeline ``name`` from the cache, or build it there first.

    ``key`` names everything that changes the generated code besides Halide's
    version, this machine's CPU and ``HL_TARGET`` (all added here); ``define()`` imports
    Halide and returns ``(pipeline, arguments, target)``. A cached library is
    loaded without importing Halide. Raises :class:`KernelUnavailable`.
    """
    version = _halide_version()
    if version is None:
        raise KernelUnavailable("the halide package is not installed")
    if platform.system() != "Linux":
        raise KernelUnavailable(f"kernels are linked as Linux shared libraries, this is {platform.system()}")
    target = os.environ.get("HL_TARGET", "host")  # Halide's own setting: code for another CPU than this one
    digest = hashlib.sha256(f"{name}|{key}|halide {version}|{_machine()}|{target}".encode()).hexdigest()[:20]
    with _BUILD_LOCK:
        if digest in _LOADED:
            return _LOADED[digest]
        library = cache_dir() / f"{name}-{digest}.so"
        if not library.exists():
            _compile(name, arity, define, library)
        pipeline = CompiledPipeline(library, name, arity)
        _LOADED[digest] = pipeline
        prune(name, library)
        return pipeline


KEEP = 4
"""Libraries of one pipeline kept in the cache: the one just loaded and the most recently used others."""


def prune(name: str, current: Path, keep: int = KEEP) -> list[Path]:
    """Delete all but the ``keep`` most recently used libraries of pipeline ``name``; the deleted paths.

    Every edit of a kernel, Halide upgrade or other CPU sharing the cache makes a
    new library; without this the stale ones piled up. ``current`` is marked
    used now, so it always stays; a library another process loaded is already
    mapped there and unaffected by the unlink.
    """
    os.utime(current)
    others = sorted((p for p in current.parent.glob(f"{name}-*.so") if p != current), key=lambda p: p.stat().st_mtime, reverse=True)
    removed = others[keep - 1 :]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def _compile(name: str, arity: int, define: Callable[[], tuple], library: Path) -> None:
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise KernelUnavailable("no C compiler driver (cc or gcc) to link the kernel library")
    try:
        _generate(name, arity, define, library, compiler)
    except KernelUnavailable:
        raise
    except Exception as err:  # an unwritable cache, a Halide error on this CPU: the caller falls back
        raise KernelUnavailable(f"building {name} failed: {type(err).__name__}: {str(err).strip()[:300]}") from err


def _generate(name: str, arity: int, define: Callable[[], tuple], library: Path, compiler: str) -> None:
    pipeline, arguments, target = define()
    outputs = sum(func.outputs() for func in pipeline.outputs())  # a Tuple-valued Func writes several buffers
    if len(arguments) + outputs != arity:
        raise ValueError(f"pipeline {name} has {len(arguments)} inputs and {outputs} outputs, not {arity}")
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as work:
        prefix = os.path.join(work, name)
        pipeline.compile_to_static_library(prefix, arguments, name, target)
        linked = os.path.join(work, name + ".so")
        command = [compiler, "-shared", "-o", linked, "-Wl,--whole-archive", prefix + ".a", "-Wl,--no-whole-archive", "-lpthread", "-ldl"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise KernelUnavailable(f"linking {name} failed: {result.stderr.strip()[:500]}")
        os.replace(linked, library)  # atomic: a concurrent process sees the old state or the whole library
