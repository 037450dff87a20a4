"""Verification of memory limits on the artifact: each accepted subnet exported to an ExecuTorch
program with portable kernels (fp32), its planned arena and constant bytes read from the program
(`hwnas.devices.executorch_backend.program_memory`) and judged against ``--max-ram-kb`` /
``--max-flash-kb``. Runs only when a search has a memory limit (seconds per subnet)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["MEMORY_SOURCE", "MemoryMeasure", "artifact_memory", "judge_memory"]

MEMORY_SOURCE = "ExecuTorch program, portable kernels, fp32: planned arena and constant bytes"
MemoryMeasure = Callable[[Sequence[Any]], list[dict[str, float]]]  # archs -> [{ram_kb, flash_kb}]


def artifact_memory(family: Any, n_classes: int) -> MemoryMeasure:
    """archs -> their measured ``ram_kb`` / ``flash_kb`` (kB = 1024 bytes), one export each."""

    def measure(archs: Sequence[Any]) -> list[dict[str, float]]:
        import torch
        from executorch import exir

        from hwnas.devices.executorch_backend import program_memory
        from hwnas.families.memory import KB

        out = []
        for arch in archs:
            net = family.static_subnet(arch, n_classes).eval()
            x = torch.zeros(1, 3, arch.r, arch.r)
            mem = program_memory(exir.to_edge(torch.export.export(net, (x,))).to_executorch())
            out.append({"ram_kb": mem["arena_bytes"] / KB, "flash_kb": mem["constant_bytes"] / KB})
        return out

    return measure


def judge_memory(archs: Sequence[Any], precisions: Sequence[str], limits: dict[str, float | None],
                 measure: MemoryMeasure) -> tuple[list[bool], list[dict[str, Any]]]:
    """(within every limit, one record per subnet) for `archs`; only fp32 subnets are measured (a
    bf16 / int8 subnet's memory stays the model's, its record says so)."""
    fp32 = [i for i, p in enumerate(precisions) if p == "fp32"]
    got = dict(zip(fp32, measure([archs[i] for i in fp32]))) if fp32 else {}
    ok, records = [], []
    for i, arch in enumerate(archs):
        mem = got.get(i)
        rec: dict[str, Any] = {"id": arch.id, "precision": precisions[i], "measured": mem,
                               "source": MEMORY_SOURCE if mem else "not measured: the model's bf16 / int8 memory"}
        fits = all(limit is None or mem is None or mem[key] <= limit for key, limit in limits.items())
        rec["within_limits"] = fits
        ok.append(fits)
        records.append(rec)
    return ok, records
