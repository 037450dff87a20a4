"""The front's fast end against the shipped baselines: what a supernet's shallowest subnets score
and how fast they run, beside the hand-designed networks, on one device.

For each supernet stem (default: the shipped one and, with --candidate, a training run's), a fixed
set of fast-end subnets (kernel 3, expand 3; depth 1 or 2 per stage; r28..44), r32 depth-2 subnets
with random kernels and expands, plus the largest is
evaluated on the test split (10,000 images, BN recalibrated as every stage does). Their latency
and the baselines' (timm, r44, fixed random weights: weights do not change fp32 latency) are
measured together in `--repeats` paired calls (`DeviceSession.measure_together`), so the ratios
carry no session-to-session level. A stem whose space lacks depth 1 is evaluated with it anyway:
depth 1 runs the first block of each stage, tensors the supernet has. `head_share`: the part of
ONNX Runtime's own per-node kernel time (its profiler, one thread) spent after the last stage (the
final 1x1 expansion, pooling, the 960->1280 feature mix and the classifier).

    .venv/bin/python experiments/bench_fast_end.py \\
        --candidate runs/supernet-fashion-stage10/supernet --out experiments/results/fast_end.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import tempfile
from pathlib import Path

from machine import cpu_model

from hwnas.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parent
#: name -> (r, depth per stage); kernel 3 and expand 3 everywhere
SUBNETS = {"r28 d1": (28, [1] * 5), "r32 d1": (32, [1] * 5), "r44 d1": (44, [1] * 5),
           "r32 d2-1-1-1-1": (32, [2, 1, 1, 1, 1]), "r28 d2": (28, [2] * 5), "r32 d2": (32, [2] * 5),
           "r36 d2": (36, [2] * 5), "r40 d2": (40, [2] * 5)}
#: r32 depth-2 subnets with kernels and expands drawn at random (seeded): each gene leaves 3 with
#: probability p (0.2: like the subnets a quickstart picks at the fast end; 1: uniform), against the
#: kernel-3 expand-3 one the sandwich trains every step
RANDOM_D2 = {"near": (0.2, 4), "random": (1.0, 2)}


def _archs(family):
    fixed = {name: family.arch_from_dict({"ks": [3] * 20, "e": [3] * 20, "d": d, "r": r}, 1.0)
             for name, (r, d) in SUBNETS.items()}
    rng = random.Random(0)

    def gene(p: float, larger: tuple[int, int]) -> int:
        return rng.choice(larger) if rng.random() < p else 3

    drawn = {f"r32 d2 {tag}{i}": family.arch_from_dict(
        {"ks": [gene(p, (5, 7)) for _ in range(20)], "e": [gene(p, (4, 6)) for _ in range(20)],
         "d": [2] * 5, "r": 32}, 1.0) for tag, (p, n) in RANDOM_D2.items() for i in range(n)}
    return {**fixed, **drawn}


def top1(stem: Path, archs: dict) -> dict[str, float]:
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    model, meta = load_supernet(stem)
    model.space = dataclasses.replace(model.space, d_choices=(1, 2, 3, 4))
    named = {**archs, "largest": dataclasses.replace(model.space, d_choices=(2, 3, 4)).max_arch()}
    rows = evaluate_subnets(model, list(named.values()), build_loaders(data_config_of(meta)), split="test")
    return {name: row["top1"] for name, row in zip(named, rows)}


def latency(run, archs: dict, baselines: list[str], device: str, repeats: int) -> dict[str, float]:
    import timm
    import torch

    from hwnas.profiling.session import open_session

    with open_session(run, device) as session:
        runners = {name: session.compile(name, session.timing_subnet(a), torch.zeros(1, 3, a.r, a.r))
                   for name, a in archs.items()}
        for name in baselines:
            net = timm.create_model(name, num_classes=run.n_classes).eval()
            runners[name] = session.compile(name, net, torch.zeros(1, 3, 44, 44))
        calls = [session.measure_together(runners) for _ in range(repeats)]
    return {name: round(statistics.median(c[name].corrected_ms for c in calls), 4) for name in runners}


def _active_ks_e(arch) -> str:
    """Kernel x expand of the blocks that run, stage by stage: '3x3 5x6 | ...'."""
    return " | ".join(" ".join(f"{arch.ks[4 * s + j]}x{arch.e[4 * s + j]}" for j in range(d))
                      for s, d in enumerate(arch.d))


HEAD = ("/final_expand_layer", "/global_avg_pool", "/feature_mix_layer", "/Flatten", "/classifier")


def head_share(arch, family, n_classes: int, rounds: int = 200) -> float:
    """The head's share of ONNX Runtime's kernel time for `arch` (profiled, one thread)."""
    import numpy as np
    import onnxruntime as ort
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "subnet.onnx")
        torch.onnx.export(family.static_subnet(arch, n_classes), torch.zeros(1, 3, arch.r, arch.r), path,
                          opset_version=17, dynamo=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
        so.enable_profiling, so.profile_file_prefix = True, str(Path(tmp) / "profile")
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        x = {session.get_inputs()[0].name: np.zeros((1, 3, arch.r, arch.r), np.float32)}
        for _ in range(rounds):
            session.run(None, x)
        events = json.loads(Path(session.end_profiling()).read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    kernels = kernels[len(kernels) // 4:]  # past the warm-up
    total = sum(e["dur"] for e in kernels)
    return round(sum(e["dur"] for e in kernels if e["name"].startswith(HEAD)) / total, 3)


def main() -> None:
    from hwnas.baselines import run_baselines
    from hwnas.run import open_run
    from hwnas.supernet.pretrained import shipped_checkpoint

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidate", type=Path, default=None, help="a training run's supernet stem to set beside")
    ap.add_argument("--device", default="cpu-ort")
    ap.add_argument("--repeats", type=int, default=3, help="paired timing calls")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "fast_end.json")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        run = open_run(Path(tmp) / "run")
        archs = _archs(run.family)
        shipped = {b["name"]: b["top1"] for b in run_baselines(run)}
        ms = latency(run, archs, list(shipped), args.device, args.repeats)
    stems = {"shipped": shipped_checkpoint(), **({"candidate": args.candidate} if args.candidate else {})}
    scores = {tag: top1(stem, archs) for tag, stem in stems.items()}
    subnets = [{"name": name, "r": a.r, "d": list(a.d), "ks_e": _active_ks_e(a), "ms": ms[name],
                "head_share": head_share(a, run.family, run.n_classes),
                **{f"top1_{tag}": s[name] for tag, s in scores.items()}} for name, a in archs.items()]
    result = {"device": args.device, "cpu": cpu_model(), "repeats": args.repeats, "n_test": 10000,
              "stems": {tag: str(stem) for tag, stem in stems.items()},
              "largest": {tag: s["largest"] for tag, s in scores.items()},
              "subnets": sorted(subnets, key=lambda row: row["ms"]),
              "baselines": sorted(({"name": n, "r": 44, "ms": ms[n], "top1": t} for n, t in shipped.items()),
                                  key=lambda row: row["ms"])}
    atomic_write_json(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
