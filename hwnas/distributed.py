"""torch.distributed as torchrun sets it up: rank and world size from the environment, and one
process group per process (gloo on CPU, NCCL on CUDA). Used by training and the accuracy table."""

from __future__ import annotations

import os

__all__ = ["dist_info", "init_distributed"]


def dist_info() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside torchrun."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def init_distributed(device_type: str = "cpu") -> tuple[int, int]:
    """Join torchrun's process group once (a no-op outside torchrun); returns `dist_info()`."""
    if dist_info()[1] > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return dist_info()
