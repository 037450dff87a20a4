"""Once-for-All's published supernets import into hwnas and compute the same subnets.

Once-for-All's own code (PyPI `ofa`, a dev-only dependency) builds official OFA-MobileNetV3 supernets
at both published widths with random weights, BN statistics and kernel-transformation matrices;
the checkpoint file is what `ofa_net(..., pretrained=True)` loads. hwnas imports it and its subnets
must give the official outputs for random ks/e/d at random resolutions. Broken files are one line,
exit 2, and nothing is written.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ofa_networks = pytest.importorskip("ofa.imagenet_classification.elastic_nn.networks",
                                   reason="Once-for-All's code (pip extra dev: ofa) is not installed")

from ofa_reference import images, randomise_, recalibrate_  # noqa: E402

from hwnas.families import DEFAULT_FAMILY, get_family  # noqa: E402
from hwnas.space import Arch, SearchSpace  # noqa: E402
from hwnas.supernet.checkpoint import checkpoint_paths  # noqa: E402
from hwnas.supernet.ofa_import import import_ofa_checkpoint  # noqa: E402
from hwnas.supernet.ofa_mbv3 import OFAMobileNetV3  # noqa: E402
from hwnas.supernet.pretrained import load_supernet  # noqa: E402

ROOT = Path(__file__).parents[2]
WIDTHS = (1.0, 1.2)
TOL = 1e-4
KS, E, D = (3, 5, 7), (3, 4, 6), (2, 3, 4)


def official_net(width: float, seed: int = 0):
    """An official OFAMobileNetV3 (the layout of the published checkpoints) with everything random:
    weights (variance-preserving, so every subnet's activations stay near 1), BN affine and running
    statistics, SE and classifier biases, and the kernel-transformation matrices (identity at init,
    where a dropped or transposed transform would go unseen)."""
    torch.manual_seed(seed)
    net = ofa_networks.OFAMobileNetV3(n_classes=1000, dropout_rate=0, width_mult=width,
                                      ks_list=list(KS), expand_ratio_list=list(E), depth_list=list(D))
    randomise_(net)
    return net.eval()


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """{width: (official net, its checkpoint file as ofa_net loads it)}."""
    folder = tmp_path_factory.mktemp("ofa")
    out = {}
    for i, w in enumerate(WIDTHS):
        net = official_net(w, seed=i)
        path = folder / f"ofa_mbv3_d234_e346_k357_w{w}"
        torch.save({"state_dict": net.state_dict(), "epoch": 180, "best_acc": 80.0}, path)
        out[w] = (net, path)
    return out


@pytest.fixture(scope="module")
def imported(official, tmp_path_factory):
    """{width: hwnas checkpoint stem}: W=1.0 through `python -m hwnas`, W=1.2 through the API."""
    folder = tmp_path_factory.mktemp("hwnas")
    stems = {w: folder / f"ofa_w{w}" for w in WIDTHS}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HWNAS_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-m", "hwnas", "supernet", "import", "--from-ofa",
                           str(official[1.0][1]), "--family", "ofa-mbv3", "--width-mult", "1.0",
                           "--out", str(stems[1.0])], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr
    import_ofa_checkpoint(official[1.2][1], stems[1.2], width_mult=1.2, family="ofa-mbv3")
    return stems


def rel_diff(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_is_the_official_state_dict(width):
    ref = {k: tuple(v.shape) for k, v in official_net(width).state_dict().items()}
    ours = {k: tuple(v.shape) for k, v in OFAMobileNetV3(SearchSpace(width_mult=width)).state_dict().items()}
    assert get_family(DEFAULT_FAMILY).ofa_layout(width) == ref == ours
    assert len(ref) == 475


def test_import_writes_an_imagenet_checkpoint(imported):
    for w, stem in imported.items():
        meta = json.loads(checkpoint_paths(stem).meta.read_text())
        assert meta["extra"]["family"] == "ofa-mbv3" and meta["extra"]["width_mult"] == w
        assert meta["n_classes"] == 1000 and meta["dataset"] == "imagenet"
        assert meta["class_names"] == [str(i) for i in range(1000)]
        assert meta["mean"] == [0.485, 0.456, 0.406] and meta["std"] == [0.229, 0.224, 0.225]
        assert meta["space"] == {"ks": [3, 5, 7], "e": [3, 4, 6], "d": [2, 3, 4],
                                 "r": list(range(128, 225, 4)), "width_mult": w}
        assert not checkpoint_paths(stem).state_weights.exists()  # weights only, no training state


def features(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A static subnet's feature maps before pooling (hwnas and OFA name these parts alike): every
    block's error shows here, where global pooling cannot average it away."""
    x = net.first_conv(x)
    for block in net.blocks:
        x = block(x)
    return net.final_expand_layer(x)


@pytest.mark.parametrize("width", WIDTHS)
def test_subnets_compute_what_once_for_all_computes(official, imported, width):
    net, _ = official[width]
    model, meta = load_supernet(imported[width])
    rng = np.random.default_rng(int(width * 10))
    configs = [(list(KS[-1:]) * 20, [6] * 20, [4] * 5), ([3] * 20, [3] * 20, [2] * 5)]
    configs += [(rng.choice(KS, 20).tolist(), rng.choice(E, 20).tolist(), rng.choice(D, 5).tolist())
                for _ in range(6)]
    worst = {"logits": 0.0, "features": 0.0}
    with torch.no_grad():
        for ks, e, d in configs:
            r = int(rng.choice(range(128, 161, 4)))
            x = images(2, r)
            net.set_active_subnet(ks=ks, e=e, d=d)
            ref_net = net.get_active_subnet(preserve_weight=True).eval()
            ref, ref_maps = ref_net(x), features(ref_net, x)
            assert rel_diff(net(x), ref) <= TOL  # official: dynamic == static
            arch = Arch.from_ofa_dict({"ks": ks, "e": e, "d": d, "r": [r]}, w=width)
            sub = model.get_subnet(arch).eval()
            model.set_active_subnet(arch)
            worst["logits"] = max(worst["logits"], rel_diff(sub(x), ref), rel_diff(model(x), ref))
            worst["features"] = max(worst["features"], rel_diff(features(sub, x), ref_maps))
    print(f"W={width}: worst relative difference over {len(configs)} subnets: logits "
          f"{worst['logits']:.2e}, feature maps {worst['features']:.2e}")
    assert max(worst.values()) <= TOL


@pytest.mark.parametrize("width", WIDTHS)
def test_recalibrated_subnets_match_where_outputs_depend_on_the_input(official, tmp_path, width):
    """With random BN statistics the output of a small subnet hardly depends on its input (random
    networks forget it), which would make agreement cheap. With BN recalibrated for the subnet (as
    Once-for-All evaluates subnets) and the file imported again, outputs depend on the input and
    still agree."""
    net = copy.deepcopy(official[width][0])
    rng = np.random.default_rng(int(width * 100))
    configs = [([3] * 20, [3] * 20, [2] * 5)]
    configs += [(rng.choice(KS, 20).tolist(), rng.choice(E, 20).tolist(), rng.choice(D, 5).tolist())
                for _ in range(2)]
    worst, spread = 0.0, float("inf")
    for i, (ks, e, d) in enumerate(configs):
        r = int(rng.choice(range(128, 161, 4)))
        recalibrate_(net, {"ks": ks, "e": e, "d": d, "r": [r]})
        torch.save({"state_dict": net.state_dict()}, tmp_path / f"ofa_{i}.pth")
        import_ofa_checkpoint(tmp_path / f"ofa_{i}.pth", tmp_path / f"hwnas_{i}", width_mult=width, family="ofa-mbv3")
        model, _ = load_supernet(tmp_path / f"hwnas_{i}")
        x = images(2, r)
        with torch.no_grad():
            ref_net = net.get_active_subnet(preserve_weight=True).eval()
            sub = model.get_subnet(Arch.from_ofa_dict({"ks": ks, "e": e, "d": d, "r": [r]}, w=width)).eval()
            ref, ref_maps = ref_net(x), features(ref_net, x)
            worst = max(worst, rel_diff(sub(x), ref), rel_diff(features(sub, x), ref_maps))
            spread = min(spread, rel_diff(ref[0], ref[1]))
            assert rel_diff(ref_maps[0], ref_maps[1]) > 0.1, "the feature maps ignore the input"
            assert spread > 100 * TOL, "the logits ignore the input"
    print(f"W={width}: worst relative difference over {len(configs)} recalibrated subnets: {worst:.2e} "
          f"(two images' logits differ by {spread:.2e} or more)")
    assert worst <= TOL


def test_the_comparison_sees_the_kernel_transform(official, imported):
    """Identity kernel-transformation matrices change ks=3/5 subnets far beyond the tolerance: the
    check above would catch an import that dropped or transposed them."""
    net, _ = official[1.0]
    model, _ = load_supernet(imported[1.0])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("_matrix"):
                p.copy_(torch.eye(p.shape[0]))
        ks, e, d = [3, 5] * 10, [4] * 20, [3] * 5
        net.set_active_subnet(ks=ks, e=e, d=d)
        x = images(2, 128)
        ours = model.get_subnet(Arch.from_ofa_dict({"ks": ks, "e": e, "d": d, "r": [128]})).eval()
        ref = net.get_active_subnet(preserve_weight=True).eval()
        assert rel_diff(ours(x), ref(x)) > 10 * TOL
        assert rel_diff(features(ours, x), features(ref, x)) > 100 * TOL


def test_hwnas_never_imports_once_for_all():
    pattern = re.compile(r"^\s*(from|import)\s+ofa\b", re.M)
    offenders = [str(p) for p in (ROOT / "hwnas").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_bare_dataparallel_and_legacy_files_import(official, tmp_path):
    net, _ = official[1.0]
    state = net.state_dict()
    for name, obj in (("bare", state), ("dp", {"state_dict": {f"module.{k}": v for k, v in state.items()}}),
                      ("no_counters", {k: v for k, v in state.items() if "num_batches_tracked" not in k}),
                      ("legacy", {"state_dict": state, "epoch": 1})):
        # "legacy": the pre-1.6 (non-zip) format, as files saved in 2019-2020 may be
        torch.save(obj, tmp_path / name, _use_new_zipfile_serialization=name != "legacy")
        import_ofa_checkpoint(tmp_path / name, tmp_path / f"out_{name}", width_mult=1.0, family="ofa-mbv3")
        model, _ = load_supernet(tmp_path / f"out_{name}")
        assert torch.equal(model.classifier.linear.weight, state["classifier.linear.weight"])


# -- broken files: one line, exit 2, nothing written ----------------------------------------
def cli(capsys, *args: str) -> tuple[int, list[str]]:
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    return done.value.code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


class Opaque:  # a class weights_only=True refuses to build
    def __init__(self):
        self.lr = 0.1


def _broken(kind: str, official, path: Path) -> tuple[Path, str]:
    """Write a broken file of `kind`; return it and the --width-mult to import it with."""
    state = dict(official[1.0][0].state_dict())
    if kind == "missing":
        del state["blocks.7.conv.depth_conv.conv.5to3_matrix"]
    elif kind == "extra":
        state["blocks.21.conv.point_linear.conv.conv.weight"] = torch.zeros(1)
    elif kind == "shape":
        state["classifier.linear.weight"] = torch.zeros(10, 1280)
    elif kind == "nan":
        state["blocks.3.conv.depth_conv.bn.bn.running_var"] = torch.full((144,), float("nan"))
    if kind == "wrong-width":
        return official[1.2][1], "1.0"
    if kind == "wrong-width-1.2":
        return official[1.0][1], "1.2"
    if kind == "pickle":
        torch.save({"state_dict": state, "args": Opaque()}, path)
    elif kind == "garbage":
        path.write_bytes(b"<html>404 Not Found</html>\n" * 40)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-a-dict":
        torch.save([t for t in state.values()], path)
    else:
        torch.save({"state_dict": state}, path)
    return path, "1.0"


@pytest.mark.parametrize("kind, expected", [
    ("missing", r"lacks 1 tensor\(s\) .*first blocks\.7\.conv\.depth_conv\.conv\.5to3_matrix"),
    ("extra", r"has 1 tensor\(s\) that OFA-MobileNetV3 W=1\.0 does not, first blocks\.21\."),
    ("shape", r"classifier\.linear\.weight is \[10, 1280\] but OFA-MobileNetV3 W=1\.0 needs \[1000, 1280\]"),
    ("nan", r"running_var holds NaN"),
    ("wrong-width", r"first_conv\.conv\.weight is \[24, 3, 3, 3\] but .* W=1\.0 needs \[16, 3, 3, 3\];"
                    r" the file looks like OFA-MobileNetV3 W=1\.2 \(--family ofa-mbv3 --width-mult 1\.2\)"),
    ("wrong-width-1.2", r"W=1\.2 needs \[24, 3, 3, 3\]; the file looks like OFA-MobileNetV3 W=1\.0"),
    ("pickle", r"a pickle that needs code to load \(.*Opaque\).*weights_only=True"),
    ("garbage", r"not a (weights-only )?PyTorch checkpoint"),
    ("empty", r"is empty"),
    ("not-a-dict", r"holds a list, not a state dict"),
])
def test_broken_files_are_one_line_and_write_nothing(official, tmp_path, capsys, kind, expected):
    src, width = _broken(kind, official, tmp_path / f"{kind}.pth")
    out = tmp_path / "out" / "supernet"
    out.parent.mkdir()
    code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(src), "--family", "ofa-mbv3",
                      "--width-mult", width, "--out", str(out))
    assert code == 2 and len(lines) == 1, (code, lines)
    assert re.search(expected, lines[0]), lines[0]
    assert "Traceback" not in lines[0]
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("args, expected", [
    (["--width-mult", "1.3"], r"--width-mult 1\.3 is not a published OFA-MobileNetV3 width"),
    (["--family", "ofa-resnet50"], r"OFA-ResNet50 W=1\.0.*looks like OFA-MobileNetV3 W=1\.0 \(--family ofa-mbv3"),
    (["--family", "ofa-vit"], r"unknown family 'ofa-vit'"),
])
def test_bad_options_are_one_line(official, tmp_path, capsys, args, expected):
    code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(official[1.0][1]),
                      "--out", str(tmp_path / "s"), *args)
    assert code == 2 and len(lines) == 1 and re.search(expected, lines[0]), lines
    assert list(tmp_path.iterdir()) == []


