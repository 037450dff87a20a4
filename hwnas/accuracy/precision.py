"""Top-1 of a reduced-precision (INT8, bf16) artifact and of its fp32 subnet on the same images.

Used by export's accuracy check and by the drop table (`hwnas.accuracy.int8`): both judge a
compiled artifact the same way. It lives here, below export, because the accuracy side measures
artifacts too and must not import the export package (which sits above search).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.devices.base import run_batched
from hwnas.errors import DeviceError, InputError

if TYPE_CHECKING:
    from hwnas.devices.base import Runner

__all__ = ["precision_accuracy"]


def precision_accuracy(subnet: Any, runner: Runner, loader: Any, r: int, precision: str = "int8"
                       ) -> dict[str, Any]:
    """Test top-1 of the fp32 PyTorch `subnet` and of the `precision` (int8, bf16) artifact's
    `runner`, on the same images: each batch of `loader` resized to r once (as `evaluate` does), then
    fed to both (the runner through `run_batched`, at its compiled batch size). Also their top-1
    agreement; `drop` is fp32 minus `precision`, in points; the artifact's top-1 is ``top1_<precision>``."""
    import torch

    from hwnas.supernet.data import resize_batch

    correct_fp32 = correct_low = agree = n = 0
    with torch.inference_mode():
        for x, y in loader:
            x = resize_batch(x.float(), r)
            fp32 = subnet(x).numpy().argmax(1)
            out = run_batched(runner, x.numpy().astype(np.float32))
            if not np.isfinite(out).all():
                raise DeviceError(f"the {precision} artifact gave non-finite outputs")
            low, y = out.argmax(1), np.asarray(y)
            correct_fp32 += int((fp32 == y).sum())
            correct_low += int((low == y).sum())
            agree += int((low == fp32).sum())
            n += len(y)
    if n == 0:
        raise InputError(f"the test split is empty: nothing to evaluate the {precision} artifact on")
    return {f"top1_{precision}": 100.0 * correct_low / n, "top1_fp32": 100.0 * correct_fp32 / n,
            "drop": 100.0 * (correct_fp32 - correct_low) / n, "top1_agreement": agree / n, "n": n}
