"""Summarise a supernet training run: where accuracy is kept or lost, phase by phase.

From the run's train_log.jsonl: the last epoch of every phase (validation top-1 of the phase's
largest, smallest and one fixed random subnet, as logged during training). Then, measured now with
the current evaluation (BN recalibrated on BN_IMAGES training images, test split): the largest,
smallest and --n random subnets of the teacher (the end of phase "full") and of the final supernet.

    .venv/bin/python experiments/summarize_training.py --run runs/supernet-fashion --out experiments/results/supernet_fashion_training.json

    .venv/bin/python experiments/summarize_training.py --stem hwnas/assets/supernet_fashion --n 12

(--stem without the run folder, e.g. on a fresh clone: the shipped checkpoint's own training log
and meta stand in for the run's.) Writes the --out file (default:
experiments/results/supernet_fashion_training.json). A run with
in-place distillation has no frozen teacher: its "after full" block is then left out.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "supernet_fashion_training.json"


def _evaluate(stem: Path, n: int, space=None) -> dict:
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    model, meta = load_supernet(stem)
    space = space or model.space
    archs = [space.max_arch(), space.min_arch(), *space.sample(n, np.random.default_rng(0))]
    rows = evaluate_subnets(model, archs, build_loaders(data_config_of(meta)), split="test")
    top1 = [r["top1"] for r in rows]
    out = {"max": top1[0], "min": top1[1], "archs": [a.describe() for a in archs]}
    if n:
        out.update(random=top1[2:], random_mean=float(np.mean(top1[2:])), random_min=float(np.min(top1[2:])))
    return out


def main() -> None:
    from hwnas.space import SearchSpace

    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=Path("runs/supernet-fashion"))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--n", type=int, default=8, help="random subnets evaluated per checkpoint")
    ap.add_argument("--stem", type=Path, default=None,
                    help="evaluate this checkpoint as the final one (e.g. the shipped fp16 asset "
                         "hwnas/assets/supernet_fashion); default: the run's own")
    args = ap.parse_args()
    if args.run.is_dir():
        log_file, meta_file = args.run / "train_log.jsonl", args.run / "supernet.json"
    elif args.stem is not None:  # the run folder is gone (runs/ is not kept): the shipped log and meta
        log_file = args.stem.parent / f"{args.stem.name}_train_log.jsonl"
        meta_file = args.stem.parent / f"{args.stem.name}.json"
    else:
        print(f"{args.run} does not exist: name the training run with --run, or a shipped checkpoint "
              "with --stem (e.g. hwnas/assets/supernet_fashion)", file=sys.stderr)
        raise SystemExit(2)
    log = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    per_phase: dict[str, dict] = {}
    for rec in log:
        per_phase[rec["phase"]] = rec
    final_meta = json.loads(meta_file.read_text())
    config = final_meta.get("extra", {}).get("config", {})
    full_space = SearchSpace.from_dict(final_meta["space"])
    teacher_space = SearchSpace.from_dict({**full_space.to_dict(), "ks": [max(full_space.ks_choices)],
                                           "e": [max(full_space.e_choices)], "d": [max(full_space.d_choices)]})
    result = {
        "command": "python " + " ".join(sys.argv),
        "run": str(args.run) if args.run.is_dir() else None, "final_checkpoint": str(args.stem or args.run / "supernet"), "config": config,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "per_phase_last_epoch_val": per_phase,
        "note": ("per-phase numbers are the training log's quick validation top-1 (a few validation "
                 "batches, as the run trained); the measured_now block is the full evaluation (test "
                 "split, BN recalibrated on hwnas.supernet.data.BN_IMAGES = 2000 training images)"),
        "measured_now_test": {
            **({"after_full (teacher: k7 e6 d4, every r)": _evaluate(args.run / "teacher", 0, teacher_space)}
               if (args.run / "teacher.json").is_file() else {}),
            "final": _evaluate(args.stem or args.run / "supernet", args.n),
        },
        "epochs": len(log),
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["measured_now_test"], indent=2))


if __name__ == "__main__":
    main()
