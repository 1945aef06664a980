"""Run n copies of any ``nn.Module`` as one stacked model; autograd does every backward pass.

The module is traced once with ``torch.fx`` (train and eval mode) and its graph is
interpreted on *stacked* values, each standing for n per-slot tensors:

* images (``[B, C, H, W]`` per slot) are one ``[B, n*C, H, W]`` tensor in
  channels_last memory, so a convolution is one grouped convolution
  (``groups=n``) and pooling, interpolation, GroupNorm and element-wise ops
  apply to it as they are (they act per channel);
* everything else is ``[n, *per-slot shape]`` ("rows"): a linear layer is one
  batched matmul, LayerNorm one call plus a per-slot affine;
* dropout draws each slot's mask from that slot's own generator with the same
  call a module makes (``bernoulli_`` on the per-slot shape, then ``/ (1 - p)``),
  so slot s sees the masks a plain module would under ``torch.manual_seed`` of
  its seed: results do not depend on the grouping or thread count, and equal the
  per-client loop (``reference.ReferenceLoop``);
* any other node (a module or function this table does not know) runs under
  ``torch.func.vmap`` on rows, with ``functional_call`` for a module's own
  parameters; a model ``torch.fx`` cannot trace runs entirely that way;
* an accelerator plug-in (:mod:`wirelessfl.learning.accelerators`) may claim a
  block of nodes and run it with its own kernels.

Parameters come in as ``[n, *shape]`` tensors by name, usually views of the
engine's flat ``[n, P]`` rows; gradients are whatever autograd computes for them.
"""

from __future__ import annotations

import contextlib
import copy
import operator
import threading
from collections.abc import Callable, Sequence

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from wirelessfl.learning.accelerators import Claim, claims
from wirelessfl.learning.models import Architecture


