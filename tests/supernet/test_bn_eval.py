from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.errors import InputError
from hwnas.supernet.bn import batchnorm_layers, evaluate, folded_for_eval, recalibrate_bn
from hwnas.supernet.data import DataConfig, build_loaders


def tiny_cnn() -> nn.Module:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(3, 16), *block(16, 32), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                         nn.Dropout(0.2), nn.Linear(32 * 16, 10))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two torch threads on two shared cores can run 50x slower; these tests need one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def loaders():
    return build_loaders(DataConfig(name="mnist-embedded", batch_size=64, seed=0))


@pytest.fixture(scope="module")
def trained(loaders) -> nn.Module:
    """A tiny CNN trained for one epoch (62 steps, under a second) on the embedded digits."""
    torch.manual_seed(0)
    model = tiny_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for x, y in loaders.train:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model.eval()


def test_trained_tiny_cnn_is_well_above_chance(trained, loaders):
    result = evaluate(trained, loaders.val)
    assert result["n"] == 500
    assert result["top1"] > 50.0  # chance is 10%
    assert result["loss"] < math.log(10)


def test_recalibration_recovers_accuracy_after_stats_are_lost(trained, loaders):
    reference = evaluate(trained, loaders.val)["top1"]
    model = copy.deepcopy(trained)
    params_before = {k: v.clone() for k, v in model.named_parameters()}
    for bn in batchnorm_layers(model):
        bn.running_mean.fill_(3.0)
        bn.running_var.fill_(50.0)
    damaged = evaluate(model, loaders.val)["top1"]

    recalibrate_bn(model, loaders.train, n_batches=20)
    restored = evaluate(model, loaders.val)["top1"]
    assert damaged < reference - 20
    assert restored > 50.0 and restored > reference - 5
    for bn in batchnorm_layers(model):
        assert bn.momentum == 0.1 and int(bn.num_batches_tracked) == 20
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))
        assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
    assert not model.training
    assert all(torch.equal(v, params_before[k]) for k, v in model.named_parameters())


def test_recalibration_at_another_resolution_feeds_resized_batches(trained, loaders):
    model = copy.deepcopy(trained)
    sizes: list[tuple[int, ...]] = []
    model[0].register_forward_pre_hook(lambda _m, args: sizes.append(tuple(args[0].shape[-2:])))
    recalibrate_bn(model, loaders.train, n_batches=3, resolution=20)
    assert sizes == [(20, 20)] * 3
    assert evaluate(model, loaders.val, resolution=20)["top1"] > 30.0


def test_recalibration_is_an_exact_average_with_dropout_off():
    torch.manual_seed(1)
    batches = [(torch.randn(8, 3, 5, 5) * (i + 1) + i, torch.zeros(8, dtype=torch.long)) for i in range(5)]
    model = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm2d(3, momentum=0.3))
    recalibrate_bn(model, batches, n_batches=3)
    bn = model[1]
    used = [x for x, _ in batches[:3]]
    mean = torch.stack([x.mean(dim=(0, 2, 3)) for x in used]).mean(0)
    var = torch.stack([x.transpose(0, 1).reshape(3, -1).var(dim=1) for x in used]).mean(0)
    assert torch.allclose(bn.running_mean, mean, atol=1e-5)
    assert torch.allclose(bn.running_var, var, atol=1e-4)
    assert bn.momentum == 0.3 and int(bn.num_batches_tracked) == 3


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_recalibration_runs_channels_last_and_gives_the_weights_back_in_their_layout(trained, loaders, layout):
    """On CPU recalibration runs channels-last (oneDNN's training-mode BatchNorm is several times
    faster so): the statistics are those of the layout the model came in, to float rounding, and
    the weights leave in that layout."""
    batches = [batch for batch, _ in zip(loaders.train, range(4))]
    reference, model = copy.deepcopy(trained), copy.deepcopy(trained).to(memory_format=layout)
    with torch.no_grad():  # the reference: training-mode BN over the same batches, as they come
        for bn in batchnorm_layers(reference):
            bn.reset_running_stats()
            bn.momentum = None
        reference.train()
        for x, _ in batches:
            reference(x)
    recalibrate_bn(model, batches, n_batches=4)
    stem = model[0].weight
    assert stem.is_contiguous(memory_format=layout) and stem.is_contiguous() == (layout == torch.contiguous_format)
    for got, want in zip(batchnorm_layers(model), batchnorm_layers(reference)):
        assert torch.allclose(got.running_mean, want.running_mean, rtol=1e-4, atol=1e-5)
        assert torch.allclose(got.running_var, want.running_var, rtol=1e-3, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


def test_recalibration_needs_batches():
    model = nn.Sequential(nn.BatchNorm2d(3))
    with pytest.raises(InputError, match="no batches"):
        recalibrate_bn(model, [], n_batches=2)
    with pytest.raises(InputError, match="at least one batch"):
        recalibrate_bn(model, [(torch.randn(2, 3, 4, 4), torch.zeros(2))], n_batches=0)


def test_evaluate_reports_top1_percent_mean_loss_and_count():
    y = torch.arange(40) % 4
    wrong = (y + 1) % 4
    logits = 5.0 * F.one_hot(torch.where(torch.arange(40) < 30, y, wrong), 4).float()
    batches = [(logits[i:i + 10], y[i:i + 10]) for i in range(0, 40, 10)]
    model = nn.Identity().train()
    result = evaluate(model, batches)
    assert result["n"] == 40 and result["top1"] == pytest.approx(75.0)
    assert result["loss"] == pytest.approx(float(F.cross_entropy(logits, y)))
    assert evaluate(model, batches, max_batches=2) == {"top1": 100.0, "loss": pytest.approx(
        float(F.cross_entropy(logits[:20], y[:20]))), "n": 20}
    assert model.training  # evaluation puts the model back in the mode it found
    with pytest.raises(InputError, match="empty"):
        evaluate(model, [])


def test_folding_bn_keeps_every_familys_outputs_and_leaves_no_bn(family):
    """Evaluation folds BN into the convolutions (`evaluate_subnets`): every family's subnets
    trace, and what they compute is unchanged to float rounding."""
    torch.manual_seed(0)
    space = family.default_space()
    subnet = family.build_supernet(10, space.width_mult, 0.0).get_subnet(space.max_arch())
    x = torch.randn(4, 3, space.max_arch().r, space.max_arch().r)
    subnet.train()
    with torch.no_grad():
        subnet(x)  # running statistics that are not the identity
    folded = folded_for_eval(subnet)
    with torch.no_grad():
        want, got = subnet.eval()(x), folded(x)
    assert not batchnorm_layers(folded)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))


def test_a_model_torch_fx_cannot_trace_is_evaluated_as_it_is():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            return self.bn(self.conv(x)) if x.sum() > 0 else x  # data-dependent: not traceable

    net = Branchy().train()
    out = folded_for_eval(net)
    assert out is net and not net.training
