"""INT8 vs fp32 on the shipped supernet, per runtime: latency, predictor, accuracy drop, front (1 thread).

Everything runs through hwnas's own code on one run directory (`--run`, made with
`hwnas.run.open_run` on the shipped supernet) and one set of subnets: the `--n` subnets
`hwnas profile` picks (`select_subnets`, MACs-stratified, seed 0), or for ``bundles`` the four
probe subnets of the space by default (`probe_subnets`: smallest, mixed, k3e6d4, largest).
Parts (`--parts`, each merged into the results file on its own, so they can run one at a time):

- ``bundles`` (issue 29: time what ships): for each runtime, each subnet is exported with
  `hwnas export`'s own call (`export_subnet`: BatchNorm recalibrated, INT8 calibrated on training
  images, verified on the whole test split) for the runtime's reduced-precision devices
  (ONNX Runtime: `cpu-ort-int8`; OpenVINO: `cpu-openvino-int8` and, where usable,
  `cpu-openvino-bf16`). Each bundle's artifact is loaded as `hwnas.export.load` loads it (its own
  device, files checked by sha256) and timed against the fp32 model of the same subnet, compiled
  as hwnas's fp32 device does and as the runtime does by default: ONNX Runtime: the bundle's
  `model_fp32.onnx` on `cpu-ort` (which is ONNX Runtime's default session but for the 1 thread);
  OpenVINO: the bundle's fp32 `model.onnx` on `cpu-openvino` (f32 forced) and compiled with no
  precision hint (bf16 on a CPU with AVX512-BF16/AMX). Timing: 1 thread, `--rounds` rounds (11) of
  blocks of `--runs` inferences (20) per model in rotating order, round k on real test image k;
  a speed-up is the median over rounds of baseline block median / artifact block median. The
  1-minute load average is recorded per subnet; above `--max-load` (1.5) the result says
  ``loaded``: such numbers are not the machine's, rerun idle. Written to int8_bundles.json.
- ``profile``: `hwnas.profiling.stage.profile` of the same subnets on the INT8 and fp32 devices
  (the real profiler: reference interleaving, anchor, store), with `--profile-rounds/--profile-runs`.
- ``predictor``: held-out accuracy of the latency predictor on those measurements: `--folds`-fold
  cross-validation where each fold's predictor is `fit_best` (hwnas's own selection, with its own
  inner CV) on the other folds and scored on the held-out fold with `hwnas.latency.metrics.summary`
  (within +-5%, +-10%, Kendall tau over all subnets, each predicted once by a predictor that never
  saw it); then `fit_from_run` fits the run's predictor on all of them (what search uses). Also the
  profiler's own fp32 / INT8 ratio per subnet (`<runtime>_profiled_speedup`).
- ``repeat``: profile the same subnets on the INT8 devices again, into `--repeat-run` (a fresh
  session), and compare `corrected_ms` per subnet (within +-5%, +-10%): how well a second
  measurement agrees with the first, the bound on any predictor's held-out accuracy.
- ``drop``: the INT8 accuracy table (`hwnas.accuracy.int8.measure_int8_table`, the path the search's
  drop model and the INT8 export check take: BN-recalibrated subnet, quantized artifact vs fp32
  subnet on the whole test split) on the first `--drop-n` subnets of the accuracy sample.
- ``front``: `hwnas.search.api.run_search(..., pareto=True, verify=False)` on the fp32 device with
  `--precision fp32`, `int8` and `auto`; how many members of the fp32 front leave it in INT8, on the
  searches' own fronts and on one common pool (both fronts' subnets, scored by both precisions'
  predictors, so search randomness is out of the count); the share of INT8 points on the auto front.
  Needs an accuracy table: `--accuracy-from RUN` copies a run's (same supernet), else
  `--accuracy-samples` subnets are evaluated.
- ``front_verified``: the same searches with verification (`--precision fp32` and `auto`,
  `--budget-ms`, default 1.0), `--verify-top-k` front members each measured on its own device and
  precision (latency; top-1 on the test split of the fp32 subnet or the quantized model): how many
  measured fp32-front points a measured precision-aware point dominates. Run it on a run that has
  both devices' latency predictors, the accuracy predictor and the INT8 accuracy table (a
  quickstart run after `profile`/`latency fit` on the INT8 device; pareto.csv is overwritten).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/bench_int8.py --parts bundles --runtimes ort openvino \
        --run runs/bench-int8-bundles            # issue 29: the exported bundles (idle machine)
    # int8.json, earlier (MNIST supernet, r 32..64), was made in parts (each merges into it):
    ... --parts drop front --runtimes openvino ort --drop-n 8 --front-runtime openvino --accuracy-from runs/quickstart
    ... --parts profile predictor --n 30 --runtimes ort openvino --profile-fp32 ort openvino --run runs/bench-int8-d
    ... --parts repeat --n 30 --runtimes ort openvino --run runs/bench-int8-d --repeat-run runs/bench-int8-repeat
    ... --parts front_verified --front-runtime ort --budget-ms 1.0 --run runs/bench-int8-front  # a quickstart run + INT8
    # its "speedup" block timed models the benchmark compiled itself (not the shipped bundles): replaced by bundles

Writes experiments/results/int8_bundles.json (--parts bundles alone) or int8.json (machine, versions,
commands, settings, load) and prints tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent / "results" / "int8.json"
OUT_BUNDLES = OUT.with_name("int8_bundles.json")
RUNTIMES = {"ort": ("cpu-ort", "cpu-ort-int8"), "openvino": ("cpu-openvino", "cpu-openvino-int8"),
            "xnnpack": ("mobile-xnnpack", "mobile-xnnpack-int8")}
PARTS = ("bundles", "profile", "predictor", "repeat", "drop", "front", "front_verified")


def subnets(run, n: int):
    from hwnas.profiling.stage import select_subnets

    return select_subnets(run.space, n, seed=0, n_classes=run.n_classes)


# --- bundles: what `hwnas export` ships, timed -------------------------------------------------

#: the bundles each runtime's part exports, and the fp32 baselines its artifacts are timed against
BUNDLE_DEVICES = {"ort": ("cpu-ort-int8",), "openvino": ("cpu-openvino-int8", "cpu-openvino-bf16")}


def probe_subnets(run):
    """The four probe subnets of the run's space (issue 29): the smallest (at the lowest
    resolution), a mixed one (kernels 3/5/7/5, expands 3/6/4/4/6, depths 2/3/4/3/2, middle
    resolution), k3 e6 d4 at the middle resolution, the largest (at the highest resolution)."""
    rs = sorted(run.space.r_choices)
    big = run.space.max_arch().to_ofa_dict()
    n, stages = len(big["ks"]), len(big["d"])

    def arch(ks, e, d, r):
        def cycle(v, k):
            return [v[i % len(v)] for i in range(k)]
        spec = {"ks": cycle(ks, n), "e": cycle(e, n), "d": cycle(d, stages), "r": r}
        return run.space.validate(run.family.arch_from_json(json.dumps(spec), run.space.width_mult))

    mid = rs[len(rs) // 2]
    return {"smallest": run.space.min_arch(r=rs[0]), "mixed": arch([3, 5, 7, 5], [3, 6, 4, 4, 6], [2, 3, 4, 3, 2], mid),
            "k3e6d4": arch([3], [6], [4], mid), "largest": run.space.max_arch(r=rs[-1])}


class _Compiled:
    """An OpenVINO compile with the runtime's own defaults but for the thread count (no precision
    hint: bf16 on a CPU with AVX512-BF16/AMX), with the runner interface the timing loop uses."""

    def __init__(self, path: Path, shape) -> None:
        from hwnas.devices.openvino_backend import import_openvino

        ov = import_openvino("cpu-openvino")  # without its usage telemetry
        self.ov, self.input_shape = ov, tuple(shape)
        self.compiled = ov.Core().compile_model(str(path), "CPU", {
            "INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"})
        hint = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision = {ov.Type.bf16: "bf16", ov.Type.f16: "fp16"}.get(hint, "fp32")
        self.request = self.compiled.create_infer_request()

    def prepare(self, x):
        tensor = self.ov.Tensor(np.ascontiguousarray(x))
        self.request.set_input_tensor(tensor)
        return tensor

    def invoke(self, prepared):
        self.request.infer()

    def close(self) -> None:
        self.request = self.compiled = None


def fp32_baselines(runtime: str, bundle: Path, meta: dict) -> dict:
    """The fp32 model of the bundle's subnet as hwnas's fp32 device runs it and as the runtime runs
    it by default (1 thread): ONNX Runtime: the fp32 ONNX the INT8 model was quantized from, on
    `cpu-ort` (ONNX Runtime's defaults: all graph optimisations); OpenVINO: the bundle's fp32
    ONNX on `cpu-openvino` (f32 forced) and compiled with no precision hint."""
    from hwnas.devices import Artifact, get_device
    from hwnas.export.bundle import onnx_runner

    shape = meta["input"]["shape"]
    if runtime == "ort":
        return {"cpu-ort (fp32, ORT defaults)": onnx_runner(bundle / meta["artifact"]["metadata"]["fp32_onnx"], shape)}
    onnx = bundle / meta["onnx"]["file"]
    dev = get_device("cpu-openvino")
    f32 = dev.backend_impl().load(Artifact(format="openvino-ir", path=onnx, input_shape=tuple(shape),
                                           device=dev.name, backend=dev.backend))
    default = _Compiled(onnx, shape)
    return {"cpu-openvino (fp32 forced)": f32, f"openvino default ({default.precision})": default}


def interleaved(models: dict, images: np.ndarray, rounds: int, runs: int) -> dict:
    """Per model, its median ms and the median over rounds of (first model's block median / its
    block median): blocks of `runs` inferences, models in rotating order, each round on the next
    real test image (every model sees the same image in a round)."""
    names = list(models)
    per = {k: [] for k in names}
    for m in models.values():  # warm-up
        m.invoke(m.prepare(images[0][None]))
    for r in range(rounds):
        x = images[r % len(images)][None]
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            m = models[k]
            prepared = m.prepare(x)
            for _ in range(3):
                m.invoke(prepared)
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                m.invoke(prepared)
                ts.append(time.perf_counter() - t0)
            per[k].append(statistics.median(ts) * 1e3)
    base = per[names[0]]
    return {k: {"median_ms": round(statistics.median(v), 4),
                "speedup_vs_first": round(statistics.median([b / t for b, t in zip(base, v)]), 3)}
            for k, v in per.items()}


def bench_bundles(key: str, run, archs: dict, args) -> dict:
    """Export each subnet with `hwnas export` (`export_subnet`: BN recalibrated, calibrated on
    training images, verified on the whole test split) for the runtime's INT8 (and bf16) devices,
    then time each bundle's artifact, loaded as the bundle loads it (`hwnas.export.load`, its
    device), against the fp32 baselines of the same subnet (`fp32_baselines`), interleaved."""
    from hwnas.devices import get_device
    from hwnas.export import export_subnet, load
    from hwnas.export.manifest import read_meta
    from hwnas.supernet.data import build_loaders, spread_images
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    devices = [d for d in BUNDLE_DEVICES[key] if not get_device(d).available()]
    skipped = {d: get_device(d).available() for d in BUNDLE_DEVICES[key] if d not in devices}
    if not devices:
        return {"skipped": skipped}
    _, meta = load_supernet(run.supernet)
    test = build_loaders(data_config_of(meta, run.data)).test.dataset
    rows = []
    root = Path(tempfile.mkdtemp(prefix="bench-int8-"))
    try:
        for name, arch in archs.items():
            images = spread_images(test, args.images, arch.r)[0]
            bundles = {d: export_subnet(run.run_dir, arch, d, out_dir=root / f"{arch.id}-{d}", measure=False)
                       for d in devices}
            first = read_meta(bundles[devices[0]])
            models = fp32_baselines(key, bundles[devices[0]], first)
            loaded = {d: load(b, runtime="device") for d, b in bundles.items()}
            models.update({f"{d} (bundle artifact)": b.runner for d, b in loaded.items()})
            load0 = os.getloadavg()[0]
            timed = {}
            for base in [k for k in models if "bundle" not in k]:  # each baseline first in its own loop
                timed[base] = interleaved({base: models[base], **{k: m for k, m in models.items() if "bundle" in k}},
                                          images, args.rounds, args.runs)
            row = {"subnet": name, "id": arch.id, "r": arch.r, "arch": arch.describe(),
                   "load_avg_1": [round(load0, 2), round(os.getloadavg()[0], 2)], "timed": timed}
            for d, b in loaded.items():
                record = read_meta(bundles[d])
                acc = record["accuracy"][record["precision"]]
                row[d] = {"status": record["status"], **{k: acc.get(k) for k in (
                    f"top1_{record['precision']}", "top1_fp32", "drop", "top1_agreement", "n", "int8_share",
                    "qdq_pairs", "fp32_ops", "quantizer") if k in acc},
                          "weights": record["artifact"]["metadata"].get("weights")}
                b.close()
            for m in models.values():
                m.close()
            rows.append(row)
            print(f"{key} {name} r{arch.r}: " + "; ".join(
                f"{k.split(' ')[0]} {v['speedup_vs_first']:.2f}x vs {base}" for base, t in timed.items()
                for k, v in t.items() if "bundle" in k), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"devices": devices, "skipped": skipped or None, "rounds": args.rounds, "runs": args.runs,
            "images": f"{args.images} test images, one per round", "summary": _bundle_summary(rows), "rows": rows}


def _bundle_summary(rows: list[dict]) -> dict:
    """Per (artifact, baseline): median and range of the per-subnet speed-ups; per device: drops."""
    out = {}
    for base in rows[0]["timed"]:
        for art in rows[0]["timed"][base]:
            if art == base:
                continue
            s = np.array([r["timed"][base][art]["speedup_vs_first"] for r in rows])
            out[f"{art.split(' ')[0]} vs {base}"] = {"median": round(float(np.median(s)), 3),
                                                      "min": round(float(s.min()), 3), "max": round(float(s.max()), 3)}
    for dev in [k for k in rows[0] if k.startswith("cpu-")]:
        d = np.array([r[dev]["drop"] for r in rows])
        out[f"{dev} drop (points)"] = {"median": round(float(np.median(d)), 3), "worst": round(float(d.max()), 3),
                                      "all_verified": all(r[dev]["status"] == "verified" for r in rows)}
    return out


# --- profile / predictor -----------------------------------------------------------------------

def do_profile(run, devices: list[str], args) -> dict:
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import profile

    protocol = ProtocolSettings(rounds=args.profile_rounds, runs=args.profile_runs)
    out = {}
    for dev in devices:
        t0 = time.perf_counter()

        def progress(device, done, total, key):
            if done and (done % 10 == 0 or done == total):
                print(f"profile {device}: {done}/{total}", flush=True)

        summary = profile(run, [dev], args.n, protocol=protocol, progress=progress)[0]
        out[dev] = {**summary, "wall_s": round(time.perf_counter() - t0, 1), "protocol": protocol.kwargs()}
        print(f"profiled {dev}: {summary} in {out[dev]['wall_s']} s", flush=True)
    return out


def heldout(run, device: str, folds: int, seed: int = 0) -> dict:
    """K-fold held-out metrics of `fit_best` on the run's subnet measurements of `device`."""
    from hwnas.latency.api import fit_from_run, read_latency_table
    from hwnas.latency.metrics import summary
    from hwnas.latency.select import fit_best
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run.run_dir, device=device, kind="subnet")
    if df.empty:
        return {"skipped": f"no subnet measurements of {device} in {run.run_dir}"}
    m, y, _ = read_latency_table(df, "corrected_ms", run.family.name)
    pred = np.full(len(y), np.nan)
    chosen = []
    order = np.random.default_rng(seed).permutation(len(y))
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        p, rep = fit_best(m[train], y[train], net=run.network, seed=seed, device=device, target="corrected_ms")
        pred[test] = p.predict(m[test])
        chosen.append(rep["chosen"])
    metrics = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary(pred, y).items()}
    full, report = fit_from_run(run.run_dir, device, n_classes=run.n_classes, seed=seed)
    return {"subnets": int(len(y)), "folds": folds, "heldout": metrics, "fold_chosen": chosen,
            "ms_range": [round(float(y.min()), 4), round(float(y.max()), 4)],
            "fitted_on_all": {"chosen": report["chosen"], "cv": report["chosen_metrics"]}}


