"""What model architectures are built in, as plain data: readable without torch (the schema checks
``model.name`` against it; ``models.py`` builds them)."""

from __future__ import annotations

ARCHITECTURES: dict[str, str] = {
    "lenet5": "LeNet-5 (user-centric-fl): conv6-pool-conv16-pool-fc120-fc84-fc; 28x28 padded, other sizes resized to 32x32",
    "cifar_cnn": "CIFAR CNN (pflego §4): 2x [conv64 5x5 + maxpool 3x3/2], fc384, fc192, fc",
    "mlp": "multilayer perceptron: flatten, hidden ReLU layers (option hidden, default (200,)), fc",
    "leaf_cnn": "LEAF CNN (adaptive experts §4.3): 2x [conv 5x5 + maxpool 2], dropout, fc, dropout, fc (options conv1, conv2, fc, dropout)",
}


def split_import_path(name: str) -> tuple[str, str]:
    """``(module, attribute)`` of a ``package.module:factory`` name, without importing anything; one-line
    ValueError for any other spelling."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise ValueError(f"model name must be one of {sorted(ARCHITECTURES)} or 'package.module:factory', got {name!r}")
    module_name, attribute = name.split(":")
    if not module_name or not attribute:
        raise ValueError(f"model name must be one of {sorted(ARCHITECTURES)} or 'package.module:factory', got {name!r}")
    return module_name, attribute
