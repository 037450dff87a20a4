"""Issue 32 item 11: a checkpoint with NaN weights whose hashes were updated to match passed
`supernet eval` (exit 0, top-1 10%, blank loss). Non-finite weights are refused at load."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file


def test_nan_weights_with_matching_hashes_are_refused_in_one_line(tmp_path, tiny_supernet):
    stem = tmp_path / "nan"
    for suffix in (".json", ".safetensors"):
        (tmp_path / f"nan{suffix}").write_bytes(tiny_supernet.with_suffix(suffix).read_bytes())
    tensors = load_file(f"{stem}.safetensors")
    key = next(k for k in tensors if k.startswith("classifier") and tensors[k].is_floating_point())
    tensors[key] = torch.full_like(tensors[key], float("nan"))
    save_file(tensors, f"{stem}.safetensors")
    meta = json.loads(stem.with_suffix(".json").read_text())
    data = stem.with_suffix(".safetensors").read_bytes()
    meta["weights"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))  # a careful forger
    stem.with_suffix(".json").write_text(json.dumps(meta))

    arch = '{"ks": [3], "e": [3], "d": [2], "r": [32]}'
    proc = subprocess.run([sys.executable, "-m", "hwnas", "supernet", "eval", "--checkpoint", str(stem),
                           "--arch", arch, "--data", "mnist-embedded"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-500:] + proc.stderr[-1500:]
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "non-finite" in lines[0], proc.stderr