def profiled_speedup(run, fp_dev: str, q_dev: str) -> dict:
    """fp32 / INT8 of the profiler's own measurements (timing subnets with
    fixed random weights, reference-interleaved, anchored), per subnet profiled on both devices."""
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run.run_dir, kind="subnet")
    if df.empty:
        return {"skipped": "no measurements"}
    p = df[df["device"].isin([fp_dev, q_dev])].pivot_table(index="key", columns="device", values="corrected_ms")
    if fp_dev not in p or q_dev not in p:
        return {"skipped": f"profile both {fp_dev} and {q_dev} first"}
    s = (p[fp_dev] / p[q_dev]).dropna().to_numpy()
    return {"devices": [fp_dev, q_dev], "n": int(len(s)), "median_speedup": round(float(np.median(s)), 3),
            "min_speedup": round(float(s.min()), 3), "max_speedup": round(float(s.max()), 3),
            "target": "corrected_ms"}


def do_repeat(run, devices: list[str], args) -> dict:
    """Profile the run's subnets again in `--repeat-run` (same config: a fresh process-level
    session, its own anchor from the host's book) and compare `corrected_ms` per subnet: the
    re-measurement agreement that bounds any predictor's held-out accuracy."""
    from hwnas.profiling.store import read_measurements
    from hwnas.run import open_run

    args.repeat_run.mkdir(parents=True, exist_ok=True)
    shutil.copy(run.run_dir / "config.yaml", args.repeat_run / "config.yaml")
    again = open_run(args.repeat_run)
    load0 = os.getloadavg()
    do_profile(again, devices, args)
    out = {"run": str(args.repeat_run), "load_avg_1_before": round(load0[0], 2),
           "load_avg_1_after": round(os.getloadavg()[0], 2)}
    for dev in devices:
        a = read_measurements(run.run_dir, device=dev, kind="subnet").groupby("key")["corrected_ms"].median()
        b = read_measurements(again.run_dir, device=dev, kind="subnet").groupby("key")["corrected_ms"].median()
        keys = a.index.intersection(b.index)
        d = np.abs(b[keys].to_numpy() / a[keys].to_numpy() - 1)
        out[dev] = {"subnets": int(len(keys)), "within_5": round(float(np.mean(d <= 0.05)), 3),
                    "within_10": round(float(np.mean(d <= 0.10)), 3),
                    "median_rel_diff": round(float(np.median(d)), 4), "max_rel_diff": round(float(d.max()), 4)}
        print(f"repeat {dev}: {out[dev]}", flush=True)
    return out


