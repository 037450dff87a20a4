"""BatchNorm recalibration and evaluation.

A subnet cut out of a supernet inherits running statistics that were accumulated over *other*
subnets, so its accuracy is meaningless until they are re-estimated on a few training batches
(Once-for-All's ``set_running_statistics``). Recalibration resets every BatchNorm's buffers and
lets BatchNorm itself accumulate an exact running average (``momentum=None``) over the batches.

A supernet's dynamic BatchNorm that slices the full-width buffers of an ``nn.BatchNorm2d`` works
too, as long as it honours ``momentum=None`` the way ``nn.BatchNorm2d`` does (average factor
``1 / num_batches_tracked``): the full buffers are reset and the active channels are refilled.
"""

from __future__ import annotations

from contextlib import contextmanager
from itertools import islice
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from hwnas.errors import InputError
from hwnas.supernet.data import resize_batch

__all__ = ["batchnorm_layers", "recalibrate_bn", "folded_for_eval", "evaluate"]


def batchnorm_layers(model: nn.Module) -> list[_BatchNorm]:
    """Every BatchNorm (1d/2d/3d, sync) in `model` that keeps running statistics."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]


def _device(model: nn.Module) -> torch.device:
    tensor = next(model.parameters(), None)
    if tensor is None:
        tensor = next(model.buffers(), None)
    return tensor.device if tensor is not None else torch.device("cpu")


def _batches(loader: Iterable, limit: int | None) -> Iterable:
    return loader if limit is None else islice(loader, limit)


@contextmanager
def _channels_last_on_cpu(model: nn.Module, device: torch.device) -> Iterator[Callable[[Tensor], Tensor]]:
    """Run `model` channels-last on CPU for the duration (yields what to apply to each batch), then
    give back the layout it came in.

    On a 2-core CPU, training-mode passes through oneDNN's convolutions ran 1.4-7.5x (median 3.8x)
    slower on contiguous (NCHW) subnets than channels-last (`experiments/bench_recalibration_layout.py`),
    and export, INT8 accuracy and fine-tuning hand recalibration a freshly cut, contiguous subnet.
    Only the layout changes, never a value."""
    if device.type != "cpu":
        yield lambda x: x
        return
    kernels = [p for p in model.parameters() if p.dim() == 4]
    was_contiguous = bool(kernels) and all(p.is_contiguous() for p in kernels)
    model.to(memory_format=torch.channels_last)
    try:
        yield lambda x: x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
    finally:
        if was_contiguous:
            model.to(memory_format=torch.contiguous_format)


@torch.no_grad()
def recalibrate_bn(model: nn.Module, loader: Iterable, n_batches: int,
                   resolution: int | None = None) -> nn.Module:
    """Re-estimate all BatchNorm running statistics from `n_batches` batches of `loader`.

    Only the BatchNorm layers run in training mode (dropout and the rest stay in eval mode, as
    at inference). Momenta are restored afterwards; the model is returned in eval mode.
    `resolution` resizes each batch (the subnet's input size). Nothing but BN buffers changes
    (on CPU it runs channels-last and gives the weights back in the layout they came in).
    """
    if n_batches < 1:
        raise InputError(f"BatchNorm recalibration needs at least one batch, got n_batches={n_batches}")
    layers = batchnorm_layers(model)
    momenta = [bn.momentum for bn in layers]
    device, seen = _device(model), 0
    model.eval()
    try:
        for bn in layers:
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the batches, not an exponential one
            bn.train()
        with _channels_last_on_cpu(model, device) as in_layout:
            for x, _ in _batches(loader, n_batches):
                model(in_layout(resize_batch(x.to(device), resolution)))
                seen += 1
    finally:
        for bn, momentum in zip(layers, momenta):
            bn.momentum = momentum
        model.eval()
    if seen == 0:
        raise InputError("BatchNorm recalibration got no batches: the loader is empty")
    return model


def folded_for_eval(model: nn.Module) -> nn.Module:
    """A copy of `model` (in eval mode, channels-last) with each BatchNorm folded into the
    convolution before it, for evaluation only: the same outputs to float rounding, one pass over
    each activation fewer (on a 2-core CPU 1.03-1.08x faster at r20, ~1.5x at r44:
    `experiments/bench_eval_speed.py`). A model that torch.fx cannot trace (data-dependent control
    flow) is returned as it is, in eval mode."""
    from torch.fx.experimental.optimization import fuse

    model.eval()
    try:
        folded = fuse(model, inplace=False)
    except Exception:  # tracing failures have no common type (TraceError, TypeError, ...)
        return model
    # oneDNN's depthwise convolutions are faster in this layout on CPU
    return folded.to(memory_format=torch.channels_last)


@torch.inference_mode()
def evaluate(model: nn.Module, loader: Iterable, resolution: int | None = None,
             max_batches: int | None = None) -> dict[str, float | int]:
    """Top-1 accuracy (in %) and mean cross-entropy over `loader` (or its first `max_batches`).

    Runs in eval mode and puts the model back in the mode it was in.
    """
    was_training, device = model.training, _device(model)
    model.eval()
    correct, loss_sum, n = 0, 0.0, 0
    try:
        for x, y in _batches(loader, max_batches):
            y = y.to(device)
            logits = model(resize_batch(x.to(device), resolution))
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(dim=1) == y).sum())
            n += len(y)
    finally:
        model.train(was_training)
    if n == 0:
        raise InputError("nothing to evaluate: the loader is empty (is the split fraction 0?)")
    return {"top1": 100.0 * correct / n, "loss": loss_sum / n, "n": n}
