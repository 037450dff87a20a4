"""Predicted RAM arena and flash against what exported programs reserve, and a search under a RAM limit.

For subnets of the shipped supernet's space (graded and uniform samples over r20..r44), each
exported with the shipped weights to:

- an ExecuTorch program with portable kernels, fp32 and bf16 (`exir.to_edge(...).to_executorch()`):
  the memory plan's arena and the constant bytes, against `hwnas supernet stats --precision`;
- an ExecuTorch program lowered to XNNPACK, fp32 (the first 12 subnets): what its plan holds (the
  delegate's inputs and outputs only; XNNPACK's own workspace is allocated outside the plan),
  reported beside the portable arena, not as a prediction target; its .pte size against the
  predicted flash.

Then `Problem`'s RAM limit: an NSGA-II search on synthetic predictors at the 30th percentile of the
measured arenas, its returned subnets exported and their arenas checked, and the search's seconds
with and without the limit.

    .venv/bin/python experiments/bench_memory.py              # 50 subnets (about 40 min on 1 core)
    .venv/bin/python experiments/bench_memory.py --n 12       # quicker

Writes experiments/results/memory.json (or --out); resumes from it (subnets already exported are
not exported again).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parent
KINDS = ("portable-fp32", "portable-bf16", "xnnpack-fp32")
XNNPACK_N = 12  # XNNPACK programs (30 s an export here) for the first subnets only: their plan is not predicted


def export(net, arch, kind: str) -> dict:
    import torch
    from executorch import exir

    from hwnas.devices.executorch_backend import program_memory

    x = torch.randn(1, 3, arch.r, arch.r)
    if kind == "portable-bf16":
        net, x = net.to(torch.bfloat16), x.to(torch.bfloat16)
    exported = torch.export.export(net, (x,))
    if kind.startswith("xnnpack"):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = exir.to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    else:
        edge = exir.to_edge(exported)
    return program_memory(edge.to_executorch())


def kendall(a, b) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def errors(pred, got) -> dict:
    rel = [abs(p / g - 1) for p, g in zip(pred, got)]
    return {"kendall_tau": kendall(pred, got), "median_abs_error_pct": 100 * statistics.median(rel),
            "worst_abs_error_pct": 100 * max(rel), "n": len(rel)}


def measure(n: int, out: Path, doc: dict) -> None:
    import torch

    from hwnas.families.memory import KB, family_memory
    from hwnas.families.sampling import sample_mixed
    from hwnas.supernet.pretrained import load_supernet

    from hwnas.families import get_family

    torch.set_num_threads(1)
    model, meta = load_supernet(None)
    model.eval()
    fam = get_family(meta.get("family", "ofa-mbv3"))
    space = fam.space_from_dict(meta["space"])
    m = sample_mixed(space, n, np.random.default_rng(0))
    rows = doc.setdefault("subnets", {})
    for i, arch in enumerate(space.from_matrix(m)):
        rec = rows.setdefault(arch.id, {"r": arch.r, "row": [int(v) for v in arch.to_row()]})
        for kind in KINDS:
            if kind in rec or (kind.startswith("xnnpack") and i >= XNNPACK_N):
                continue
            precision = "bf16" if "bf16" in kind else "fp32"
            ram, flash = family_memory(fam, space.to_matrix([arch]), space.width_mult, meta["n_classes"], precision)
            t = time.perf_counter()
            got = export(model.get_subnet(arch).eval(), arch, kind)
            rec[kind] = {"predicted_ram_kb": ram[0] / KB, "predicted_flash_kb": flash[0] / KB,
                         "ram_kb": got["arena_bytes"] / KB, "flash_kb": got["constant_bytes"] / KB,
                         "program_kb": got["program_bytes"] / KB, "export_s": round(time.perf_counter() - t, 2)}
            atomic_write_json(out, doc)
            print(arch.id, arch.r, kind, rec[kind], flush=True)


def repredict(doc: dict) -> None:
    """Every stored subnet's prediction from the memory model as it is now (the exports stay)."""
    from hwnas.families import get_family
    from hwnas.families.memory import KB, family_memory
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta, shipped_checkpoint

    meta = load_checkpoint_meta(shipped_checkpoint())
    fam = get_family(meta.get("family", "ofa-mbv3"))
    width = float(meta["space"].get("width_mult", 1.0))
    for rec in doc["subnets"].values():
        for kind in KINDS:
            if kind in rec:
                ram, flash = family_memory(fam, [rec["row"]], width, meta["n_classes"],
                                           "bf16" if "bf16" in kind else "fp32")
                rec[kind].update(predicted_ram_kb=ram[0] / KB, predicted_flash_kb=flash[0] / KB)