# --- drop --------------------------------------------------------------------------------------

def do_drop(run, device: str, n: int) -> dict:
    from hwnas.accuracy.int8 import measure_int8_table
    from hwnas.accuracy.table import accuracy_sample

    archs = run.space.from_matrix(accuracy_sample(run.space, n, 0))
    t0 = time.perf_counter()
    table = measure_int8_table(run, archs, device)
    drop = table["drop"].astype(float).to_numpy()
    rows = [{"id": r["id"], "r": int(r["r"]), "top1_fp32": float(r["top1_fp32"]),
             "top1_int8": float(r["top1_int8"]), "drop": float(r["drop"]),
             "top1_agreement": float(r["top1_agreement"]), "int8_share": float(r["int8_share"])}
            for _, r in table.iterrows()]
    return {"device": device, "subnets": len(rows), "test_images": int(table["n"].iloc[0]),
            "median_drop": round(float(np.median(drop)), 3), "worst_drop": round(float(drop.max()), 3),
            "best_drop": round(float(drop.min()), 3),
            "median_agreement": round(float(table["top1_agreement"].median()), 4),
            "wall_s": round(time.perf_counter() - t0, 1), "rows": rows}


# --- front -------------------------------------------------------------------------------------

def do_front(run, device: str, args) -> dict:
    from hwnas.accuracy.api import ensure_accuracy_predictor
    from hwnas.accuracy.int8 import ensure_int8_drop_model, int8_variant, read_int8_table
    from hwnas.profiling.store import read_measurements
    from hwnas.search.api import run_search
    from hwnas.search.pareto import front_mask
    from hwnas.search.problem import load_latency_predictor

    dev8 = int8_variant(device)
    if args.accuracy_from and (Path(args.accuracy_from) / "accuracy.csv").exists() \
            and not run.files.accuracy.exists():
        shutil.copyfile(Path(args.accuracy_from) / "accuracy.csv", run.files.accuracy)
    acc = ensure_accuracy_predictor(run, args.accuracy_samples)
    int8_rows = len(read_int8_table(run.run_dir, dev8, run.space))
    drop = ensure_int8_drop_model(run, dev8, max(1, min(int8_rows, args.drop_n)))
    ms = read_measurements(run.run_dir, device=device, kind="subnet")["corrected_ms"]
    budget = args.budget_ms or round(float(ms.max()), 4)  # every profiled size allowed: the whole front
    fronts, out = {}, {"device": device, "int8_device": dev8, "budget_ms": budget, "algo": "evolution (pareto)",
                       "drop_model": drop.describe(), "accuracy_table_rows": int(acc.meta.get("n_train", 0))}
    for prec in ("fp32", "int8", "auto"):
        res = run_search(run.run_dir, device, budget, pareto=True, verify=False, precision=prec, seed=0,
                         plot=False, int8_samples=max(1, min(int8_rows, args.drop_n)))
        f = res.front[res.front["on_front"]]
        fronts[prec] = f
        out[prec] = {"front_size": int(len(f)), "scored": res.metrics["scored"]}
        if prec == "auto":
            out[prec]["int8_points"] = int((f["precision"] == "int8").sum())
            out[prec]["fp32_points"] = int((f["precision"] == "fp32").sum())
            out[prec]["by_precision"] = res.metrics.get("by_precision")
    ids32, ids8 = set(fronts["fp32"]["id"]), set(fronts["int8"]["id"])
    out["search_fronts"] = {"fp32": len(ids32), "int8": len(ids8), "common": len(ids32 & ids8),
                            "fp32_members_not_on_int8_front": len(ids32 - ids8)}
    # one common pool, both precisions' predictors: only the predictors decide what changes
    pool = list({a.id: a for f in (fronts["fp32"], fronts["int8"]) for a in _archs(run, f)}.values())
    m = run.space.to_matrix(pool)
    top1 = acc.predict(m)
    top1_8 = top1 - drop.predict(m)
    lat32 = load_latency_predictor(run.run_dir, device, run.space.width_mult).predict(m)
    lat8 = load_latency_predictor(run.run_dir, dev8, run.space.width_mult).predict(m)
    on32 = front_mask(np.c_[-top1, lat32])
    on8 = front_mask(np.c_[-top1_8, lat8])
    out["common_pool"] = {"pool": len(pool), "fp32_front": int(on32.sum()), "int8_front": int(on8.sum()),
                          "fp32_members_not_on_int8_front": int((on32 & ~on8).sum()),
                          "int8_members_not_on_fp32_front": int((on8 & ~on32).sum()),
                          "kendall_tau_latency_fp32_vs_int8": round(float(_tau(lat32, lat8)), 4)}
    return out


