"""Benchmark: does a small reference model carry a busy machine's state into large candidates?

Drift correction divides each candidate's median by the reference's just before and after it
(`hwnas.devices.protocol.measure_many`). That cancels a slowdown only where the slowdown hits the
reference and the candidate alike. The run's reference is the space's smallest subnet at the middle
resolution (`hwnas.profiling.anchors.reference_arch`), whose time is mostly per-operator overhead;
search's candidates are large subnets, whose time is mostly compute and memory traffic. A
neighbour that competes for memory bandwidth or cache slows the second more than the first.

This times, on one device, the run's reference (R_small), a reference of about the candidates' cost
(R_big: the space's median-cost subnet at the largest resolution) and subnets across the cost range,
in `--passes` passes of the profiler's own protocol (15 shuffled rounds). Every other pass runs a
memory-bound neighbour process on the other core (numpy copies of 256 MB arrays), which stands in
for another tenant of a shared VM. Per subnet it reports the ratio to each reference, quiet and
loaded (the shift between the two is what a busy phase adds to a drift-corrected number), and
the pass-to-pass spread of its raw median and of its ratio to each reference.

    .venv/bin/python experiments/bench_reference_size.py [--passes 8] [--device cpu-ort]

Writes experiments/results/reference_size.json (machine, CPU, versions, command).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.devices.protocol import measure_many
from hwnas.fileio import atomic_write_json
from hwnas.profiling.anchors import build_timing_subnet
from hwnas.profiling.session import open_session
from hwnas.run import open_run
from machine import cpu_model  # experiments/machine.py (a script's folder is on sys.path)

OUT = Path(__file__).resolve().parent / "results" / "reference_size.json"


def memory_neighbour(stop: mp.Event) -> None:
    """Stream 256 MB arrays through memory until told to stop (one core)."""
    a = np.ones(32 * 1024 * 1024)
    b = np.empty_like(a)
    while not stop.is_set():
        np.copyto(b, a)
        np.copyto(a, b)


def pick_subnets(space, n_classes: int, k: int, seed: int = 0) -> dict[str, object]:
    """`k` subnets spread over the cost (MACs) range, and R_big: the median-cost subnet at the
    largest resolution (about the cost of the candidates a search verifies)."""
    archs = space.sample(400, np.random.default_rng(seed))
    macs = np.array([a.family.arch_params_macs(a, n_classes)[1] for a in archs], dtype=float)
    order = np.argsort(macs)
    picks = {f"q{int(100 * q):02d}": archs[order[int(q * (len(order) - 1))]]
             for q in np.linspace(0.0, 1.0, k)}
    top_r = [a for a in archs if a.r == max(space.r_choices)]
    top_macs = np.array([a.family.arch_params_macs(a, n_classes)[1] for a in top_r], dtype=float)
    picks["R_big"] = top_r[int(np.argsort(top_macs)[len(top_r) // 2])]
    return picks


def one_pass(session, runners, seed: int, loaded: bool) -> dict:
    """One measurement of every runner beside the session's reference (the profiler's protocol),
    with the memory-bound neighbour running when `loaded`."""
    stop = mp.Event()
    neighbour = mp.Process(target=memory_neighbour, args=(stop,), daemon=True) if loaded else None
    if neighbour is not None:
        neighbour.start()
        time.sleep(1.0)
    try:
        stats = measure_many(runners, session.reference_runner(), **{**session.protocol.kwargs(), "seed": seed})
    finally:
        if neighbour is not None:
            stop.set()
            neighbour.join()
    return {"loaded": loaded, "ref_small_ms": stats["R_big"].ref_median_ms,
            "ratio_small": {k: s.ratio for k, s in stats.items()},
            "median_ms": {k: s.median_ms for k, s in stats.items()}}


def measure_passes(device: str, n_passes: int, n_subnets: int) -> tuple[dict, dict, object, list[dict]]:
    """(picks, their MACs with R_small's, R_small's arch, the passes), every other pass loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        run = open_run(Path(tmp) / "run")
        with open_session(run, device) as session:
            picks = pick_subnets(run.space, run.n_classes, n_subnets)
            runners, macs = {}, {}
            for name, arch in picks.items():
                art = session.compile(name, build_timing_subnet(arch, run.n_classes),
                                      torch.zeros(1, 3, arch.r, arch.r))
                runners[name] = session.backend.load(art)
                macs[name] = int(arch.family.arch_params_macs(arch, run.n_classes)[1])
            ref = session.reference
            macs["R_small"] = int(ref.family.arch_params_macs(ref, run.n_classes)[1])
            passes = []
            try:
                for p in range(n_passes):
                    passes.append(one_pass(session, runners, seed=p, loaded=p % 2 == 1))
                    last = passes[-1]
                    print(f"pass {p + 1}/{n_passes} {'loaded' if last['loaded'] else 'quiet '}: R_small "
                          f"{last['ref_small_ms']:.3f} ms, R_big/R_small {last['ratio_small']['R_big']:.3f}",
                          flush=True)
            finally:
                for r in runners.values():
                    r.close()
    return picks, macs, ref, passes


