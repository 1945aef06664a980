"""Hand-made tiny federations and an engine-free MLP, shared by the algorithm tests that check by hand."""

from __future__ import annotations

import torch

from wirelessfl.learning.data.federated import ClientData, FederatedData

SHAPE = (1, 4, 4)
CLASSES = 3


def tiny_data(sizes, seed: int = 0) -> FederatedData:
    """Random 1x4x4 inputs, 3 classes; client i trains on ``sizes[i]`` samples, 4 val and 4 test each."""
    g = torch.Generator().manual_seed(seed)

    def split(n):
        return torch.randn((n, *SHAPE), generator=g), torch.randint(0, CLASSES, (n,), generator=g)

    clients = [ClientData(*split(n), *split(4), *split(4)) for n in sizes]
    return FederatedData(clients, CLASSES, SHAPE, "tiny", "hand-made random data")


def mlp_logits(arch, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The mlp written out by hand from the flat layout (float64), independent of the engine."""
    h = x.reshape(len(x), -1).double()
    slices = arch.param_slices
    layers = len(slices) // 2
    for k in range(layers):
        w, b = slices[2 * k], slices[2 * k + 1]
        h = h @ flat[w.offset : w.stop].view(w.shape).T + flat[b.offset : b.stop]
        if k < layers - 1:
            h = torch.relu(h)
    return h


def documented_defaults(name: str) -> dict[str, str]:
    """The ``| `param` | `default` |`` rows of ``docs/algorithms.md``'s section on ``name``, as written there."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "algorithms.md").read_text(encoding="utf-8")
    section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", section, re.M))
