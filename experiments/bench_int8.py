"""INT8 vs fp32 on the shipped supernet, per runtime: latency, predictor, accuracy drop, front (1 thread).

Everything runs through hwnas's own code on one run directory (`--run`, made with
`hwnas.run.open_run` on the shipped supernet: its space's resolutions are 32..64) and one set of
subnets: the `--n` subnets `hwnas profile` picks (`select_subnets`, MACs-stratified, seed 0).
Parts (`--parts`, each merged into the results file on its own, so they can run one at a time):

- ``speedup``: for each runtime (ONNX Runtime `cpu-ort` / `cpu-ort-int8`, OpenVINO `cpu-openvino` /
  `cpu-openvino-int8`, ExecuTorch XNNPACK `mobile-xnnpack` / `mobile-xnnpack-int8`) and each subnet (the supernet's weights), compile fp32 and INT8 (calibrated
  on the run's training images, `CalibrationImages`, as profiling and export do; never test
  images), check the INT8 output against fp32, then time both with `hwnas.devices.measure`
  (warm-up by count and time, gc paused, 1 verified thread) in `--rounds` interleaved rounds
  (fp32 block, INT8 block, alternating order). A subnet's speed-up is the median over rounds of
  median(fp32 block) / median(INT8 block): a side-by-side ratio the machine's drift cancels out of.
  Per runtime: median speed-up, range, share >= 1.2x, int8_share. Where the runtime's own default
  precision is not fp32 (OpenVINO's CPU plugin runs bf16 by default on AVX512-BF16/AMX CPUs, and
  hwnas's `cpu-openvino` forces f32), the INT8 model is also timed against the fp32 model compiled
  with no precision hint (``vs_default_precision``: what an out-of-the-box deployment runs).
- ``profile``: `hwnas.profiling.stage.profile` of the same subnets on the INT8 and fp32 devices
  (the real profiler: reference interleaving, anchor, store), with `--profile-rounds/--profile-runs`.
- ``predictor``: held-out accuracy of the latency predictor on those measurements: `--folds`-fold
  cross-validation where each fold's predictor is `fit_best` (hwnas's own selection, with its own
  inner CV) on the other folds and scored on the held-out fold with `hwnas.latency.metrics.summary`
  (within +-5%, +-10%, Kendall tau over all subnets, each predicted once by a predictor that never
  saw it); then `fit_from_run` fits the run's predictor on all of them (what search uses). Also the
  profiler's own fp32 / INT8 ratio per subnet (`<runtime>_profiled_speedup`), a cross-check of ``speedup``.
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

    OMP_NUM_THREADS=1 nice .venv/bin/python experiments/bench_int8.py --n 30 --profile-fp32 openvino ort \
        --accuracy-from runs/quickstart                                            # everything, one go
    # the results file was made in parts (each merges into it; a run directory resumes):
    ... --parts speedup --n 30 --runtimes openvino ort --rounds 9 --runs 10 --stop-at 19:59
    ... --parts drop front --runtimes openvino ort --drop-n 8 --front-runtime openvino --accuracy-from runs/quickstart
    ... --parts profile predictor --n 30 --runtimes ort openvino --profile-fp32 ort openvino --run runs/bench-int8-d
    ... --parts speedup --n 30 --runtimes openvino --run runs/bench-int8-d     # + OpenVINO's default bf16
    ... --parts speedup --n 30 --runtimes xnnpack --run runs/bench-int8-d
    ... --parts repeat --n 30 --runtimes ort openvino --run runs/bench-int8-d --repeat-run runs/bench-int8-repeat
    ... --parts front_verified --front-runtime ort --budget-ms 1.0 --run runs/bench-int8-front  # a quickstart run + INT8

Writes experiments/results/int8.json (machine, versions, commands, settings) and prints tables.
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
RUNTIMES = {"ort": ("cpu-ort", "cpu-ort-int8"), "openvino": ("cpu-openvino", "cpu-openvino-int8"),
            "xnnpack": ("mobile-xnnpack", "mobile-xnnpack-int8")}
PARTS = ("speedup", "profile", "predictor", "repeat", "drop", "front", "front_verified")


def subnets(run, n: int):
    from hwnas.profiling.stage import select_subnets

    return select_subnets(run.space, n, seed=0, n_classes=run.n_classes)


# --- speedup -----------------------------------------------------------------------------------

def paired_speedup(fp, q, rounds: int, runs: int) -> tuple[float, float, float]:
    """(median speed-up over rounds, fp32 ms, int8 ms): interleaved blocks, alternating order."""
    from hwnas.devices import measure

    ratios, t_fp, t_q = [], [], []
    for r in range(rounds):
        first, second = (fp, q) if r % 2 == 0 else (q, fp)
        a = measure(first, runs=runs, warmup_runs=3, warmup_s=0.05).median_ms
        b = measure(second, runs=runs, warmup_runs=3, warmup_s=0.05).median_ms
        f, i = (a, b) if first is fp else (b, a)
        ratios.append(f / i)
        t_fp.append(f)
        t_q.append(i)
    return statistics.median(ratios), statistics.median(t_fp), statistics.median(t_q)


def _default_precision_backend(fp_backend):
    """(backend, precision) of the fp32 model as the runtime runs it with no precision hint, when
    that is not fp32: OpenVINO's CPU plugin defaults to bf16 on CPUs with AVX512-BF16/AMX (hwnas's
    `cpu-openvino` forces f32). (None, "fp32") otherwise."""
    if fp_backend.device.backend != "openvino":
        return None, "fp32"
    import openvino as ov

    hint = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    precision = {ov.Type.bf16: "bf16", ov.Type.f16: "fp16"}.get(hint, "fp32")
    if precision == "fp32":
        return None, precision
    from hwnas.devices import get_backend

    dev = fp_backend.device.model_copy(update={"name": f"{fp_backend.device.name}-{precision}",
                                              "precision": precision})
    return get_backend(dev), precision


def bench_speedup(key: str, run, archs, args) -> dict:
    from hwnas.devices import get_backend
    from hwnas.profiling.session import CalibrationImages
    from hwnas.supernet.pretrained import load_supernet

    fp_dev, q_dev = RUNTIMES[key]
    fp_backend, q_backend = get_backend(fp_dev), get_backend(q_dev)
    reason = fp_backend.available() or q_backend.available()
    if reason:
        print(f"{key}: skipped: {reason}")
        return {"devices": [fp_dev, q_dev], "skipped": reason}
    default_backend, default_precision = _default_precision_backend(fp_backend)
    model, _ = load_supernet(run.supernet)
    calib = CalibrationImages(run)()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for k, arch in enumerate(archs):
            if args.stop_at and time.strftime("%H:%M") >= args.stop_at:
                print(f"{key}: --stop-at {args.stop_at} reached after {k} subnets", flush=True)
                break
            net = model.get_subnet(arch).eval()
            x = torch.zeros(1, 3, arch.r, arch.r)
            t0 = time.perf_counter()
            fp = fp_backend.compile_and_load(net, x, work / arch.id / "fp32")
            q = q_backend.compile_and_load(net, x, work / arch.id / "int8", calibration=calib)
            compile_s = time.perf_counter() - t0
            probe = torch.nn.functional.interpolate(torch.from_numpy(calib[::16]), size=(arch.r, arch.r),
                                                    mode="bilinear", align_corners=False).numpy()
            diff = float(np.mean([np.abs(fp.run(p[None]) - q.run(p[None])).mean() for p in probe]))
            agree = float(np.mean([fp.run(p[None]).argmax() == q.run(p[None]).argmax() for p in probe]))
            speedup, fp_ms, q_ms = paired_speedup(fp, q, args.rounds, args.runs)
            meta = q.artifact.metadata
            row = {"id": arch.id, "r": arch.r, "speedup": round(speedup, 3), "fp32_ms": round(fp_ms, 4),
                   "int8_ms": round(q_ms, 4)}
            if default_backend is not None:  # the fp32 model as the runtime runs it out of the box
                dflt = default_backend.compile_and_load(net, x, work / arch.id / "default")
                vs, d_ms, q2_ms = paired_speedup(dflt, q, args.rounds, args.runs)
                row.update({"default_ms": round(d_ms, 4), "speedup_vs_default": round(vs, 3)})
                dflt.close()
            row.update({"int8_share": meta.get("int8_share"),
                   "int8_layers": meta.get("int8_layers"), "layers": meta.get("layers"),
                   "calibration": meta.get("calibration"), "mean_abs_logit_diff": round(diff, 5),
                   "top1_agreement_probe": agree, "compile_s": round(compile_s, 1)})
            rows.append(row)
            print(f"{key} {k + 1}/{len(archs)} r{arch.r} speed-up {speedup:.2f}x "
                  f"(fp32 {fp_ms:.3f} ms, int8 {q_ms:.3f} ms) int8_share {row['int8_share']}", flush=True)
            quantizer = meta.get("quantizer")
            fp.close()
            q.close()
            shutil.rmtree(work / arch.id, ignore_errors=True)
    if not rows:
        return {"devices": [fp_dev, q_dev], "skipped": f"--stop-at {args.stop_at} before the first subnet"}
    s = np.array([r["speedup"] for r in rows])
    shares = [r["int8_share"] for r in rows]
    summary = {"n": len(rows), "median_speedup": round(float(np.median(s)), 3),
               "min_speedup": round(float(s.min()), 3), "max_speedup": round(float(s.max()), 3),
               "p25_speedup": round(float(np.percentile(s, 25)), 3),
               "p75_speedup": round(float(np.percentile(s, 75)), 3),
               "share_at_least_1.2x": round(float(np.mean(s >= 1.2)), 3),
               "median_fp32_ms": round(float(np.median([r["fp32_ms"] for r in rows])), 4),
               "median_int8_ms": round(float(np.median([r["int8_ms"] for r in rows])), 4),
               "median_int8_share": float(np.median(shares)), "min_int8_share": float(min(shares)),
               "median_abs_logit_diff": float(np.median([r["mean_abs_logit_diff"] for r in rows])),
               "quantizer": quantizer, "resolutions": sorted({r["r"] for r in rows})}
    if default_backend is not None:
        v = np.array([r["speedup_vs_default"] for r in rows])
        summary["vs_default_precision"] = {
            "precision": default_precision, "median_speedup": round(float(np.median(v)), 3),
            "min_speedup": round(float(v.min()), 3), "max_speedup": round(float(v.max()), 3),
            "share_at_least_1.2x": round(float(np.mean(v >= 1.2)), 3),
            "median_default_ms": round(float(np.median([r["default_ms"] for r in rows])), 4),
            "note": "the fp32 model compiled with the runtime's own default inference precision (no "
                    "precision hint), which is what an out-of-the-box deployment of it runs"}
    return {"devices": [fp_dev, q_dev], "rounds": args.rounds, "runs": args.runs,
            "calibration": f"{len(calib)} training images (CalibrationImages)", "summary": summary, "rows": rows}


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
    m, y, _ = read_latency_table(df, "corrected_ms", run.space.width_mult, run.family.name)
    pred = np.full(len(y), np.nan)
    chosen = []
    order = np.random.default_rng(seed).permutation(len(y))
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        p, rep = fit_best(m[train], y[train], width_mult=run.space.width_mult, n_classes=run.n_classes,
                          seed=seed, family=run.family.name, device=device, target="corrected_ms")
        pred[test] = p.predict(m[test])
        chosen.append(rep["chosen"])
    metrics = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary(pred, y).items()}
    full, report = fit_from_run(run.run_dir, device, n_classes=run.n_classes, seed=seed)
    return {"subnets": int(len(y)), "folds": folds, "heldout": metrics, "fold_chosen": chosen,
            "ms_range": [round(float(y.min()), 4), round(float(y.max()), 4)],
            "fitted_on_all": {"chosen": report["chosen"], "cv": report["chosen_metrics"]}}


def profiled_speedup(run, fp_dev: str, q_dev: str) -> dict:
    """Cross-check of `speedup`: fp32 / INT8 of the profiler's own measurements (timing subnets with
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
    ap.add_argument("--n", type=int, default=30, help="subnets (speed-up, profiling)")
    ap.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=list(RUNTIMES))
    ap.add_argument("--rounds", type=int, default=9, help="interleaved fp32/int8 rounds (speedup)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per block (speedup)")
    ap.add_argument("--profile-rounds", type=int, default=15, help="profiler rounds (ProtocolSettings)")
    ap.add_argument("--profile-runs", type=int, default=10, help="profiler runs per round")
    ap.add_argument("--profile-fp32", nargs="*", default=[], choices=list(RUNTIMES),
                    help="also profile these runtimes' fp32 devices (front needs its runtime's)")
    ap.add_argument("--stop-at", default=None, help="HH:MM (machine time): speedup stops taking new subnets")
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
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)

    from hwnas.devices._imports import dist_version
    from hwnas.fileio import atomic_write_json
    from hwnas.run import open_run

    run = open_run(args.run)
    archs = subnets(run, args.n)
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
    if "speedup" in args.parts:
        for key in args.runtimes:
            results_of["speedup"][key] = bench_speedup(key, run, archs, args)
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

    for key, res in results_of["speedup"].items():
        if "summary" in res:
            s = res["summary"]
            print(f"{key:10} n={s['n']} median {s['median_speedup']:.2f}x range {s['min_speedup']:.2f}-"
                  f"{s['max_speedup']:.2f}x >=1.2x {s['share_at_least_1.2x']:.0%} "
                  f"int8_share {s['median_int8_share']:.2f}")
    versions = {d: dist_version(d) for d in ("torch", "onnxruntime", "openvino", "nncf")}
    doc["commands"] = [*doc.get("commands", []), {
        "command": cmd, "started": started, "seconds": round(time.perf_counter() - t0),
        "load_avg_1_5_15_before": [round(v, 2) for v in load0],
        "load_avg_1_5_15_after": [round(v, 2) for v in os.getloadavg()]}]
    doc["settings"].update({p: {k: getattr(args, k) for k in keys} for p, keys in {
        "speedup": ("n", "rounds", "runs"), "profile": ("n", "profile_rounds", "profile_runs"),
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
