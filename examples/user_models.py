"""Models a user brings: plain ``nn.Module`` factories that wirelessfl has never seen.

Name one in a scenario as ``model: {name: "examples.user_models:small_resnet"}``
(run from the repository root, or put your own module on ``PYTHONPATH``). A factory
is called as ``factory(input_shape, num_classes, **options)`` and returns a module
mapping ``[B, C, H, W]`` to ``[B, num_classes]`` logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TwoConvDropout(nn.Module):
    """Two convolutions, functional dropout and a reshape by ``x.size(0)``: the usual hand-written forward."""

    def __init__(self, channels: int, num_classes: int, width: int = 16, hidden: int = 64, p: float = 0.25, side: int = 28):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc1 = nn.Linear(2 * width * (side // 4) ** 2, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        x = F.dropout(x, self.p, self.training)
        return self.fc2(F.relu(self.fc1(x)))


def two_conv_dropout(input_shape, num_classes, width: int = 16, hidden: int = 64, p: float = 0.25) -> nn.Module:
    channels, height, width_px = input_shape
    if height != width_px or height % 4:
        raise ValueError(f"two_conv_dropout needs square inputs with a side divisible by 4, got {height}x{width_px}")
    return TwoConvDropout(channels, num_classes, width, hidden, p, height)


class Block(nn.Module):
    """A residual block with GroupNorm (ResNet v1 with GroupNorm in place of BatchNorm)."""

    def __init__(self, cin: int, cout: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(groups, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """ResNet-8: a stem, three residual blocks (widths w, 2w, 4w), global average pooling, a linear head."""

    def __init__(self, channels: int, num_classes: int, width: int, groups: int):
        super().__init__()
        self.stem = nn.Conv2d(channels, width, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(groups, width)
        self.blocks = nn.Sequential(
            Block(width, width, 1, groups), Block(width, 2 * width, 2, groups), Block(2 * width, 4 * width, 2, groups)
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm(self.stem(x)))
        x = self.pool(self.blocks(x))
        return self.fc(torch.flatten(x, 1))


def small_resnet(input_shape, num_classes, width: int = 8, groups: int = 2) -> nn.Module:
    return SmallResNet(input_shape[0], num_classes, width, groups)


class Gated(nn.Module):
    """A forward with a data-dependent branch: neither torch.fx nor vmap can run it, so the engine runs it slot by slot."""

    def __init__(self, features: int, num_classes: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.fc = nn.Linear(features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.flatten(x, 1))
        if torch.isfinite(h).all():
            h = torch.tanh(h)
        return self.fc(h)


def gated(input_shape, num_classes) -> nn.Module:
    channels, height, width = input_shape
    return Gated(channels * height * width, num_classes)