class Stacked:
    """n per-slot tensors as one: ``[B, n*C, H, W]`` when ``image``, else ``[n, *per-slot shape]``."""

    __slots__ = ("tensor", "image", "n")

    def __init__(self, tensor: torch.Tensor, n: int, image: bool = False):
        self.tensor, self.n, self.image = tensor, n, image

    @property
    def shape(self) -> torch.Size:
        """The per-slot shape."""
        if self.image:
            batch, nc, height, width = self.tensor.shape
            return torch.Size((batch, nc // self.n, height, width))
        return self.tensor.shape[1:]

    def rows(self) -> torch.Tensor:
        """``[n, *per-slot shape]`` (a view of an image tensor)."""
        if self.image:
            return self.tensor.unflatten(1, (self.n, -1)).transpose(0, 1)
        return self.tensor

    def as_image(self) -> torch.Tensor:
        """``[B, n*C, H, W]`` channels_last (one copy from rows, whose gradient comes back as contiguous rows)."""
        if self.image:
            return self.tensor
        return _RowsToImages.apply(self.tensor)

    def contiguous_rows(self) -> torch.Tensor:
        """``[n, *per-slot shape]`` contiguous (one copy from an image, whose gradient comes back channels_last)."""
        if self.image:
            return _ImagesToRows.apply(self.tensor, self.n)
        return self.tensor


def images(tensor: torch.Tensor, n: int) -> Stacked:
    return Stacked(tensor, n, image=True)


def _rows_to_images(rows: torch.Tensor) -> torch.Tensor:
    n, batch, channels, height, width = rows.shape
    nhwc = rows.permute(1, 3, 4, 0, 2).contiguous()
    return nhwc.view(batch, height, width, n * channels).permute(0, 3, 1, 2)


def _images_to_rows(tensor: torch.Tensor, n: int) -> torch.Tensor:
    return tensor.unflatten(1, (n, -1)).transpose(0, 1).contiguous()


class _RowsToImages(torch.autograd.Function):
    """Rows ``[n, B, C, H, W]`` to channels_last images, the gradient back to contiguous rows.

    Autograd's backward of a transposing copy is the inverse transpose as a view,
    so the op below would get its gradient in the other layout, and element-wise
    backward passes (ReLU, max-pool) on mixed layouts run several times slower
    (a ReLU's 1.5 ms instead of 0.2 in a 55 ms step): the gradient is copied
    into its op's layout instead.
    """

    @staticmethod
    def forward(ctx, rows):
        ctx.n = rows.shape[0]
        return _rows_to_images(rows)

    @staticmethod
    def backward(ctx, grad):
        return _images_to_rows(grad, ctx.n)


class _ImagesToRows(torch.autograd.Function):
    """Channels_last images to contiguous rows, the gradient back to channels_last (see :class:`_RowsToImages`)."""

    @staticmethod
    def forward(ctx, tensor, n):
        return _images_to_rows(tensor, n)

    @staticmethod
    def backward(ctx, grad):
        return _rows_to_images(grad), None


# --------------------------------------------------------------------------- the tables of known ops

_POINTWISE_MODULES = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Hardtanh,
    nn.Mish, nn.Identity, nn.Hardswish, nn.Hardsigmoid, nn.SELU, nn.CELU,
)
_POINTWISE_FUNCTIONS = {
    F.relu, torch.relu, torch.relu_, F.relu_, F.relu6, F.leaky_relu, F.elu, F.gelu, F.silu, torch.tanh, torch.sigmoid,
    F.softplus, F.hardtanh, F.mish, F.hardswish, F.hardsigmoid, F.selu, F.celu, torch.exp, torch.abs, torch.square,
}
_POINTWISE_METHODS = {"relu", "relu_", "tanh", "sigmoid", "exp", "abs", "square", "contiguous"}
_CHANNEL_MODULES = (
    nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.Upsample, nn.LPPool2d, nn.ZeroPad2d,
)
_CHANNEL_FUNCTIONS = {F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d, F.adaptive_max_pool2d, F.interpolate, torch.max_pool2d}
_BINARY = {operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul, torch.div, operator.iadd}
_RESHAPE_METHODS = {"view", "reshape"}


def _per_slot(args, kwargs, n: int) -> tuple[list[int], Callable, list[torch.Tensor]]:
    """Where the stacked values are among ``args``/``kwargs``, a rebuild function and their rows."""
    leaves, spec = tree_flatten((args, kwargs), is_leaf=lambda v: isinstance(v, Stacked))
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Stacked)]

    def rebuild(tensors):
        filled = list(leaves)
        for i, t in zip(where, tensors):
            filled[i] = t
        return tree_unflatten(filled, spec)

    return where, rebuild, [leaves[i].rows() for i in where]


def _wrap(value, n: int):
    """vmap's outputs (tensors with the slot dimension first) as stacked values."""
    if isinstance(value, torch.Tensor):
        return Stacked(value, n)
    if isinstance(value, (tuple, list)):
        return type(value)(_wrap(v, n) for v in value)
    return value


_RNG_LOCK = threading.Lock()


