"""Model descriptions shared by the plain per-client loop and the lockstep engine.

An :class:`Architecture` is a small, frozen, picklable description. It compiles to
a *layer program* (a tuple of ``Op``) that both back ends interpret: ``build_module``
turns it into one ``torch.nn.Sequential`` for the reference loop, and
``wirelessfl.learning.lockstep`` runs the same program on ``n`` stacked models. The
flat parameter layout is the order of ``module.parameters()`` (weight, bias per
layer), so ``parameters_to_vector`` on a module and one row of the engine's
``[n, P]`` tensor are the same vector.

Models:

* ``lenet5`` -- LeNet-5 (LeCun et al. 1998), the model of user-centric-fl.txt §V:
  conv 6@5x5, max-pool 2, conv 16@5x5, max-pool 2, fc 120, fc 84, fc classes, ReLU.
  The classic geometry needs 32x32 inputs; 28x28 inputs get ``padding=2`` on the
  first convolution (the usual MNIST variant, identical to zero-padding to 32x32);
  any other size (e.g. scikit-learn's 8x8 digits) is first resized to 32x32 by
  bilinear interpolation (the *input adapter*). The parameter count therefore does
  not depend on H, W: with one input channel and 10 classes it is the classic
  61,706.
* ``cifar_cnn`` -- the CIFAR CNN of pflego.txt §4: conv 64@5x5 (same padding),
  max-pool 3x3 stride 2 (padding 1, i.e. TensorFlow's SAME), twice, then fc 384,
  fc 192, fc classes, ReLU. On 3x32x32 with 10 classes: 1,756,426 parameters.
* ``mlp`` -- flatten, fully connected hidden layers with ReLU (option ``hidden``,
  default ``(200,)`` = pflego.txt §4's MNIST model), fc classes.

Every model ends with a linear layer; that layer (weight and bias) is the *head*
(FedPer, PFLEGO), the rest is the *body*.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

ARCHITECTURES: dict[str, str] = {
    "lenet5": "LeNet-5 (user-centric-fl): conv6-pool-conv16-pool-fc120-fc84-fc; 28x28 padded, other sizes resized to 32x32",
    "cifar_cnn": "CIFAR CNN (pflego §4): 2x [conv64 5x5 + maxpool 3x3/2], fc384, fc192, fc",
    "mlp": "multilayer perceptron: flatten, hidden ReLU layers (option hidden, default (200,)), fc",
}

_ALLOWED_OPTIONS: dict[str, tuple[str, ...]] = {"lenet5": (), "cifar_cnn": (), "mlp": ("hidden",)}


@dataclass(frozen=True)
class Op:
    """One step of a layer program.

    kind is ``resize`` (args: H, W), ``conv`` (in, out, kernel, padding),
    ``relu`` (), ``maxpool`` (kernel, stride, padding), ``flatten`` () or
    ``linear`` (in, out).
    """

    kind: str
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class ParamSlice:
    """Where one parameter tensor lives in the flat vector of one model."""

    offset: int
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def stop(self) -> int:
        return self.offset + self.numel


def _lenet5(input_shape: tuple[int, int, int], num_classes: int, options: dict) -> tuple[Op, ...]:
    channels, height, width = input_shape
    ops: list[Op] = []
    if (height, width) == (28, 28):
        padding = 2
    else:
        padding = 0
        if (height, width) != (32, 32):
            ops.append(Op("resize", (32, 32)))
    ops += [
        Op("conv", (channels, 6, 5, padding)),
        Op("relu"),
        Op("maxpool", (2, 2, 0)),
        Op("conv", (6, 16, 5, 0)),
        Op("relu"),
        Op("maxpool", (2, 2, 0)),
        Op("flatten"),
        Op("linear", (16 * 5 * 5, 120)),
        Op("relu"),
        Op("linear", (120, 84)),
        Op("relu"),
        Op("linear", (84, num_classes)),
    ]
    return tuple(ops)


def _pool_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _cifar_cnn(input_shape: tuple[int, int, int], num_classes: int, options: dict) -> tuple[Op, ...]:
    channels, height, width = input_shape
    for _ in range(2):
        height, width = _pool_out(height, 3, 2, 1), _pool_out(width, 3, 2, 1)
    return (
        Op("conv", (channels, 64, 5, 2)),
        Op("relu"),
        Op("maxpool", (3, 2, 1)),
        Op("conv", (64, 64, 5, 2)),
        Op("relu"),
        Op("maxpool", (3, 2, 1)),
        Op("flatten"),
        Op("linear", (64 * height * width, 384)),
        Op("relu"),
        Op("linear", (384, 192)),
        Op("relu"),
        Op("linear", (192, num_classes)),
    )


def _mlp(input_shape: tuple[int, int, int], num_classes: int, options: dict) -> tuple[Op, ...]:
    hidden = options.get("hidden", (200,))
    if isinstance(hidden, (int, str)) or not all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in hidden):
        raise ValueError(f"model.options for model 'mlp': hidden must be a sequence of positive ints, got {hidden!r}")
    ops: list[Op] = [Op("flatten")]
    width = math.prod(input_shape)
    for size in hidden:
        ops += [Op("linear", (width, size)), Op("relu")]
        width = size
    ops.append(Op("linear", (width, num_classes)))
    return tuple(ops)


_BUILDERS = {"lenet5": _lenet5, "cifar_cnn": _cifar_cnn, "mlp": _mlp}


@dataclass(frozen=True)
class Architecture:
    """Plain description of one model; see the module docstring for the models."""

    name: str
    input_shape: tuple[int, int, int]
    num_classes: int
    options: tuple = ()

    def __post_init__(self) -> None:
        if self.name not in _BUILDERS:
            raise ValueError(f"model name must be one of {sorted(_BUILDERS)}, got {self.name!r}")
        shape = tuple(self.input_shape)
        if len(shape) != 3 or not all(isinstance(d, numbers.Integral) and d > 0 for d in shape):
            raise ValueError(f"model input_shape must be three positive ints (C, H, W), got {self.input_shape!r}")
        object.__setattr__(self, "input_shape", tuple(int(d) for d in shape))
        if not (isinstance(self.num_classes, numbers.Integral) and self.num_classes >= 2):
            raise ValueError(f"model num_classes must be an int >= 2, got {self.num_classes!r}")
        object.__setattr__(self, "num_classes", int(self.num_classes))
        options = tuple((str(k), _freeze(v)) for k, v in self.options)
        allowed = _ALLOWED_OPTIONS[self.name]
        for key, _ in options:
            if key not in allowed:
                raise ValueError(
                    f"model.options for model {self.name!r}: unknown option {key!r}; allowed: {', '.join(allowed) or 'none'}"
                )
        object.__setattr__(self, "options", tuple(sorted(options)))
        self.ops  # validates the options and the geometry now, not at first use

    @cached_property
    def ops(self) -> tuple[Op, ...]:
        """The layer program both back ends run."""
        return _BUILDERS[self.name](self.input_shape, self.num_classes, dict(self.options))

    @cached_property
    def param_slices(self) -> tuple[ParamSlice, ...]:
        """(offset, shape) of every parameter tensor, in ``module.parameters()`` order."""
        slices: list[ParamSlice] = []
        offset = 0
        for op in self.ops:
            if op.kind == "conv":
                cin, cout, k, _ = op.args
                shapes = [(cout, cin, k, k), (cout,)]
            elif op.kind == "linear":
                fin, fout = op.args
                shapes = [(fout, fin), (fout,)]
            else:
                continue
            for shape in shapes:
                slices.append(ParamSlice(offset, shape))
                offset += math.prod(shape)
        return tuple(slices)

    @property
    def param_count(self) -> int:
        """Parameters of one model (payload size for the network side)."""
        return self.param_slices[-1].stop

    @property
    def head_size(self) -> int:
        """Trailing parameters forming the head: the last linear layer's weight and bias."""
        return self.param_slices[-2].numel + self.param_slices[-1].numel

    def head_mask(self) -> torch.Tensor:
        """Bool ``[P]`` mask, True on the head (pass ``~mask`` to train the body only)."""
        mask = torch.zeros(self.param_count, dtype=torch.bool)
        mask[self.param_count - self.head_size :] = True
        return mask

    def fan_in_bounds(self) -> torch.Tensor:
        """``[P]`` bound b of PyTorch's default init U(-b, b), b = 1/sqrt(fan_in), per coordinate."""
        bounds = torch.empty(self.param_count)
        for weight, bias in zip(self.param_slices[0::2], self.param_slices[1::2]):
            fan_in = math.prod(weight.shape[1:])
            bounds[weight.offset : bias.stop] = 1.0 / math.sqrt(fan_in)
        return bounds

    def init_flat(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, P]`` independent initialisations.

        Same distributions as PyTorch's defaults for Conv2d/Linear (kaiming_uniform
        with a=sqrt(5) for weights, U(±1/sqrt(fan_in)) for biases -- both are
        U(±1/sqrt(fan_in))), drawn from ``generator`` in one call.
        """
        if not (isinstance(n, int) and n >= 0):
            raise ValueError(f"init_flat n must be an int >= 0, got {n!r}")
        uniform = torch.rand((n, self.param_count), generator=generator, device=generator.device)
        return uniform.mul_(2.0).sub_(1.0).mul_(self.fan_in_bounds().to(uniform.device))

    def build_module(self, flat: torch.Tensor | None = None) -> nn.Sequential:
        """One plain model; ``parameters_to_vector(module.parameters())`` uses the engine's layout.

        With ``flat`` ([P]) the parameters are loaded from it; without, the layers
        keep PyTorch's default initialisation (global RNG, as any nn.Module).
        """
        layers: list[nn.Module] = []
        for op in self.ops:
            if op.kind == "resize":
                layers.append(nn.Upsample(size=op.args, mode="bilinear", align_corners=False))
            elif op.kind == "conv":
                cin, cout, k, padding = op.args
                layers.append(nn.Conv2d(cin, cout, k, padding=padding))
            elif op.kind == "relu":
                layers.append(nn.ReLU())
            elif op.kind == "maxpool":
                kernel, stride, padding = op.args
                layers.append(nn.MaxPool2d(kernel, stride, padding))
            elif op.kind == "flatten":
                layers.append(nn.Flatten())
            else:
                layers.append(nn.Linear(*op.args))
        module = nn.Sequential(*layers)
        if flat is not None:
            if tuple(flat.shape) != (self.param_count,):
                raise ValueError(f"build_module flat must have shape ({self.param_count},), got {tuple(flat.shape)}")
            with torch.no_grad():
                torch.nn.utils.vector_to_parameters(flat.detach().to(torch.float32).clone(), module.parameters())
        return module


def _freeze(value):
    """Lists become tuples so that options stay hashable and picklable."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def get_architecture(name: str, input_shape, num_classes: int, **options) -> Architecture:
    """Look up a model by registry name; ValueError names the allowed names and options."""
    if name not in ARCHITECTURES:
        raise ValueError(f"model name must be one of {sorted(ARCHITECTURES)}, got {name!r}")
    return Architecture(name, tuple(input_shape), num_classes, tuple(options.items()))
