"""This checkout's lockstep engine against another checkout's, in one process, interleaved.

Compares training speed of the same LeNet-5 workload as ``bench_lockstep.py``
(EMNIST-shaped random data, one epoch, batch 32, SGD lr 0.1 momentum 0.9), best
of ``--repeats``, the two engines alternating so that load from other processes
hits both alike, and checks that both train to the same parameters. With
``--method batch_gradients`` it times UCFL's sigma^2 pass instead (600 samples
per client, 10 batches of 60, the ``ucfl`` defaults on scenario 2's split), with
``--method evaluate`` an evaluation of 600 samples per client; ``--input 3 32 32
--classes 10`` gives CIFAR-10's shapes (scenario 3's LeNet-5). The other
engine is ``OTHER/wirelessfl/learning/lockstep.py`` of a checkout made with
``git worktree add /tmp/old REV``, with that checkout's own modules
(``ENGINE_MODULES``: kernels, optimizer, allocator setting, models); both
engines get the same flat parameters, so use it for revisions whose LeNet-5
parameter layout is the same (all of them so far).

    git worktree add /tmp/old b7ebb06 && python benchmarks/bench_engine_versions.py /tmp/old
    python benchmarks/bench_engine_versions.py /tmp/old --method batch_gradients --clients 20
    python benchmarks/bench_engine_versions.py /tmp/old --method evaluate --input 3 32 32 --classes 10
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from wirelessfl.learning import lockstep
from wirelessfl.learning.models import get_architecture

sys.path.insert(0, str(Path(__file__).parent))
from bench_lockstep import make_clients  # noqa: E402


ENGINE_MODULES = ("halide_aot", "heap", "optim", "models", "first_block", "accelerators", "schedule", "workers", "phases", "stacked", "lockstep")
"""The other checkout's modules its engine runs with, in import order (older revisions lack some)."""


def load_other(checkout: Path):
    """The other checkout's ``lockstep`` module, bound to its own ``ENGINE_MODULES``.

    Each is executed under its canonical name while that name points to it (in
    ``sys.modules`` and as an attribute of ``wirelessfl.learning``, which
    ``from wirelessfl.learning import optim`` reads), then this checkout's
    modules are put back: the other engine keeps what it bound at import.
    """
    package = sys.modules["wirelessfl.learning"]
    saved = {name: (sys.modules.get(f"{package.__name__}.{name}"), getattr(package, name, None)) for name in ENGINE_MODULES}
    loaded = {}
    try:
        for name in ENGINE_MODULES:
            path = checkout / "wirelessfl" / "learning" / f"{name}.py"
            if not path.exists():
                continue
            spec = importlib.util.spec_from_file_location(f"{package.__name__}.{name}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
            setattr(package, name, module)
            spec.loader.exec_module(module)
            loaded[name] = module
    finally:
        for name, (module, attribute) in saved.items():
            if module is None:
                sys.modules.pop(f"{package.__name__}.{name}", None)
            else:
                sys.modules[f"{package.__name__}.{name}"] = module
            if attribute is None:
                if hasattr(package, name):
                    delattr(package, name)
            else:
                setattr(package, name, attribute)
    return loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="root of the other checkout")
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--method", choices=["train", "batch_gradients", "evaluate"], default="train")
    parser.add_argument("--input", type=int, nargs=3, default=[1, 28, 28], metavar=("C", "H", "W"), help="image shape (3 32 32: CIFAR-10's)")
    parser.add_argument("--classes", type=int, default=62)
    args = parser.parse_args()
    loaded = load_other(args.other)
    other = loaded["lockstep"]
    arch = get_architecture("lenet5", tuple(args.input), args.classes)
    other_arch = loaded["models"].get_architecture("lenet5", tuple(args.input), args.classes) if "models" in loaded else arch
    settings = dict(epochs=1, batch_size=32, lr=0.1, momentum=0.9)
    engines = {"other": (other.LockstepEngine(other_arch), other.TrainConfig(**settings)), "this": (lockstep.LockstepEngine(arch), lockstep.TrainConfig(**settings))}
    per_client = 320 if args.method == "train" else 600

    def run(engine, cfg, params, data):
        if args.method == "train":
            return engine.train(params, data, cfg, torch.Generator().manual_seed(1)).params
        if args.method == "evaluate":
            result = engine.evaluate(params, data)
            return torch.stack([result.accuracy, result.loss])
        return engine.batch_gradients(params, data, 60, 10, torch.Generator().manual_seed(1))

    for clients in args.clients:
        params, data = make_clients(arch, clients, per_client)
        best, trained = {}, {}
        for _ in range(args.repeats):
            for name, (engine, cfg) in engines.items():
                start = time.perf_counter()
                trained[name] = run(engine, cfg, params, data)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        samples = clients * per_client
        print(
            f"clients={clients:4d}  other {samples / best['other']:8.0f} samples/s  this {samples / best['this']:8.0f} samples/s"
            f"  this/other {best['other'] / best['this']:.3f}  max |difference| {(trained['this'] - trained['other']).abs().max().item():.1e}"
        )


if __name__ == "__main__":
    main()