def _pointwise_strided(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` is a strided 1x1 convolution without padding (a ResNet shortcut), run here as subsample + 1x1.

    Both give the same values: a 1x1 kernel at stride s reads every s-th pixel.
    The engine runs each slot group with one intra-op thread, and there
    torch 2.14.1's oneDNN 3.12 corrupts the heap in the weight gradient of a
    strided 1x1 channels_last convolution with fewer than 8 input channels on
    an AVX2 CPU (``munmap_chunk(): invalid pointer``, then an abort or a segfault;
    measured on the 2-core AMD EPYC), a known oneDNN defect: its 1x1 backward
    writes past the workspace that holds the subsampled source when the input
    channels are fewer than a SIMD block (uxlfoundation/oneDNN#6035; with more
    threads it hangs or returns wrong weight gradients). Its stride-1 kernel is not affected.
    """
    unpadded = conv.padding == "valid" or tuple(conv.padding) == (0, 0)
    return tuple(conv.kernel_size) == (1, 1) and unpadded and tuple(conv.stride) != (1, 1)


class StackedModel:
    """An architecture's graph run on n stacked models (see the module docstring)."""

    def __init__(self, arch: Architecture, accelerators: Sequence = (), device: torch.device | str = "cpu"):
        self.arch = arch
        self.device = torch.device(device)
        self.module = arch.build_module()
        self.module.requires_grad_(False)
        self.slices = {sl.name: sl for sl in arch.param_slices}
        self._looped: set[int] = set()
        self._threads = threading.local()  # code of the functions vmap could not run (data-dependent control flow)
        self.graphs: dict[bool, torch.fx.GraphModule | None] = {}
        for training in (True, False):
            self.module.train(training)
            try:
                self.graphs[training] = _bias_after_pool(_pool_before_relu(torch.fx.symbolic_trace(self.module)))
            except Exception:  # data-dependent control flow and the like: the whole model runs under vmap
                self.graphs[training] = None
        self.modules = dict(self.module.named_modules())
        self.claims: dict[bool, dict[torch.fx.Node, Claim]] = {True: {}, False: {}}
        for training, traced in self.graphs.items():
            if traced is not None:
                for claim in claims(accelerators, traced, self.modules, arch.input_shape, self.device):
                    self.claims[training].update({node: claim for node in claim.nodes})
        self.accelerated = sorted({claim.status for found in self.claims.values() for claim in found.values()})
        """What the accelerator plug-ins run (empty: everything on the general path)."""
        graph = self.graphs[True]
        self.traced = graph is not None
        self.stochastic = (not self.traced and any(isinstance(m, nn.modules.dropout._DropoutNd) for m in self.modules.values())) or (
            self.traced and any(self._is_dropout(node) or self._is_fallback(node) for node in graph.graph.nodes)
        )
        """Whether a training step draws random numbers (dropout): then each slot gets a generator."""
        self.image_input = self.traced and any(self._takes_images(user) for user in self._input_node().users)
        """Whether the input enters as images (a convolution or pooling reads it first) rather than rows."""
        self._readers = {
            training: {node: _reader(node) for node in traced.graph.nodes} for training, traced in self.graphs.items() if traced is not None
        }
        names = list(self.slices)
        self._own_names = {path: _own_names(path, names) for path in self.modules}

    # ----------------------------------------------------------------- what the graph holds

    def _is_dropout(self, node: torch.fx.Node) -> bool:
        if node.op == "call_module":
            return type(self.modules[node.target]) is nn.Dropout
        return node.op == "call_function" and node.target is F.dropout

    def _is_fallback(self, node: torch.fx.Node) -> bool:
        """Nodes that run under vmap (their randomness, if any, is vmap's, not the per-slot generators')."""
        if node.op == "call_module":
            sub = self.modules[node.target]
            known = (nn.Conv2d, nn.Linear, nn.Dropout, nn.Flatten, nn.GroupNorm, nn.LayerNorm, *_POINTWISE_MODULES, *_CHANNEL_MODULES)
            return not isinstance(sub, known) and any(True for _ in sub.parameters())
        return False

    def _input_node(self) -> torch.fx.Node:
        return next(node for node in self.graphs[True].graph.nodes if node.op == "placeholder")

    def _takes_images(self, node: torch.fx.Node) -> bool:
        if node.op == "call_module":
            return isinstance(self.modules[node.target], (nn.Conv2d, nn.GroupNorm, *_CHANNEL_MODULES))
        return node.op == "call_function" and node.target in _CHANNEL_FUNCTIONS

    def head_input_node(self) -> torch.fx.Node | None:
        """The node whose value feeds the head when the output is ``head(features)`` with a Linear head, else None."""
        graph = self.graphs[False]
        if graph is None:
            return None
        output = next(node for node in graph.graph.nodes if node.op == "output")
        last = output.args[0]
        if not (isinstance(last, torch.fx.Node) and last.op == "call_module"):
            return None
        sub = self.modules[last.target]
        own = {f"{last.target}.weight", f"{last.target}.bias"}
        if not isinstance(sub, nn.Linear) or sub.bias is None or set(self.arch.head_paths) != own:
            return None
        return last

    # ----------------------------------------------------------------- running it

    def views(self, flat: torch.Tensor, requires_grad: Sequence[bool] | None = None) -> dict[str, torch.Tensor]:
        """``[n, *shape]`` views of the flat rows by name; with ``requires_grad`` detached leaves (autograd's inputs)."""
        n = flat.shape[0]
        out = {}
        for k, (name, sl) in enumerate(self.slices.items()):
            view = flat[:, sl.offset : sl.stop].view(n, *sl.shape)
            if requires_grad is not None:
                view = view.detach().requires_grad_(requires_grad[k])
            out[name] = view
        return out

    def forward(
        self,
        params: dict[str, torch.Tensor],
        x: Stacked,
        training: bool,
        generators: Sequence[tuple[torch.Generator, int]] | None = None,
        stop: torch.fx.Node | None = None,
    ) -> torch.Tensor:
        """Logits ``[n, B, classes]`` of every slot on its batch (``stop``: that node's value instead, as rows).

        ``generators`` gives each slot its generator and number of real samples
        (the rest of its batch is padding) when training draws random numbers.
        """
        n = x.n
        if self.module.training != training:
            self.module.train(training)
        graph = self.graphs[training]
        if graph is None:
            return self._vmapped(params, x, training, generators)
        env: dict[torch.fx.Node, object] = {}
        claimed = self.claims[training]
        readers = self._readers[training]
        for node in graph.graph.nodes:
            claim = claimed.get(node)
            if claim is not None:
                if node is claim.nodes[-1]:
                    env[node] = claim.run(params, env[claim.source])
                continue
            if node.op == "placeholder":
                value = x if not env else (node.args[0] if node.args else None)
            elif node.op == "get_attr":
                value = self._attribute(node.target, params, n)
            elif node.op == "output":
                out = env[node.args[0]]
                return out.rows() if isinstance(out, Stacked) else out
            else:
                args, kwargs, stacked = readers[node](env)
                value = self._run(node, args, kwargs, stacked, params, n, training, generators)
            env[node] = value
            if node is stop:
                return value.rows()
        raise RuntimeError("the traced graph has no output")

    def _local_module(self, training: bool) -> nn.Module:
        """This thread's copy of the module, for ``functional_call``.

        ``functional_call`` swaps the given tensors into the module's attributes
        while it runs, so two worker threads calling it on one module would each
        compute with the other's parameters.
        """
        module = getattr(self._threads, "module", None)
        if module is None:
            module = self._threads.module = copy.deepcopy(self.module)
        return module.train(training)

    def _attribute(self, target: str, params, n: int):
        if target in params:
            return Stacked(params[target], n)
        value = self.module
        for part in target.split("."):
            value = getattr(value, part)
        return value

    def _params_of(self, path: str, params) -> dict[str, torch.Tensor]:
        return {short: params[name] for short, name in self._own_names[path] if name in params}

    def _run(self, node, args, kwargs, stacked, params, n, training, generators):
        value = self._evaluate(node, args, kwargs, stacked, params, n, training, generators)
        owner = node.meta.get("bias_of")
        if owner is not None:  # the bias of the conv before this max-pool, added after it (see _bias_after_pool)
            value = images(value.tensor + params[f"{owner}.bias"].reshape(1, -1, 1, 1), n)
        return value

    def _evaluate(self, node, args, kwargs, stacked: bool, params, n, training, generators):
        if node.op == "call_module":
            sub = self.modules[node.target]
            own = self._params_of(node.target, params)
            if not stacked and not own:
                return sub(*args, **kwargs)
            if node.meta.get("bias_after_pool"):
                own = {name: value for name, value in own.items() if name != "bias"}
            fast = self._module(sub, own, args, kwargs, n, training, generators)
            if fast is not NotImplemented:
                return fast
            local = self._local_module(training).get_submodule(node.target)
            return self._fallback(lambda p, *a, **k: functional_call(local, p, a, k), args, kwargs, n, own, generators, training)
        if not stacked:
            target = node.target if node.op == "call_function" else getattr(args[0], node.target)
            return target(*args, **kwargs) if node.op == "call_function" else target(*args[1:], **kwargs)
        if node.op == "call_function":
            fast = self._function(node.target, args, kwargs, n, training, generators)
            if fast is not NotImplemented:
                return fast
            target = node.target
            return self._fallback(lambda p, *a, **k: target(*a, **k), args, kwargs, n, {}, generators, training)
        fast = self._method(node.target, args, kwargs, n)
        if fast is not NotImplemented:
            return fast
        method = node.target
        return self._fallback(lambda p, obj, *a, **k: getattr(obj, method)(*a, **k), args, kwargs, n, {}, generators, training)

    # ----------------------------------------------------------------- fast paths

    def _module(self, sub, own, args, kwargs, n, training, generators):
        x = args[0] if args else None
        if not isinstance(x, Stacked) or len(args) != 1 or kwargs:
            return NotImplemented
        if isinstance(sub, nn.Conv2d) and sub.padding_mode == "zeros" and len(x.shape) == 4:
            return self._conv(sub, own, x, n)
        if isinstance(sub, nn.Linear):
            return Stacked(_linear(x.rows(), own["weight"], own.get("bias")), n)
        if isinstance(sub, _POINTWISE_MODULES):
            return Stacked(sub(x.tensor), n, x.image)
        if isinstance(sub, _CHANNEL_MODULES) and len(x.shape) == 4 and not getattr(sub, "return_indices", False):
            return images(sub(x.as_image()), n)
        if type(sub) is nn.Dropout:
            return self._dropout(x, sub.p, training, generators)
        if isinstance(sub, nn.Flatten):
            return _flatten(x, sub.start_dim, sub.end_dim)
        if isinstance(sub, nn.GroupNorm) and len(x.shape) == 4:
            weight, bias = own.get("weight"), own.get("bias")
            return images(F.group_norm(x.as_image(), n * sub.num_groups, None if weight is None else weight.reshape(-1),
                                       None if bias is None else bias.reshape(-1), sub.eps), n)
        if isinstance(sub, nn.LayerNorm):
            rows = x.rows()
            out = F.layer_norm(rows, sub.normalized_shape, None, None, sub.eps)
            shape = (n,) + (1,) * (rows.dim() - 1 - len(sub.normalized_shape)) + tuple(sub.normalized_shape)
            if "weight" in own:
                out = torch.addcmul(own["bias"].view(shape), out, own["weight"].view(shape)) if "bias" in own else out * own["weight"].view(shape)
            return Stacked(out, n)
        return NotImplemented

    def _conv(self, sub: nn.Conv2d, own, x: Stacked, n: int) -> Stacked:
        weight = own["weight"].reshape(n * sub.out_channels, *sub.weight.shape[1:])
        bias = own["bias"].reshape(-1) if "bias" in own else None
        image, stride = x.as_image(), sub.stride
        if _pointwise_strided(sub):
            image, stride = image[:, :, :: stride[0], :: stride[1]], 1
        return images(F.conv2d(image, weight, bias, stride, sub.padding, sub.dilation, n * sub.groups), n)

    def _dropout(self, x: Stacked, p: float, training: bool, generators) -> Stacked:
        """Each slot's mask drawn for its real samples only (a module sees no padding), zero on the padding."""
        if not training or p == 0:
            return x
        if generators is None or len(generators) != x.n:
            raise ValueError("a training step through dropout needs one (generator, real samples) pair per slot")
        shape = x.shape
        masks = torch.zeros((x.n, *shape), device=x.tensor.device)
        for mask, (generator, real) in zip(masks, generators):
            mask[:real].bernoulli_(1 - p, generator=generator).div_(1 - p)
        if x.image:
            return images(x.tensor * Stacked(masks, x.n).as_image(), x.n)
        return Stacked(x.tensor * masks, x.n)

    def _function(self, target, args, kwargs, n, training, generators):
        x = args[0] if args else None
        if target in _POINTWISE_FUNCTIONS and isinstance(x, Stacked) and not any(isinstance(a, Stacked) for a in args[1:]):
            return Stacked(target(x.tensor, *args[1:], **kwargs), n, x.image)
        if target in _CHANNEL_FUNCTIONS and isinstance(x, Stacked) and len(x.shape) == 4 and not kwargs.get("return_indices"):
            return images(target(x.as_image(), *args[1:], **kwargs), n)
        if target is F.dropout and isinstance(x, Stacked):
            p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
            train = kwargs.get("training", args[2] if len(args) > 2 else True)
            return self._dropout(x, p, training and train, generators)
        if target is torch.flatten and isinstance(x, Stacked):
            start = kwargs.get("start_dim", args[1] if len(args) > 1 else 0)
            end = kwargs.get("end_dim", args[2] if len(args) > 2 else -1)
            return _flatten(x, start, end)
        if target in _BINARY and len(args) == 2 and not kwargs:
            return _binary(target, args[0], args[1], n)
        if target is getattr and isinstance(x, Stacked) and args[1] == "shape":
            return x.shape
        return NotImplemented

    def _method(self, name, args, kwargs, n):
        x = args[0]
        if not isinstance(x, Stacked) or any(isinstance(a, Stacked) for a in args[1:]):
            return NotImplemented
        if name == "size":
            return x.shape if len(args) == 1 and not kwargs else x.shape[kwargs.get("dim", args[1] if len(args) > 1 else None)]
        if name == "dim":
            return len(x.shape)
        if name in _POINTWISE_METHODS and not kwargs:
            return Stacked(getattr(x.tensor, name)(*args[1:]), n, x.image)
        if name in _RESHAPE_METHODS:
            shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
            return Stacked(x.contiguous_rows().reshape(n, *shape), n)
        if name == "flatten":
            start = kwargs.get("start_dim", args[1] if len(args) > 1 else 0)
            end = kwargs.get("end_dim", args[2] if len(args) > 2 else -1)
            return _flatten(x, start, end)
        return NotImplemented

    # ----------------------------------------------------------------- vmap for everything else

    def _fallback(self, fn, args, kwargs, n, own, generators, training):
        """``fn(own_params, *args, **kwargs)`` per slot (vmap, else a loop); stacked arguments enter as rows."""
        _, rebuild, tensors = _per_slot(args, kwargs, n)
        names, count = list(own), len(tensors)

        def per_slot(*values):
            a, k = rebuild(values[:count])
            return fn(dict(zip(names, values[count:])), *a, **k)

        return _wrap(self._per_slot(per_slot, generators, training, *tensors, *[own[name] for name in names]), n)

    def _vmapped(self, params, x: Stacked, training, generators) -> torch.Tensor:
        """The whole model per slot: what runs a model ``torch.fx`` cannot trace."""
        names, module = list(params), self._local_module(training)

        def one(xs, *values):
            return functional_call(module, dict(zip(names, values)), (xs,))

        return self._per_slot(one, generators, training, x.rows(), *params.values())

    def _per_slot(self, fn, generators, training, *inputs):
        """``fn`` on every slot's slice of ``inputs`` (first dimension), outputs stacked.

        One vmap call where vmap can run ``fn``; a forward whose control flow
        depends on the data cannot, and runs slot by slot. Random draws come from
        the global generator, seeded from the slots' own generators under a lock,
        so a run stays reproducible from its seed (but its masks are not the ones
        the per-client loop draws, unlike dropout the graph shows).
        """
        key = id(fn.__code__)
        with contextlib.ExitStack() as stack:
            if training and generators:
                stack.enter_context(_RNG_LOCK)
                stack.enter_context(torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []))
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generators[0][0])))
            if key not in self._looped:
                try:
                    return vmap(fn, randomness="different")(*inputs)
                except RuntimeError as err:
                    if "vmap" not in str(err):
                        raise
                    self._looped.add(key)
            outs = [fn(*(t[s] for t in inputs)) for s in range(inputs[0].shape[0])]
            if isinstance(outs[0], torch.Tensor):
                return torch.stack(outs)
            return type(outs[0])(torch.stack(parts) for parts in zip(*outs))


def _reader(node: torch.fx.Node) -> Callable[[dict], tuple[tuple, dict, bool]]:
    """``env -> (args, kwargs, whether any is stacked)`` for a node: a flat comprehension when its arguments are flat.

    ``torch.fx.node.map_arg`` and a pytree flatten per node were a third of a
    small step's Python time; almost every node's arguments are flat (values
    and constants, no nested lists), so they are read in one pass.
    """
    def leaf(value) -> bool:
        return not isinstance(value, (tuple, list, dict, slice))

    if all(leaf(a) for a in node.args) and all(leaf(v) for v in node.kwargs.values()):
        args_spec = [(a, isinstance(a, torch.fx.Node)) for a in node.args]
        kwargs_spec = [(k, v, isinstance(v, torch.fx.Node)) for k, v in node.kwargs.items()]

        def flat(env):
            args = tuple(env[a] if is_node else a for a, is_node in args_spec)
            kwargs = {k: env[v] if is_node else v for k, v, is_node in kwargs_spec}
            stacked = any(isinstance(a, Stacked) for a in args) or any(isinstance(v, Stacked) for v in kwargs.values())
            return args, kwargs, stacked

        return flat

    def nested(env):
        args = torch.fx.node.map_arg(node.args, env.__getitem__)
        kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
        leaves = tree_flatten((args, kwargs), is_leaf=lambda v: isinstance(v, Stacked))[0]
        return args, kwargs, any(isinstance(a, Stacked) for a in leaves)

    return nested


def _own_names(path: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """(name inside the module at ``path``, full name) of the parameters that module holds."""
    prefix = f"{path}." if path else ""
    return [(name[len(prefix):], name) for name in names if name.startswith(prefix)]


_RELUS = (F.relu, torch.relu)


def _pool_before_relu(traced: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrite ``relu -> max-pool`` as ``max-pool -> relu``: the same numbers, a 4x smaller ReLU and its backward.

    ReLU is monotone, so max(relu(v)) = relu(max(v)); the gradient reaches the
    same arg-max position and is zeroed under the same condition (value <= 0).
    Only a ReLU whose one user is the pool is moved.
    """
    modules = dict(traced.named_modules())

    def is_relu(node):
        if node.op == "call_module":
            return type(modules[node.target]) is nn.ReLU
        return node.op == "call_function" and node.target in _RELUS and len(node.args) == 1 and not node.kwargs.get("inplace")

    def is_max_pool(node):
        if node.op == "call_module":
            sub = modules[node.target]
            return type(sub) is nn.MaxPool2d and not sub.return_indices
        return node.op == "call_function" and node.target is F.max_pool2d and not node.kwargs.get("return_indices")

    for relu in list(traced.graph.nodes):
        users = list(relu.users)
        if not (is_relu(relu) and len(users) == 1 and is_max_pool(users[0]) and users[0].args and users[0].args[0] is relu):
            continue
        pool = users[0]
        pool.args = (relu.args[0], *pool.args[1:])
        with traced.graph.inserting_after(pool):
            moved = traced.graph.call_function(F.relu, (pool,))
        pool.replace_all_uses_with(moved, delete_user_cb=lambda user: user is not moved)
        traced.graph.erase_node(relu)
    traced.graph.lint()
    traced.recompile()
    return traced


def _bias_after_pool(traced: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Mark ``conv -> max-pool`` pairs so the conv's bias is added after the pool: max(v + b) = max(v) + b.

    The bias gradient is then the sum of the pooled gradient (a quarter of the
    values for a 2x2 pool) instead of oneDNN summing the full-resolution one in
    the convolution's backward. The values agree to float rounding (a padded
    window's -inf stays -inf). Only a conv whose one user is the pool is marked.
    """
    modules = dict(traced.named_modules())
    for node in traced.graph.nodes:
        if node.op != "call_module" or not isinstance(modules[node.target], nn.Conv2d) or modules[node.target].bias is None:
            continue
        users = list(node.users)
        pool = users[0] if len(users) == 1 else None
        is_pool = pool is not None and (
            (pool.op == "call_module" and type(modules[pool.target]) is nn.MaxPool2d and not modules[pool.target].return_indices)
            or (pool.op == "call_function" and pool.target is F.max_pool2d and not pool.kwargs.get("return_indices"))
        )
        if is_pool and pool.args and pool.args[0] is node:
            node.meta["bias_after_pool"] = True
            pool.meta["bias_of"] = node.target
    return traced


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``x [n, *lead, in] @ weight[n]^T + bias[n]`` as one batched matmul (see :class:`_BatchedLinear`)."""
    n, fin = x.shape[0], x.shape[-1]
    out = _BatchedLinear.apply(x.reshape(n, -1, fin), weight, bias)
    return out.view(*x.shape[:-1], weight.shape[1])


class _BatchedLinear(torch.autograd.Function):
    """``x @ weight^T + bias`` per slot, with each gradient computed in its tensor's own layout.

    Autograd's backward of ``baddbmm(bias, x, weight^T)`` gives the weight
    gradient as the transpose of ``x^T @ grad`` (the copy into the flat gradient
    then transposes it: 1.6 ms of a 55 ms step for a 1568x64 layer), and of
    ``(weight @ x^T)^T`` the input gradient transposed (the layer below then
    copies from a transposed source, 5x slower). Here both are one ``bmm`` each
    straight into ``[out, in]`` and ``[M, in]``.
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        if bias is None:
            return torch.bmm(x, weight.transpose(1, 2))
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad
        d_x = torch.bmm(grad, weight) if need_x else None
        d_weight = torch.bmm(grad.transpose(1, 2), x) if need_weight else None
        d_bias = grad.sum(1) if need_bias and ctx.has_bias else None
        return d_x, d_weight, d_bias


def _flatten(x: Stacked, start: int, end: int) -> Stacked:
    shape = list(x.shape)
    start, end = start % len(shape), end % len(shape)
    flat = shape[:start] + [-1] + shape[end + 1:]
    return Stacked(x.contiguous_rows().reshape(x.n, *flat), x.n)


def _binary(op, a, b, n: int):
    if isinstance(a, Stacked) and isinstance(b, Stacked):
        if a.image and b.image:
            return images(op(a.tensor, b.tensor), n)
        ra, rb = a.rows(), b.rows()
        while ra.dim() < rb.dim():
            ra = ra.unsqueeze(1)
        while rb.dim() < ra.dim():
            rb = rb.unsqueeze(1)
        return Stacked(op(ra, rb), n)
    if isinstance(a, Stacked):
        if a.image and isinstance(b, (int, float)):
            return images(op(a.tensor, b), n)
        return Stacked(op(a.rows(), b), n)
    if isinstance(b, Stacked):
        if b.image and isinstance(a, (int, float)):
            return images(op(a, b.tensor), n)
        return Stacked(op(a, b.rows()), n)
    return op(a, b)
