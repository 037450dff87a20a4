"""ONNX Runtime INT8 calibration, compared: the top-1 drop of subnets of the shipped supernet by how the
activation ranges are calibrated (min/max or a percentile of each tensor's values), on how many
training images and which layers stay float (none, the stem convolution, stem and classifier),
everything else as hwnas's recipe (`hwnas.devices.quantize`: QDQ, per-channel
int8 weights, uint8 activations, the same op types). Each subnet is BN-recalibrated as export does,
exported to fp32 ONNX, quantized per setting, and run with the fp32 subnet on the whole test split.

    .venv/bin/python experiments/bench_int8_calibration.py max min r0 r1 r2
    CONFIGS="minmax:128:0:none,percentile:512:99.99:stem" ...   # method:images:percentile:float
    (method minmax or percentile; float none, stem (hwnas's default) or ends (stem and classifier))

Writes experiments/results/int8_calibration.json.
"""
import json, os, platform, sys, tempfile, time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from hwnas.devices.onnx_export import export_onnx
from hwnas.devices.quantize import quantize_onnx, stem_convolutions
from hwnas.supernet.bn import recalibrate_bn
from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader, resize_batch, spread_images
from hwnas.supernet.pretrained import data_config_of, load_supernet

torch.set_num_threads(1)
model, meta = load_supernet(None)
loaders = build_loaders(data_config_of(meta))
calib = calibration_loader(loaders.train, n_images=BN_IMAGES, seed=0)
which = sys.argv[1:] or ["max", "min", "r0", "r1", "r2"]
rows = []
DEFAULT = ("percentile:512:99.99:none,percentile:2000:99.99:none,percentile:512:99.99:stem,"
           "percentile:512:99.99:ends")
configs = [tuple(c.split(":")) for c in os.environ.get("CONFIGS", DEFAULT).split(",")]
configs = [(m, int(n), float(p), f) for m, n, p, f in configs]
for w in which:
    rnd = model.space.sample(3, np.random.default_rng(7))
    arch = {"max": model.space.max_arch(), "min": model.space.min_arch(), "r0": rnd[0], "r1": rnd[1], "r2": rnd[2]}[w]
    r = arch.r
    sub = recalibrate_bn(model.get_subnet(arch), calib, len(calib), resolution=r).eval()
    xs, ys = [], []
    for x, y in loaders.test:
        xs.append(resize_batch(x.float(), r)); ys.append(np.asarray(y))
    X, Y = torch.cat(xs), np.concatenate(ys)
    with torch.inference_mode():
        fp32 = sub(X).numpy().argmax(1)
    d = Path(tempfile.mkdtemp())
    export_onnx(sub, torch.zeros(1, 3, r, r), d / "fp32.onnx")
    fp32_model = onnx.load(str(d / "fp32.onnx"))
    stem = stem_convolutions(fp32_model)
    floats = {"none": [], "stem": stem, "ends": stem + [n.name for n in fp32_model.graph.node if n.op_type == "Gemm"]}
    print(w, arch.describe(), "fp32", 100 * (fp32 == Y).mean(), flush=True)
    for method, n, pct, keep in configs:
        imgs = spread_images(calib.dataset, n, r)[0]
        t = time.time()
        q = d / f"q_{method}_{n}_{pct}_{keep}.onnx"  # hwnas's own quantizer, only these settings differ
        quantize_onnx(d / "fp32.onnx", q, imgs, batch=1, percentile=pct if method == "percentile" else None,
                      keep_float=floats[keep])
        so = ort.SessionOptions(); so.intra_op_num_threads = 1
        s = ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])
        xn = X.numpy()
        pred = np.concatenate([s.run(None, {"input": xn[i:i + 1]})[0] for i in range(len(xn))]).argmax(1)
        rows.append({"subnet": w, "arch": arch.describe(), "method": method, "percentile": pct or None,
                     "images": n, "float": keep, "top1_fp32": float(100 * (fp32 == Y).mean()),
                     "top1_int8": float(100 * (pred == Y).mean()),
                     "drop": float(100 * ((fp32 == Y).mean() - (pred == Y).mean())),
                     "agreement": float((pred == fp32).mean()), "test_images": int(len(Y))})
        print(f"  {method:10s} {pct} n={n:4d} float={keep:5s}  int8 {100 * (pred == Y).mean():.2f}  drop "
              f"{100 * ((fp32 == Y).mean() - (pred == Y).mean()):.2f}  agree {(pred == fp32).mean():.4f}  "
              f"({time.time() - t:.0f} s)", flush=True)

out = Path(__file__).resolve().parent / "results" / "int8_calibration.json"
out.write_text(json.dumps({"benchmark": __doc__.splitlines()[0], "command": "python " + " ".join(sys.argv),
                           "configs": os.environ.get("CONFIGS"), "machine": platform.platform(),
                           "supernet": "shipped", "rows": rows}, indent=2))
