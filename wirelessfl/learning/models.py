"""Models: any ``torch.nn.Module`` a factory builds, plus the built-in ones by name.

An :class:`Architecture` is a small, frozen, picklable description: a model name,
the input shape, the number of classes and the factory's options. The name is a
built-in (``lenet5``, ``cifar_cnn``, ``mlp``, ``leaf_cnn``) or an import path
``package.module:factory``; a factory is called as
``factory(input_shape, num_classes, **options)`` and returns an ``nn.Module``
mapping ``[B, C, H, W]`` inputs to ``[B, num_classes]`` logits. The Python API
also takes the factory itself (:meth:`Architecture.of`).

The flat parameter layout is the order of ``module.parameters()``, so
``parameters_to_vector`` on a module and one row of the lockstep engine's
``[n, P]`` tensor are the same vector. Parameters are named by their path
(``features.0.weight``): :meth:`Architecture.mask` turns path prefixes into a
``[P]`` mask, which is how algorithms name their personal parts (FedPer's last
layers, PFLEGO's head). The *head* is the module with parameters that
computes the output (the last linear layer of every built-in; the last module
with parameters when the forward cannot be traced), or the prefix ``head`` names.

Buffers (BatchNorm's running statistics) are refused: the engine keeps
parameters only, and batch statistics would also see the padding of a partial
batch. GroupNorm and LayerNorm normalise each sample and work.

Built-in models:

* ``lenet5`` -- LeNet-5 (LeCun et al. 1998), the model of user-centric-fl.txt §V:
  conv 6@5x5, max-pool 2, conv 16@5x5, max-pool 2, fc 120, fc 84, fc classes, ReLU.
  The classic geometry needs 32x32 inputs; 28x28 inputs get ``padding=2`` on the
  first convolution (the usual MNIST variant, identical to zero-padding to 32x32);
  any other size (e.g. scikit-learn's 8x8 digits) is first resized to 32x32 by
  bilinear interpolation. With one input channel and 10 classes: 61,706 parameters.
* ``cifar_cnn`` -- the CIFAR CNN of pflego.txt §4: conv 64@5x5 (same padding),
  max-pool 3x3 stride 2 (padding 1, i.e. TensorFlow's SAME), twice, then fc 384,
  fc 192, fc classes, ReLU. On 3x32x32 with 10 classes: 1,756,426 parameters.
* ``mlp`` -- flatten, fully connected hidden layers with ReLU (option ``hidden``,
  default ``(200,)`` = pflego.txt §4's MNIST model), fc classes.
* ``leaf_cnn`` -- the LEAF FEMNIST CNN (Caldas et al. 2018) that
  adaptive-expert-models.txt §4.3 starts from: conv ``conv1``@5x5 and conv
  ``conv2``@5x5 (same padding), each with ReLU and 2x2 max-pool, dropout, fc
  ``fc`` with ReLU, dropout, fc classes. Options ``conv1`` (32), ``conv2`` (64),
  ``fc`` (2048) and ``dropout`` (0.5); the paper tunes all four (its table of
  §4.4, e.g. 128/32/1024 for the global models).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import torch
from torch import nn

from wirelessfl.learning.catalog import split_import_path
from wirelessfl.user_code import import_user_module

_ALLOWED_OPTIONS: dict[str, tuple[str, ...]] = {
    "lenet5": (),
    "cifar_cnn": (),
    "mlp": ("hidden",),
    "leaf_cnn": ("conv1", "conv2", "fc", "dropout"),
}

PATH_HELP = "a built-in name or 'package.module:factory'"


@dataclass(frozen=True)
class ParamSlice:
    """Where one parameter tensor (named by its path) lives in the flat vector of one model."""

    offset: int
    shape: tuple[int, ...]
    name: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def stop(self) -> int:
        return self.offset + self.numel


def _positive(name: str, model: str, value, minimum: int = 1) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
        raise ValueError(f"model.options for model {model!r}: {name} must be an int >= {minimum}, got {value!r}")
    return value


def lenet5(input_shape: tuple[int, int, int], num_classes: int) -> nn.Sequential:
    """LeNet-5; see the module docstring for the input adapter."""
    channels, height, width = input_shape
    layers: list[nn.Module] = []
    if (height, width) == (28, 28):
        padding = 2
    else:
        padding = 0
        if (height, width) != (32, 32):
            layers.append(nn.Upsample(size=(32, 32), mode="bilinear", align_corners=False))
    layers += [
        nn.Conv2d(channels, 6, 5, padding=padding), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes),
    ]
    return nn.Sequential(*layers)


def _pool_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def cifar_cnn(input_shape: tuple[int, int, int], num_classes: int) -> nn.Sequential:
    """The CIFAR CNN of pflego §4 (TensorFlow's SAME pooling as padding 1)."""
    channels, height, width = input_shape
    for _ in range(2):
        height, width = _pool_out(height, 3, 2, 1), _pool_out(width, 3, 2, 1)
    return nn.Sequential(
        nn.Conv2d(channels, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(64, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Flatten(),
        nn.Linear(64 * height * width, 384), nn.ReLU(), nn.Linear(384, 192), nn.ReLU(), nn.Linear(192, num_classes),
    )


def mlp(input_shape: tuple[int, int, int], num_classes: int, hidden=(200,)) -> nn.Sequential:
    """Flatten, hidden ReLU layers, a linear head."""
    if isinstance(hidden, (int, str)) or not all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in hidden):
        raise ValueError(f"model.options for model 'mlp': hidden must be a sequence of positive ints, got {hidden!r}")
    layers: list[nn.Module] = [nn.Flatten()]
    width = math.prod(input_shape)
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def leaf_cnn(input_shape: tuple[int, int, int], num_classes: int, conv1=32, conv2=64, fc=2048, dropout=0.5) -> nn.Sequential:
    """The LEAF CNN with dropout before each fully connected layer."""
    channels, height, width = input_shape
    conv1, conv2, fc = (_positive(k, "leaf_cnn", v) for k, v in (("conv1", conv1), ("conv2", conv2), ("fc", fc)))
    if isinstance(dropout, bool) or not (isinstance(dropout, numbers.Real) and 0 <= dropout < 1):
        raise ValueError(f"model.options for model 'leaf_cnn': dropout must be a number in [0, 1), got {dropout!r}")
    for _ in range(2):
        height, width = height // 2, width // 2
    if not (height and width):
        raise ValueError(f"model 'leaf_cnn' needs inputs of at least 4x4 (two 2x2 poolings), got {input_shape[1]}x{input_shape[2]}")
    return nn.Sequential(
        nn.Conv2d(channels, conv1, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(conv1, conv2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Dropout(float(dropout)), nn.Linear(conv2 * height * width, fc), nn.ReLU(),
        nn.Dropout(float(dropout)), nn.Linear(fc, num_classes),
    )


_BUILTINS: dict[str, Callable[..., nn.Module]] = {"lenet5": lenet5, "cifar_cnn": cifar_cnn, "mlp": mlp, "leaf_cnn": leaf_cnn}


class ModelFailed(ValueError):
    """A model's factory or forward raised; the message is one line naming the model."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.split("\n")[0][:300] if text else "(no message)"


def resolve_factory(name: str) -> Callable[..., nn.Module]:
    """The factory a model name stands for; one-line ValueError when it cannot be imported.

    Importing the module runs its code, as any Python import does."""
    if name in _BUILTINS:
        return _BUILTINS[name]
    module_name, attribute = split_import_path(name)
    try:
        target = import_user_module(module_name)
    except Exception as err:  # the user's module may raise anything while importing
        raise ValueError(f"model {name!r}: cannot import module {module_name!r} ({type(err).__name__}: {err})") from None
    except SystemExit as err:
        raise ValueError(f"model {name!r}: importing module {module_name!r} called sys.exit({err.code!r})") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"model {name!r}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"model {name!r}: {attribute!r} is not callable (a factory returning an nn.Module)")
    return target


def import_path(factory: Callable) -> str | None:
    """``module:qualname`` when that path imports back to ``factory`` (so a pickled Architecture finds it)."""
    path = f"{getattr(factory, '__module__', '')}:{getattr(factory, '__qualname__', '')}"
    if "<" in path:
        return None
    try:
        return path if resolve_factory(path) is factory else None
    except ValueError:
        return None


_INIT_KINDS = (nn.Conv2d, nn.Linear)
"""Layers whose default initialisation is U(+-1/sqrt(fan_in)) for every parameter (drawn in one call)."""


PROBE_ON_CPU_BYTES = 64 * 2**20
"""Largest meta-device template run on real CPU storage to check its output shape (see :func:`probe_of`)."""


def probe_of(module: nn.Module) -> nn.Module:
    """A module to run a shape check through: a zero-filled CPU copy of a small meta-device ``module``, else ``module``.

    A forward on the meta device loads torch's meta kernels, which import sympy: 1.7 s of CPU in every process,
    against microseconds for a small model's forward on zeros. Models above ``PROBE_ON_CPU_BYTES`` stay on meta,
    so that describing a model of billions of parameters still allocates nothing.
    """
    parameters = list(module.parameters())
    if not parameters or parameters[0].device.type != "meta":
        return module
    if sum(p.numel() * p.element_size() for p in parameters) > PROBE_ON_CPU_BYTES:
        return module
    probe = copy.deepcopy(module)
    for sub in probe.modules():
        for name, parameter in sub.named_parameters(recurse=False):
            zeros = torch.zeros(parameter.shape, dtype=parameter.dtype, device="cpu")
            setattr(sub, name, nn.Parameter(zeros, requires_grad=parameter.requires_grad))
    return probe


@dataclass(frozen=True)
class Architecture:
    """Plain description of one model; see the module docstring."""

    name: str
    input_shape: tuple[int, int, int]
    num_classes: int
    options: tuple = ()
    head: str | None = None
    factory: Callable | None = field(default=None, compare=False, repr=False)
    """The factory itself when ``name`` does not import (a function defined in a notebook cell)."""

    def __post_init__(self) -> None:
        if self.factory is None:
            resolve_factory(self.name)
        shape = tuple(self.input_shape)
        if len(shape) != 3 or not all(isinstance(d, numbers.Integral) and d > 0 for d in shape):
            raise ValueError(f"model input_shape must be three positive ints (C, H, W), got {self.input_shape!r}")
        object.__setattr__(self, "input_shape", tuple(int(d) for d in shape))
        if not (isinstance(self.num_classes, numbers.Integral) and self.num_classes >= 2):
            raise ValueError(f"model num_classes must be an int >= 2, got {self.num_classes!r}")
        object.__setattr__(self, "num_classes", int(self.num_classes))
        options = tuple((str(k), _freeze(v)) for k, v in self.options)
        allowed = _ALLOWED_OPTIONS.get(self.name)
        for key, _ in options if allowed is not None else ():
            if key not in allowed:
                raise ValueError(
                    f"model.options for model {self.name!r}: unknown option {key!r}; allowed: {', '.join(allowed) or 'none'}"
                )
        object.__setattr__(self, "options", tuple(sorted(options)))
        self.param_slices  # builds the template now: a bad factory or option fails here, not at first use
        if self.head is not None:
            self.head_paths

    @classmethod
    def of(cls, factory: Callable[..., nn.Module], input_shape, num_classes: int, head: str | None = None, **options) -> Architecture:
        """An architecture from a factory function (the Python API's way to bring a model)."""
        if not callable(factory):
            raise ValueError(f"model factory must be callable, got {type(factory).__name__}")
        path = import_path(factory)
        return cls(path or f"{getattr(factory, '__qualname__', 'factory')}", tuple(input_shape), num_classes,
                   tuple(options.items()), head, None if path else factory)

    def __getstate__(self) -> dict:
        keep = ("name", "input_shape", "num_classes", "options", "head", "factory")
        return {key: self.__dict__[key] for key in keep}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ----------------------------------------------------------------- the module

    def _factory(self) -> Callable[..., nn.Module]:
        return self.factory if self.factory is not None else resolve_factory(self.name)

    def new_module(self) -> nn.Module:
        """A fresh module from the factory (PyTorch's default initialisation, global RNG); a factory that raises is
        one line naming the model (``ModelFailed``)."""
        factory = self._factory()
        try:
            module = factory(self.input_shape, self.num_classes, **dict(self.options))
        except ValueError:
            raise
        except TypeError as err:
            raise ValueError(f"model.options for model {self.name!r}: the factory refused them ({err})") from None
        except SystemExit as err:  # not an error the caller would catch: it would end the command with its code
            raise ValueError(
                f"model {self.name!r}: the factory called sys.exit({err.code!r}) instead of returning a torch.nn.Module"
            ) from None
        except Exception as err:  # the user's factory may raise anything
            raise ModelFailed(f"model {self.name!r}: the factory raised {type(err).__name__}: {_first_line(err)}") from None
        if not isinstance(module, nn.Module):
            raise ValueError(f"model {self.name!r}: the factory must return a torch.nn.Module, got {type(module).__name__}")
        return module

    @cached_property
    def template(self) -> nn.Module:
        """One checked module, parameters only, logits ``[B, num_classes]``: shapes and names, no values.

        It is built on the meta device where the factory allows, so that
        describing (and refusing) a model of billions of parameters allocates
        nothing; a factory that needs real tensors gets a CPU module.
        """
        try:
            with torch.device("meta"):
                return self._checked(self.new_module())
        except ModelFailed:
            pass  # perhaps the meta device's doing: once more with real values, where the error stands
        except ValueError:
            raise
        except Exception:  # a factory or forward that computes with real values (data-dependent branches)
            pass
        with torch.random.fork_rng(devices=[]):
            return self._checked(self.new_module())

    def _checked(self, module: nn.Module) -> nn.Module:
        buffers = [name for name, _ in module.named_buffers()]
        if buffers:
            raise ValueError(
                f"model {self.name!r} has buffers ({', '.join(buffers[:3])}{', ...' if len(buffers) > 3 else ''}): "
                "the lockstep engine trains parameters only; use GroupNorm or LayerNorm instead of BatchNorm"
            )
        for path, sub in module.named_modules():
            if isinstance(sub, nn.modules.batchnorm._NormBase):
                raise ValueError(
                    f"model {self.name!r} uses batch statistics ({type(sub).__name__} at {path!r}), which would see the "
                    "padding of partial batches; use GroupNorm or LayerNorm"
                )
        if not any(True for _ in module.parameters()):
            raise ValueError(f"model {self.name!r} has no parameters")
        module.train()
        probe = probe_of(module)
        device = next(probe.parameters()).device
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]), torch.device(device):
                out = probe(torch.zeros(2, *self.input_shape, device=device))
        except Exception as err:  # the user's forward may raise anything
            shape = ", ".join(map(str, self.input_shape))
            raise ModelFailed(
                f"model {self.name!r}: its forward raised {type(err).__name__} on a [2, {shape}] batch of zeros: {_first_line(err)}"
            ) from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, self.num_classes):
            got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"model {self.name!r} must map [B, {', '.join(map(str, self.input_shape))}] inputs to [B, {self.num_classes}] logits, got {got} for B = 2")
        return module

    @cached_property
    def param_slices(self) -> tuple[ParamSlice, ...]:
        """(offset, shape, name) of every parameter tensor, in ``module.parameters()`` order."""
        slices, offset = [], 0
        for name, parameter in self.template.named_parameters():
            slices.append(ParamSlice(offset, tuple(parameter.shape), name))
            offset += parameter.numel()
        return tuple(slices)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(sl.name for sl in self.param_slices)

    @property
    def param_count(self) -> int:
        """Parameters of one model (payload size for the network side)."""
        return self.param_slices[-1].stop

    @cached_property
    def layers(self) -> tuple[str, ...]:
        """Paths of the modules that own parameters, in layout order (FedPer counts personal layers here)."""
        paths: list[str] = []
        for name in self.param_names:
            owner = name.rpartition(".")[0]
            if owner not in paths:
                paths.append(owner)
        return tuple(paths)

    @cached_property
    def head_paths(self) -> tuple[str, ...]:
        """Parameter names of the head: those under ``head``; by default the module that computes the output, else the last layer."""
        prefix = self.head if self.head is not None else self._output_layer() or self.layers[-1]
        names = self.names_under([prefix])
        if not names:
            raise ValueError(f"model head {prefix!r} names no parameters; the model's layers are {', '.join(self.layers)}")
        return names

    def _output_layer(self) -> str | None:
        """The module whose call returns the logits, when ``torch.fx`` can trace the model and it owns parameters."""
        import torch.fx

        try:
            graph = torch.fx.symbolic_trace(self.template).graph
        except Exception:  # an untraceable forward: fall back to the layout order
            return None
        output = next(node for node in graph.nodes if node.op == "output").args[0]
        if isinstance(output, torch.fx.Node) and output.op == "call_module" and output.target in self.layers:
            return output.target
        return None

    def names_under(self, prefixes) -> tuple[str, ...]:
        """Parameter names equal to a prefix or below it (``fc`` covers ``fc.weight`` and ``fc.bias``)."""
        out = []
        for name in self.param_names:
            if any(p == "" or name == p or name.startswith(p + ".") for p in prefixes):
                out.append(name)
        return tuple(out)

    def mask(self, names) -> torch.Tensor:
        """Bool ``[P]`` mask, True on the parameters named (by full name or module path prefix)."""
        chosen = set(self.names_under(names))
        mask = torch.zeros(self.param_count, dtype=torch.bool)
        for sl in self.param_slices:
            if sl.name in chosen:
                mask[sl.offset : sl.stop] = True
        return mask

    @property
    def head_size(self) -> int:
        """Parameters of the head."""
        return int(self.head_mask().sum())

    def head_mask(self) -> torch.Tensor:
        """Bool ``[P]`` mask, True on the head (pass ``~mask`` to train the body only)."""
        return self.mask(self.head_paths)

    def split(self, personal) -> Split:
        """Rows cut into shared and personal coordinates; ``personal`` names parameters by path prefix."""
        return Split(self.mask(personal))

    # ----------------------------------------------------------------- initialisation

    @cached_property
    def _uniform_init(self) -> torch.Tensor | None:
        """``[P]`` bound b of U(-b, b) per coordinate when every layer is a Conv2d/Linear (their default init), else None."""
        bounds = torch.empty(self.param_count)
        owners = dict(self.template.named_modules())
        for weight, bias in zip(self.param_slices[0::2], self.param_slices[1::2]):
            owner = owners.get(weight.name.rpartition(".")[0])
            if not (isinstance(owner, _INIT_KINDS) and weight.name.endswith(".weight") and bias.name.endswith(".bias")
                    and weight.name.rpartition(".")[0] == bias.name.rpartition(".")[0]):
                return None
            bounds[weight.offset : bias.stop] = 1.0 / math.sqrt(math.prod(weight.shape[1:]))
        return bounds if len(self.param_slices) % 2 == 0 else None

    def fan_in_bounds(self) -> torch.Tensor:
        """``[P]`` bound b of PyTorch's default init U(-b, b), b = 1/sqrt(fan_in) (models of Conv2d/Linear layers)."""
        if self._uniform_init is None:
            raise ValueError(f"model {self.name!r} has layers other than Conv2d/Linear with biases; it has no single fan-in bound")
        return self._uniform_init

    def init_flat(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, P]`` independent initialisations drawn from ``generator``.

        Models made of Conv2d/Linear layers draw U(+-1/sqrt(fan_in)) for all rows
        in one call (PyTorch's defaults for these layers: kaiming_uniform with
        a=sqrt(5) for weights, the same bound for biases). Any other model gets
        its factory's own initialisation, one module per row under a seed drawn
        from ``generator``.
        """
        if not (isinstance(n, int) and n >= 0):
            raise ValueError(f"init_flat n must be an int >= 0, got {n!r}")
        if self._uniform_init is not None:
            uniform = torch.rand((n, self.param_count), generator=generator, device=generator.device)
            return uniform.mul_(2.0).sub_(1.0).mul_(self._uniform_init.to(uniform.device))
        seeds = torch.randint(0, 2**62, (n,), generator=generator, device=generator.device).tolist()
        rows = []
        for seed in seeds:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                module = self.new_module()
            rows.append(torch.nn.utils.parameters_to_vector(module.parameters()).detach().float())
        out = torch.stack(rows) if rows else torch.empty((0, self.param_count))
        return out.to(generator.device)

    def build_module(self, flat: torch.Tensor | None = None) -> nn.Module:
        """One plain model; ``parameters_to_vector(module.parameters())`` uses the engine's layout.

        With ``flat`` ([P]) the parameters are loaded from it; without, the module
        keeps its factory's initialisation (global RNG, as any nn.Module).
        """
        module = self.new_module()
        if flat is not None:
            if tuple(flat.shape) != (self.param_count,):
                raise ValueError(f"build_module flat must have shape ({self.param_count},), got {tuple(flat.shape)}")
            with torch.no_grad():
                torch.nn.utils.vector_to_parameters(flat.detach().to(torch.float32).clone(), module.parameters())
        return module


class Split:
    """The shared and the personal coordinates of flat rows (FedPer's base and personal layers, PFLEGO's body and head).

    Personal parameters are named by path, so they need not be the last ones:
    when they are (every built-in model's head), rows are cut by slicing, the
    same values as before; otherwise by index.
    """

    def __init__(self, personal_mask: torch.Tensor):
        self.mask = personal_mask.cpu()
        self.personal_size = int(self.mask.sum())
        self.shared_size = len(self.mask) - self.personal_size
        self.trailing = bool(self.mask[self.shared_size :].all())
        self._shared = torch.nonzero(~self.mask).flatten()
        self._personal = torch.nonzero(self.mask).flatten()

    @property
    def shared_fraction(self) -> float:
        return self.shared_size / len(self.mask)

    def shared(self, rows: torch.Tensor) -> torch.Tensor:
        if self.trailing:
            return rows[..., : self.shared_size]
        return rows.index_select(-1, self._shared.to(rows.device))

    def personal(self, rows: torch.Tensor) -> torch.Tensor:
        if self.trailing:
            return rows[..., self.shared_size :]
        return rows.index_select(-1, self._personal.to(rows.device))

    def join(self, shared: torch.Tensor, personal: torch.Tensor) -> torch.Tensor:
        """Full rows from their shared and personal parts (broadcast over leading dimensions)."""
        if self.trailing:
            return torch.cat([shared, personal], dim=-1)
        lead = torch.broadcast_shapes(shared.shape[:-1], personal.shape[:-1])
        out = torch.empty((*lead, len(self.mask)), dtype=shared.dtype, device=shared.device)
        out[..., self._shared.to(out.device)] = shared
        out[..., self._personal.to(out.device)] = personal
        return out


def _freeze(value):
    """Lists become tuples so that options stay hashable and picklable."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def get_architecture(name, input_shape, num_classes: int, head: str | None = None, **options) -> Architecture:
    """A model by built-in name, import path ``package.module:factory`` or factory function."""
    if callable(name):
        return Architecture.of(name, input_shape, num_classes, head, **options)
    return Architecture(name, tuple(input_shape), num_classes, tuple(options.items()), head)
