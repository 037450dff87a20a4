"""The elastic supernet: subnet extraction is exact, channel sorting is function-preserving,
kernel transformation and elastic BN behave as Once-for-All's."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from hwnas.errors import InputError
from hwnas.space import Arch, SearchSpace
from hwnas.supernet import MobileNetV3Subnet, OFAMobileNetV3
from hwnas.supernet.layers import DynamicBatchNorm2d, DynamicSeparableConv2d, set_bn_param

SMALL = SearchSpace(r_choices=tuple(range(40, 65, 4)))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Two-thread torch collapses when another process holds a core (shared CI machines): use one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def images(n: int, r: int, seed: int) -> torch.Tensor:
    """Structured inputs: smooth random patterns + per-image brightness + a little noise."""
    g = torch.Generator().manual_seed(seed)
    x = F.interpolate(torch.randn(n, 3, 4, 4, generator=g), size=(r, r), mode="bilinear", align_corners=False)
    return x + 0.3 * torch.randn(n, 3, r, r, generator=g) + torch.randn(n, 1, 1, 1, generator=g)


def perturb(net: nn.Module, seed: int = 0) -> None:
    """Move kernel-transform matrices off identity and BN/SE affine terms off their init values,
    so that extraction and sorting are tested on weights that matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("_matrix") or p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))


def calibrate(net: OFAMobileNetV3, arch: Arch, batches: int = 3) -> None:
    """Fresh cumulative BN statistics for `arch` (train-mode forwards, momentum=None), then eval."""
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
    set_bn_param(net, None, 1e-5)
    net.set_active_subnet(arch)
    net.train()
    with torch.no_grad():
        for i in range(batches):
            net(images(16, arch.r, seed=i))
    net.eval()


@pytest.fixture(scope="module")
def supernet() -> OFAMobileNetV3:
    torch.manual_seed(0)
    net = OFAMobileNetV3(SMALL, n_classes=10)
    perturb(net)
    return net


EXTRACT_ARCHS = [SMALL.max_arch(64), SMALL.min_arch(48)] + SMALL.sample(4, rng=7)


@pytest.mark.parametrize("arch", EXTRACT_ARCHS, ids=lambda a: a.id)
def test_get_subnet_equals_active_supernet(supernet: OFAMobileNetV3, arch: Arch) -> None:
    calibrate(supernet, arch)
    assert supernet.blocks[0].conv.depth_conv.bn.running_var.sub(1).abs().max() > 1e-3  # stats are real
    sub = supernet.get_subnet(arch)
    assert not sub.training
    x = images(8, arch.r, seed=100)
    with torch.no_grad():
        expected, got = supernet(x), sub(x)
    assert expected.std(dim=0).max() > 1e-3, "outputs do not vary across inputs: the check proves nothing"
    assert (expected - got).abs().max() <= 1e-5
    assert supernet.active_arch() == arch  # extraction leaves the active subnet alone


def test_subnet_is_static_and_independent(supernet: OFAMobileNetV3) -> None:
    arch = SMALL.sample(rng=11)
    sub = supernet.get_subnet(arch)
    allowed = (nn.Conv2d, nn.BatchNorm2d, nn.Linear, nn.ReLU, nn.Hardswish, nn.Hardsigmoid, nn.Dropout)
    leaves = [m for m in sub.modules() if not list(m.children())]
    assert leaves and all(isinstance(m, allowed) for m in leaves)
    assert not any("matrix" in k for k in sub.state_dict())
    assert len(sub.blocks) == 1 + sum(arch.d)
    assert sub.arch == arch
    before = supernet.blocks[1].conv.point_linear.conv.conv.weight.clone()
    with torch.no_grad():
        sub.blocks[1].conv.point_linear.conv.weight.zero_()
    assert torch.equal(supernet.blocks[1].conv.point_linear.conv.conv.weight, before)


def test_sort_channels_keeps_max_net_and_orders_by_importance() -> None:
    torch.manual_seed(1)
    net = OFAMobileNetV3(SMALL, n_classes=10)
    perturb(net, seed=1)
    calibrate(net, SMALL.max_arch(48))
    net.double()  # float64: permuting sums must agree to rounding, not to float32 noise
    other = SMALL.sample(rng=3)
    x = images(6, 48, seed=100).double()
    with torch.no_grad():
        net.set_max_net()
        before = net(x)
        net.set_active_subnet(other)
        other_before = net(x)
        net.sort_channels()
        net.set_max_net()
        after = net(x)
        net.set_active_subnet(other)
        other_after = net(x)
    assert before.std(dim=0).max() > 1e-3
    assert (before - after).abs().max() <= 1e-9
    assert (other_before - other_after).abs().max() > 1e-6  # smaller subnets now keep other channels
    for block in net.blocks[1:]:
        importance = block.conv.point_linear.conv.conv.weight.abs().sum(dim=(0, 2, 3))
        assert torch.all(importance[:-1] >= importance[1:])
        if block.conv.use_se:
            se_importance = block.conv.depth_conv.se.fc.expand.weight.abs().sum(dim=(0, 2, 3))
            assert torch.all(se_importance[:-1] >= se_importance[1:])


