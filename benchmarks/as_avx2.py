"""Run a Python script with every library held to AVX2 on an AVX-512 CPU: a stand-in for an AVX2 machine.

torch's own kernels (``ATEN_CPU_CAPABILITY``), oneDNN (``ONEDNN_MAX_CPU_ISA``),
MKL (``MKL_ENABLE_INSTRUCTIONS``) and the engine's Halide kernels
(``HL_TARGET``, built apart in the kernel cache) then run AVX2 code. The
instructions are AVX2's but the cores are this CPU's, so the figures are not
those of an AVX2 CPU (docs/research/notes/2026-11-25-hand-written-engine-history.md, "Kept: register tiles per vector width").
Settings already in the environment are kept.

    python benchmarks/as_avx2.py benchmarks/bench_lockstep.py --clients 20 100 --repeats 3 --memory-clients 0
    python benchmarks/as_avx2.py "$(which wirelessfl)" simulate scenarios/paper/emnist-covariate-label-shift.yaml
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "HL_TARGET": "x86-64-linux-avx-avx2-f16c-fma-sse41",
}


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python benchmarks/as_avx2.py SCRIPT [ARGS...]")
    for name, value in AVX2.items():  # before torch is imported: the libraries read them once
        os.environ.setdefault(name, value)
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
