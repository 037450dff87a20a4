"""Once-for-All's own supernets with every tensor random, and its BN recalibration recipe: the
reference the family and import tests compare hwnas against. Needs PyPI `ofa` (the dev extra);
the builders skip the test without it. (`tests/conftest.py` puts this folder on sys.path.)"""

from __future__ import annotations

import math

import pytest
import torch

MOBILENETS = dict(ks_list=[3, 5, 7], expand_ratio_list=[3, 4, 6], depth_list=[2, 3, 4])
RESNET50 = dict(depth_list=[0, 1, 2], expand_ratio_list=[0.2, 0.25, 0.35], width_mult_list=[0.65, 0.8, 1.0])
#: Once-for-All's class (`Family.ofa_class`) -> its published choices at a width multiplier
#: (ResNet50's widths are genes: its constructor takes no width_mult)
PUBLISHED_CHOICES = {
    "OFAMobileNetV3": lambda width: {**MOBILENETS, "width_mult": width},
    "OFAProxylessNASNets": lambda width: {**MOBILENETS, "width_mult": width},
    "OFAResNets": lambda width: RESNET50,
}
# the last convolution of a block (and shortcuts) feeds no activation: fan-in gain 1, else 2
_LINEAR_OUT = ("point_linear", "conv3", "downsample")


@torch.no_grad()
def randomise_(net: torch.nn.Module) -> torch.nn.Module:
    """Every tensor random, activations near 1 in every subnet: convolutions and the classifier
    fan-in scaled, BN affine and running statistics, biases, and kernel-transformation matrices
    perturbed from identity (where a dropped or transposed transform would go unseen)."""
    for name, p in net.named_parameters():
        if name.endswith("_matrix"):
            p.add_(0.2 * torch.randn_like(p))
        elif p.dim() == 4:
            gain = 1.0 if any(part in name for part in _LINEAR_OUT) else 2.0
            p.normal_(0.0, math.sqrt(gain / p[0].numel()))
        elif p.dim() == 2:
            p.normal_(0.0, math.sqrt(1.0 / p.shape[1]))
        elif name.endswith("bn.weight"):
            p.uniform_(0.5, 1.5)
        else:
            p.normal_(0.0, 0.1)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_(0.0, 0.1)
            m.running_var.uniform_(0.5, 2.0)
            m.num_batches_tracked.fill_(int(torch.randint(1, 1000, ())))
    return net


def _networks():
    return pytest.importorskip("ofa.imagenet_classification.elastic_nn.networks",
                               reason="Once-for-All's code (pip extra dev: ofa) is not installed")


def official_supernet(ofa_class: str, width: float, n_classes: int = 1000, seed: int = 0,
                      randomise: bool = True):
    """Once-for-All's `ofa_class` supernet with its published choices at `width`."""
    if ofa_class not in PUBLISHED_CHOICES:
        pytest.fail(f"tests/ofa_reference.py has no published choices of Once-for-All's {ofa_class}; add them")
    torch.manual_seed(seed)
    net = getattr(_networks(), ofa_class)(n_classes=n_classes, dropout_rate=0, **PUBLISHED_CHOICES[ofa_class](width))
    return (randomise_(net) if randomise else net).eval()


def official_proxyless(width: float = 1.3, n_classes: int = 1000, seed: int = 0, randomise: bool = True):
    return official_supernet("OFAProxylessNASNets", width, n_classes, seed, randomise)


def official_resnet50(n_classes: int = 1000, seed: int = 0, randomise: bool = True):
    return official_supernet("OFAResNets", 1.0, n_classes, seed, randomise)


def images(n: int, r: int) -> torch.Tensor:
    """Smooth random images (coarse noise upsampled, plus fine noise): unlike white noise, their
    pooled features differ from image to image, so outputs depend on the input."""
    coarse = torch.nn.functional.interpolate(torch.randn(n, 3, 8, 8), size=(r, r), mode="bilinear",
                                             align_corners=False)
    return 2.0 * coarse + 0.2 * torch.randn(n, 3, r, r)


def recalibrate_(net: torch.nn.Module, arch: dict) -> None:
    """Once-for-All's evaluation recipe: fresh BN statistics for one subnet (`arch`: its arch dict
    with "r"; cumulative average over two batches of `images`) in the official supernet; the rest
    of the supernet keeps its values."""
    bns = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    net.set_active_subnet(**{k: v for k, v in arch.items() if k != "r"})
    with torch.no_grad():
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        net.train()
        for _ in range(2):
            net(images(8, arch["r"][0]))
    for m in bns:
        m.momentum = 0.1
    net.eval()
