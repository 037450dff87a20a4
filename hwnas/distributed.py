"""torch.distributed as torchrun sets it up: rank and world size from the environment, and one
process group per process (gloo on CPU, NCCL on CUDA), and each process's device. Used by training
and the accuracy table."""

from __future__ import annotations

import os

__all__ = ["dist_info", "init_distributed", "process_device"]


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


def process_device():
    """This process's torch device: under torchrun its own GPU (LOCAL_RANK), else the first GPU, else
    the CPU. More processes on a machine than it has GPUs is refused in one line before any work
    (the extra ones would ask CUDA for a GPU that does not exist)."""
    import torch

    from hwnas.errors import InputError

    if not torch.cuda.is_available():
        return torch.device("cpu")
    local, gpus = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
    if local >= gpus:
        raise InputError(f"torchrun started process {local} on a machine with {gpus} GPU(s): start at most "
                         f"{gpus} per machine (--nproc_per_node {gpus}), or hide the GPUs "
                         "(CUDA_VISIBLE_DEVICES=) to train in CPU processes")
    return torch.device(f"cuda:{local}")
