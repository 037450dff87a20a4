"""What every stage assumes of a family, checked on every family (`family_runs.every_family`: the
registry and the test-only TinyConvNet) without reference code: rows and archs round-trip, the
supernet is an `ElasticSupernet` (with an Once-for-All original: its state dict is Once-for-All's,
tensor for tensor), an extracted subnet computes what the supernet's active subnet computes and
loads into `static_subnet` (what export's `load` rebuilds), and `count_params_macs` counts that
network exactly (hooks on its convolutions and linear layers)."""

from __future__ import annotations

import numpy as np
import torch

from hwnas.families import ElasticSupernet

N_CLASSES = 10


def hooked_macs(net: torch.nn.Module, r: int) -> int:
    """MACs of convolutions and linear layers in one forward pass (Once-for-All's convention)."""
    total = []

    def count(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1]
            total.append(output.numel() * (module.in_channels // module.groups) * k)
        else:
            total.append(module.in_features * module.out_features)

    hooks = [m.register_forward_hook(count) for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    try:
        with torch.no_grad():
            net.eval()(torch.zeros(1, 3, r, r))
    finally:
        for h in hooks:
            h.remove()
    return int(sum(total))


def test_rows_and_archs_round_trip(family):
    space = family.space_from_dict({"r": [32, 40]})
    m = space.sample_matrix(200, 0)
    np.testing.assert_array_equal(family.canonical(m), m)
    np.testing.assert_array_equal(family.check_rows(m), m)
    assert family.active_mask(m).shape == (len(m), len(family.gene_columns()))
    for arch in space.from_matrix(m[:20]):
        assert family.arch_from_json(arch.to_json(), arch.w).id == arch.id
        assert family.arch_from_dict(arch.to_ofa_dict(), arch.w).to_row() == arch.to_row()


def test_supernet_subnets_and_exact_costs(family):
    torch.manual_seed(0)
    space = family.space_from_dict({"r": [32, 40]})
    supernet = family.supernet_for(space, N_CLASSES).eval()
    assert isinstance(supernet, ElasticSupernet) and isinstance(supernet, torch.nn.Module)
    assert hasattr(supernet, "classifier")
    if family.ofa_class is not None:  # its state dict is Once-for-All's, tensor for tensor
        layout = {family.hwnas_key(k): v for k, v in family.ofa_layout(space.width_mult, N_CLASSES).items()}
        assert {k: tuple(t.shape) for k, t in supernet.state_dict().items()} == layout
    archs = [space.min_arch(), space.max_arch(), *space.sample(4, 1)]
    params, macs = family.count_params_macs(space.to_matrix(archs), space.width_mult, N_CLASSES)
    for arch, n_params, n_macs in zip(archs, params, macs):
        subnet = supernet.get_subnet(arch).eval()
        x = torch.randn(2, 3, arch.r, arch.r)
        supernet.set_active_subnet(arch)
        with torch.no_grad():
            torch.testing.assert_close(subnet(x), supernet(x), rtol=1e-4, atol=1e-5)
        assert sum(p.numel() for p in subnet.parameters()) == n_params, arch.describe()
        assert hooked_macs(subnet, arch.r) == n_macs, arch.describe()
        static = family.static_subnet(arch, N_CLASSES)
        static.load_state_dict(subnet.state_dict(), strict=True)  # what a bundle's load() does
        with torch.no_grad():
            torch.testing.assert_close(static.eval()(x), subnet(x))