def do_front_verified(run_dir: Path, device: str, budget_ms: float, top_k: int) -> dict:
    """`search --pareto` with verification, `--precision fp32` and `auto`, `top_k` front members
    each measured on the device they are for (latency on `device` or its INT8 variant; top-1 of the
    fp32 subnet or of the quantized model, on the test split). Then, in measured terms: how many
    verified fp32-front points some verified auto point dominates (no slower, no less accurate, one
    strictly), and the reverse."""
    from hwnas.search.api import run_search

    measured = {}
    for prec in ("fp32", "auto"):
        res = run_search(run_dir, device, budget_ms, pareto=True, verify=True, precision=prec, seed=0, plot=False,
                         top_k=top_k, accuracy_checks=top_k)
        f = res.front[res.front["verified"] & res.front["measured_top1"].notna()]
        measured[prec] = [{"id": r.id, "precision": r.precision, "r": int(r.r),
                           "top1_pred": round(float(r.top1_pred), 2), "top1_measured": round(float(r.measured_top1), 2),
                           "ms_pred": round(float(r.ms_pred), 4), "ms_measured": round(float(r.measured_ms), 4)}
                          for r in f.itertuples()]

    def dominated(points, by):
        return sum(any(q["ms_measured"] <= p["ms_measured"] and q["top1_measured"] >= p["top1_measured"]
                       and (q["ms_measured"] < p["ms_measured"] or q["top1_measured"] > p["top1_measured"])
                       for q in by) for p in points)

    a, b = measured["fp32"], measured["auto"]
    return {"device": device, "budget_ms": budget_ms, "top_k": top_k, "points": measured,
            "fp32_points_dominated_by_auto": dominated(a, b), "auto_points_dominated_by_fp32": dominated(b, a),
            "median_ms": {k: float(np.median([p["ms_measured"] for p in v])) for k, v in measured.items() if v},
            "median_top1": {k: float(np.median([p["top1_measured"] for p in v])) for k, v in measured.items() if v}}


