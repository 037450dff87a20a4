"""Ship a finished supernet training run as the package's default supernet.

    .venv/bin/python experiments/ship_supernet.py --run runs/supernet-fashion
    .venv/bin/python experiments/ship_supernet.py --run runs/supernet-fashion-stage3 --continues

Writes hwnas/assets/<name>.safetensors (fp16 weights, no optimizer state), <name>.json and
<name>_train_log.jsonl. The run was trained on the original files (`fashion-mnist:PATH`); the shipped
checkpoint names the embedded copy instead (`root: null`), which holds the same validation images
(the same seeded split) and the whole official test set, so evaluation after install needs no
download and no apt package. `--continues`: the run continued the shipped supernet (`hwnas train
--init-from shipped`), so its log is appended to the shipped log as the next stage. Then point `SHIPPED_NAME` in hwnas/supernet/pretrained.py at it.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from hwnas.supernet.checkpoint import load_checkpoint_meta
from hwnas.supernet.pretrained import ship_checkpoint

ASSETS = Path(__file__).resolve().parent.parent / "hwnas" / "assets"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="training run folder (holds supernet.*)")
    ap.add_argument("--name", default="supernet_fashion", help="asset name (default: %(default)s)")
    ap.add_argument("--continues", action="store_true",
                    help="the run continued the shipped supernet: append its log as the next stage")
    args = ap.parse_args()

    meta = load_checkpoint_meta(args.run / "supernet")
    if not meta.get("extra", {}).get("state", {}).get("done"):
        raise SystemExit(f"{args.run} has not finished training; resume it first")
    log = ASSETS / f"{args.name}_train_log.jsonl"
    earlier = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if args.continues else []
    dest = ship_checkpoint(args.run / "supernet", ASSETS / args.name, embedded_data=True)
    if earlier:
        stage = max(int(e.get("stage", 1)) for e in earlier) + 1
        new = [json.loads(line) for line in (args.run / "train_log.jsonl").read_text().splitlines() if line.strip()]
        log.write_text("".join(json.dumps(e) + "\n" for e in earlier + [{**e, "stage": stage} for e in new]))
    else:
        shutil.copyfile(args.run / "train_log.jsonl", log)
    size = sum(p.stat().st_size for p in ASSETS.glob(f"{args.name}.*"))
    print(f"shipped {dest} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