def test_kernel_transformation_chain() -> None:
    torch.manual_seed(2)
    conv = DynamicSeparableConv2d(4, [3, 5, 7])
    w7 = conv.conv.weight
    assert torch.equal(conv.active_weight(4, 5), w7[:, :, 1:6, 1:6])  # identity init: plain centre crop
    assert torch.equal(conv.active_weight(2, 3), w7[:2, :, 2:5, 2:5])
    with torch.no_grad():
        conv.get_parameter("7to5_matrix").copy_(torch.randn(25, 25))
        conv.get_parameter("5to3_matrix").copy_(torch.randn(9, 9))
    w5 = (w7[:, :, 1:6, 1:6].reshape(4, 25) @ conv.get_parameter("7to5_matrix").T).view(4, 1, 5, 5)
    w3 = (w5[:, :, 1:4, 1:4].reshape(4, 9) @ conv.get_parameter("5to3_matrix").T).view(4, 1, 3, 3)
    assert torch.allclose(conv.active_weight(4, 5), w5)
    assert torch.allclose(conv.active_weight(4, 3), w3)
    y = conv(torch.randn(1, 4, 9, 9), kernel_size=3)
    assert y.shape == (1, 4, 9, 9)
    y.sum().backward()
    assert conv.get_parameter("7to5_matrix").grad.abs().sum() > 0
    assert conv.get_parameter("5to3_matrix").grad.abs().sum() > 0


def test_dynamic_bn_updates_only_active_channels() -> None:
    bn = DynamicBatchNorm2d(8)
    bn.train()
    bn(torch.randn(4, 5, 3, 3) + 2.0)
    assert torch.all(bn.bn.running_mean[:5] > 0.1)
    assert torch.all(bn.bn.running_mean[5:] == 0)
    assert int(bn.bn.num_batches_tracked) == 1


def test_training_step_reaches_elastic_weights() -> None:
    net = OFAMobileNetV3(SMALL, n_classes=10)
    net.set_min_net()
    net.train()
    loss = F.cross_entropy(net(images(4, 40, seed=0)), torch.arange(4))
    loss.backward()
    matrix = net.blocks[1].conv.depth_conv.conv.get_parameter("5to3_matrix")
    assert matrix.grad is not None and matrix.grad.abs().sum() > 0
    unused = net.blocks[4].conv.point_linear.conv.conv.weight  # stage 0, 4th block: depth 2 skips it
    assert unused.grad is None


def test_active_arch_round_trip_and_max_net() -> None:
    net = OFAMobileNetV3(SMALL, n_classes=10)
    assert net.active_arch() == SMALL.max_arch()
    arch = SMALL.sample(rng=5)
    net.set_active_subnet(arch)
    assert net.active_arch() == arch
    assert net.active_arch(r=200).r == 200
    net.set_max_net()
    assert net.active_arch() == SMALL.max_arch(arch.r)


def test_state_dict_keys_follow_ofa() -> None:
    keys = set(OFAMobileNetV3(n_classes=10).state_dict())
    for key in ("first_conv.conv.weight", "blocks.0.conv.depth_conv.conv.weight",
                "blocks.1.conv.inverted_bottleneck.conv.conv.weight",
                "blocks.1.conv.depth_conv.conv.7to5_matrix", "blocks.1.conv.depth_conv.bn.bn.running_mean",
                "blocks.8.conv.depth_conv.se.fc.reduce.weight", "blocks.20.conv.point_linear.bn.bn.weight",
                "final_expand_layer.bn.weight", "feature_mix_layer.conv.weight", "classifier.linear.bias"):
        assert key in keys, key
    assert "blocks.21.conv.point_linear.bn.bn.weight" not in keys


def test_archs_outside_the_supernet_are_rejected() -> None:
    net = OFAMobileNetV3(SMALL, n_classes=10)
    arch = SMALL.max_arch(64)
    with pytest.raises(InputError, match="ks\\[0\\]=9"):
        net.set_active_subnet(Arch((9,) * 20, arch.e, arch.d, 64))
    with pytest.raises(InputError, match="width multiplier"):
        net.get_subnet(Arch(arch.ks, arch.e, arch.d, 64, w=1.2))
    with pytest.raises(InputError, match="missing e, d, r"):  # dicts are Once-for-All's arch dicts
        net.set_active_subnet({"ks": [7] * 20})
    net.set_active_subnet(Arch(arch.ks, arch.e, arch.d, 300))  # resolution is only the input size
    with pytest.raises(InputError, match="n_classes"):
        OFAMobileNetV3(n_classes=0)
    with pytest.raises(InputError, match="Arch"):
        MobileNetV3Subnet("k7e6")