def test_a_family_without_a_once_for_all_original_has_nothing_to_import(official, tmp_path, capsys):
    from family_runs import family_in_registry, tiny_family_class

    name = tiny_family_class().name
    with family_in_registry(name):
        code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(official[1.0][1]),
                          "--out", str(tmp_path / "s"), "--family", name)
    assert code == 2 and len(lines) == 1 and "has no Once-for-All original" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_existing_checkpoint_is_kept_without_overwrite(official, imported, capsys):
    before = checkpoint_paths(imported[1.2]).meta.read_bytes()
    code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(official[1.0][1]),
                      "--out", str(imported[1.2]))
    assert code == 2 and len(lines) == 1 and "already exists" in lines[0]
    assert checkpoint_paths(imported[1.2]).meta.read_bytes() == before


def test_a_run_can_be_made_from_the_imported_supernet(imported, tmp_path, capsys):
    """`hwnas profile --run DIR --supernet STEM` pins it (open_run); evaluating needs ImageNet,
    which hwnas has no loader for: one line, exit 2, not a crash."""
    from hwnas.run import open_run

    cfg = open_run(tmp_path / "run", imported[1.2])
    assert cfg.n_classes == 1000 and cfg.space.width_mult == 1.2 and cfg.space.r_choices[0] == 128
    arch = SearchSpace(width_mult=1.0).min_arch(128)
    code, lines = cli(capsys, "supernet", "eval", "--checkpoint", str(imported[1.0]), "--arch", arch.to_json())
    assert code == 2 and len(lines) == 1 and "'imagenet'" in lines[0], lines