def _archs(run, frame):
    from hwnas.space import archs_from_frame

    return archs_from_frame(frame, space=run.space)


def _tau(a, b) -> float:
    from hwnas.latency.metrics import kendall_tau

    return kendall_tau(a, b)


# --- main --------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--run", type=Path, default=Path("runs/bench-int8"), help="run directory (resumed)")
    ap.add_argument("--n", type=int, default=30, help="subnets (profiling; bundles with --subnets sample)")
    ap.add_argument("--subnets", default="probe", choices=("probe", "sample"),
                    help="bundles: the four probe subnets of the space, or the --n subnets profile picks")
    ap.add_argument("--images", type=int, default=64, help="bundles: real test images cycled through the rounds")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="bundles: results are marked 'loaded' when the 1-minute load average exceeds this")
    ap.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=list(RUNTIMES))
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (bundles)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per block (bundles)")
    ap.add_argument("--profile-rounds", type=int, default=15, help="profiler rounds (ProtocolSettings)")
    ap.add_argument("--profile-runs", type=int, default=10, help="profiler runs per round")
    ap.add_argument("--profile-fp32", nargs="*", default=[], choices=list(RUNTIMES),
                    help="also profile these runtimes' fp32 devices (front needs its runtime's)")
    ap.add_argument("--folds", type=int, default=5, help="held-out folds (predictor)")
    ap.add_argument("--repeat-run", type=Path, default=Path("runs/bench-int8-repeat"),
                    help="run directory the repeat part profiles the same subnets into")
    ap.add_argument("--drop-n", type=int, default=8, help="subnets in the INT8 accuracy table (drop)")
    ap.add_argument("--front-runtime", default="openvino", choices=list(RUNTIMES))
    ap.add_argument("--accuracy-from", type=Path, default=None,
                    help="copy this run's accuracy table (same supernet) instead of evaluating one")
    ap.add_argument("--accuracy-samples", type=int, default=100)
    ap.add_argument("--budget-ms", type=float, default=None)
    ap.add_argument("--verify-top-k", type=int, default=12, help="front members measured (front_verified)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"results file (default {OUT_BUNDLES.name} for --parts bundles alone, else {OUT.name})")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from hwnas.devices._imports import dist_version
    from hwnas.fileio import atomic_write_json
    from hwnas.run import open_run

    run = open_run(args.run)
    archs = subnets(run, args.n)
    if args.out is None:
        args.out = OUT_BUNDLES if args.parts == ["bundles"] else OUT
    doc = json.loads(args.out.read_text()) if args.out.exists() else {}
    if "results" in doc and "speedup" not in doc:  # the first layout: r 128..224 speed-ups only
        doc = {"earlier": {"note": "SearchSpace() subnets (r 128..224) of the shipped supernet, 32 calibration "
                                   "images", "commands": doc.get("commands"), "rounds": doc.get("rounds"),
                           "runs": doc.get("runs"), "results": {
                               k: {"n": len(v.get("rows", [])), **v.get("summary", {})}
                               for k, v in doc["results"].items()}}}
    doc.setdefault("settings", {})
    cmd = "python " + " ".join(sys.argv)
    results_of = {p: doc.setdefault(p, {}) for p in PARTS}
    t0, started, load0 = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()
    if "bundles" in args.parts:
        picks = probe_subnets(run) if args.subnets == "probe" else {a.id: a for a in archs}
        for key in [k for k in args.runtimes if k in BUNDLE_DEVICES]:
            res = bench_bundles(key, run, picks, args)
            loads = [v for r in res.get("rows", []) for v in r["load_avg_1"]]
            res["loaded"] = bool(loads) and max(loads) > args.max_load
            results_of["bundles"][key] = res
            for what, v in res.get("summary", {}).items():
                print(f"{key:9} {what}: {v}", flush=True)
            if res["loaded"]:
                print(f"{key}: the 1-minute load average reached {max(loads):.2f} (> {args.max_load}): "
                      "these timings are marked loaded; rerun on an idle machine", flush=True)
    if "profile" in args.parts:
        devs = [RUNTIMES[k][1] for k in args.runtimes] + [RUNTIMES[k][0] for k in args.profile_fp32]
        for dev, res in do_profile(run, devs, args).items():
            if res["measured"] or dev not in results_of["profile"]:  # a rerun that measured nothing keeps the record
                results_of["profile"][dev] = res
    if "predictor" in args.parts:
        for key in args.runtimes:
            results_of["predictor"][f"{key}_profiled_speedup"] = profiled_speedup(run, *RUNTIMES[key])
            for dev in RUNTIMES[key][::-1]:
                res = heldout(run, dev, args.folds)
                results_of["predictor"][dev] = res
                if "heldout" in res:
                    h = res["heldout"]
                    print(f"predictor {dev}: {res['subnets']} subnets, held-out within 5% {h['within_5']:.0%}, "
                          f"10% {h['within_10']:.0%}, tau {h['kendall_tau']:.3f}", flush=True)
    if "repeat" in args.parts:
        results_of["repeat"] = doc["repeat"] = do_repeat(run, [RUNTIMES[k][1] for k in args.runtimes], args)
    if "drop" in args.parts:
        for key in args.runtimes:
            res = do_drop(run, RUNTIMES[key][1], args.drop_n)
            results_of["drop"][RUNTIMES[key][1]] = res
            print(f"drop {res['device']}: median {res['median_drop']:.2f}, worst {res['worst_drop']:.2f} points "
                  f"({res['subnets']} subnets, {res['test_images']} test images)", flush=True)
    if "front_verified" in args.parts:
        res = do_front_verified(args.run, RUNTIMES[args.front_runtime][0], args.budget_ms or 1.0, args.verify_top_k)
        results_of["front_verified"] = doc["front_verified"] = res
        print(f"front_verified: fp32 points dominated by auto points {res['fp32_points_dominated_by_auto']}/"
              f"{len(res['points']['fp32'])}, auto by fp32 {res['auto_points_dominated_by_fp32']}/"
              f"{len(res['points']['auto'])}; medians {res['median_ms']} {res['median_top1']}", flush=True)
    if "front" in args.parts:
        res = do_front(run, RUNTIMES[args.front_runtime][0], args)
        results_of["front"] = doc["front"] = res
        print(f"front: {json.dumps({k: res[k] for k in ('search_fronts', 'common_pool', 'auto')})}", flush=True)

    versions = {d: dist_version(d) for d in ("torch", "onnxruntime", "openvino", "nncf")}
    doc["commands"] = [*doc.get("commands", []), {
        "command": cmd, "started": started, "seconds": round(time.perf_counter() - t0),
        "load_avg_1_5_15_before": [round(v, 2) for v in load0],
        "load_avg_1_5_15_after": [round(v, 2) for v in os.getloadavg()]}]
    doc["settings"].update({p: {k: getattr(args, k) for k in keys} for p, keys in {
        "bundles": ("subnets", "n", "rounds", "runs", "images"), "profile": ("n", "profile_rounds", "profile_runs"),
        "predictor": ("folds",), "repeat": ("n", "profile_rounds", "profile_runs"), "drop": ("drop_n",),
        "front": ("front_runtime", "accuracy_samples", "budget_ms")}.items() if p in args.parts})
    if "front" in args.parts:
        doc["settings"]["front"]["accuracy_from"] = None if args.accuracy_from is None else str(args.accuracy_from)
    doc.update({"benchmark": __doc__.splitlines()[0], "machine": platform.platform(),
                "cpus": os.cpu_count(), "threads": 1,
                "versions": {k: v for k, v in versions.items() if v}, "supernet": "shipped",
                "space": {"r": list(run.space.r_choices)}, "run": str(args.run)})
    order = ["benchmark", "commands", "machine", "cpus", "threads", "versions", "supernet", "space", "run",
             "settings", *PARTS, "earlier"]
    doc = {k: v for k, v in doc.items() if v != {}}
    atomic_write_json(args.out, {k: doc[k] for k in order if k in doc} | {k: v for k, v in doc.items()
                                                                         if k not in order})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