def subnet_rows(picks: dict, macs: dict, passes: list[dict]) -> list[dict]:
    """Per subnet (by MACs): the pass-to-pass spread of its raw median and of its ratio to each
    reference, and the neighbour's shift of each ratio."""
    def ratio(p: dict, name: str, vs_big: bool) -> float:
        x = p["ratio_small"][name]
        return x / p["ratio_small"]["R_big"] if vs_big else x

    def shift(name: str, vs_big: bool) -> float:  # median loaded ratio over median quiet ratio, minus one
        quiet = statistics.median(ratio(p, name, vs_big) for p in passes if not p["loaded"])
        busy = statistics.median(ratio(p, name, vs_big) for p in passes if p["loaded"])
        return round(busy / quiet - 1.0, 4)

    def spread(values) -> float:  # standard deviation of the log: about the relative spread
        return round(float(np.std(np.log(list(values)), ddof=1)), 4)

    return [{"subnet": k, "macs": macs[k], "arch": picks[k].id,
             "spread_raw_median": spread(p["median_ms"][k] for p in passes),
             "spread_vs_small_reference": spread(ratio(p, k, False) for p in passes),
             "spread_vs_big_reference": spread(ratio(p, k, True) for p in passes) if k != "R_big" else 0.0,
             "shift_vs_small_reference": shift(k, False),
             "shift_vs_big_reference": shift(k, True) if k != "R_big" else 0.0}
            for k in sorted(picks, key=lambda k: macs[k])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=8, help="passes, every other one with the neighbour")
    ap.add_argument("--subnets", type=int, default=6, help="subnets across the cost range")
    ap.add_argument("--device", default="cpu-ort")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    t0 = time.time()
    picks, macs, ref, passes = measure_passes(args.device, args.passes, args.subnets)
    rows = subnet_rows(picks, macs, passes)

    def small_ms(loaded: bool) -> float:
        return round(statistics.median(p["ref_small_ms"] for p in passes if p["loaded"] == loaded), 4)

    result = {
        "command": "python experiments/bench_reference_size.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": cpu_model(), "arch": platform.machine()}, "device": args.device,
        "seconds": round(time.time() - t0), "passes": args.passes,
        "reference_small": {"arch": ref.id, "macs": macs["R_small"], "ms_quiet": small_ms(False),
                            "ms_loaded": small_ms(True)},
        "subnets": rows, "raw": passes,
        "note": "spread = standard deviation over passes of the log of a subnet's raw median, of its "
                "ratio to R_small (what the protocol reports) and of its ratio to R_big; "
                "shift = median ratio with the memory-bound neighbour / median ratio without, minus one; "
                "ratio to the run's reference (R_small, the smallest subnet at the middle resolution) "
                "and to R_big (the median-cost subnet at the largest resolution)",
    }
    atomic_write_json(args.out, result)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