def summarise(doc: dict) -> None:
    repredict(doc)
    subnets = list(doc["subnets"].values())
    summary = {}
    for kind in KINDS:
        have = [s[kind] for s in subnets if kind in s]
        if not have:
            continue
        if kind.startswith("portable"):
            entry = {"ram": errors([h["predicted_ram_kb"] for h in have], [h["ram_kb"] for h in have]),
                     "flash": errors([h["predicted_flash_kb"] for h in have], [h["flash_kb"] for h in have])}
        else:  # the weights live in the delegate's blob: against the whole .pte; the plan holds the
            # delegate's inputs and outputs only
            entry = {"flash_vs_program": errors([h["predicted_flash_kb"] for h in have],
                                                [h["program_kb"] for h in have])}
            entry["planned_ram_kb_median"] = statistics.median(h["ram_kb"] for h in have)
            entry["portable_ram_kb_median"] = statistics.median(s["portable-fp32"]["ram_kb"] for s in subnets
                                                                if kind in s and "portable-fp32" in s)
        summary[kind] = entry
    doc["summary"] = summary


def search_under_limit(doc: dict) -> None:
    sys.path.insert(0, str(ROOT.parent / "tests" / "search"))
    from search_stubs import MacsLatency, SynthAccuracy

    from hwnas.families.memory import KB, family_memory
    from hwnas.search.algorithms import SearchRequest, get_algorithm
    from hwnas.search.problem import Problem
    from hwnas.families import get_family
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta, shipped_checkpoint

    meta = load_checkpoint_meta(shipped_checkpoint())

    fam = get_family(meta.get("family", "ofa-mbv3"))
    space = fam.space_from_dict(meta["space"])
    arenas = [s["portable-fp32"]["ram_kb"] for s in doc["subnets"].values() if "portable-fp32" in s]
    limit = float(np.quantile(arenas, 0.3))
    lat = MacsLatency()
    budget = float(np.quantile(lat.predict(space.sample_matrix(400, 0)), 0.8))
    timing = {}
    for name, kw in (("no limit", {}), ("ram limit", {"max_ram_kb": limit})):
        problem = Problem(space, SynthAccuracy(), {"dev": lat}, {"dev": budget}, n_classes=meta["n_classes"], **kw)
        t = time.perf_counter()
        outcome, _ = get_algorithm("evolution").run(problem, SearchRequest(ROOT, seed=0))
        timing[name] = round(time.perf_counter() - t, 2)
        if kw:
            feasible = np.unique(outcome.archive.m[outcome.archive.violation == 0], axis=0)
            top = feasible[np.argsort(-problem.top1(feasible))[:5]]
    from hwnas.supernet.pretrained import load_supernet

    model, _ = load_supernet(None)
    checked = []
    for arch in space.from_matrix(top):
        got = export(model.get_subnet(arch).eval(), arch, "portable-fp32")
        pred, _ = family_memory(fam, space.to_matrix([arch]), space.width_mult, meta["n_classes"])
        checked.append({"id": arch.id, "predicted_ram_kb": pred[0] / KB, "ram_kb": got["arena_bytes"] / KB,
                        "within": got["arena_bytes"] / KB <= limit})
    doc["search"] = {"limit_ram_kb": limit, "limit_rule": "30th percentile of the measured portable fp32 arenas",
                     "search_s": timing, "returned": checked, "all_within": all(c["within"] for c in checked)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "memory.json")
    args = ap.parse_args()
    doc = json.loads(args.out.read_text()) if args.out.exists() else {}
    doc["script"] = "experiments/bench_memory.py"
    measure(args.n, args.out, doc)
    summarise(doc)
    search_under_limit(doc)
    atomic_write_json(args.out, doc)
    print(json.dumps({"summary": doc["summary"], "search": doc["search"]}, indent=1))


if __name__ == "__main__":
    main()
