"""Fixtures for the export tests: a run over the tiny supernet with a two-member pareto.csv, and
one cpu-ort bundle shared by the tests that only read a bundle."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.profiling.protocol import ProtocolSettings

FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=2, warmup_s=0.05, ref_runs=3)
QUICK = dict(calib_batches=4, verify_images=32, protocol=FAST)  # BN on 256 digits, 32 to verify


@pytest.fixture(scope="session")
def quick() -> dict:
    """export_subnet settings that keep a test fast: BN on 4 batches, 32 images to verify."""
    return dict(QUICK)


@pytest.fixture(scope="session")
def export_run(tmp_path_factory, tiny_supernet):
    """(run config, [small arch, sampled arch]) with pareto.csv holding both and predictions."""
    from hwnas.run import open_run
    from hwnas.space import write_arch_table

    run = open_run(tmp_path_factory.mktemp("export") / "run", tiny_supernet)
    archs = [run.space.min_arch(r=32), run.space.sample(rng=1)]
    write_arch_table(run.run_dir / "pareto.csv", archs,
                     extra={"id": [a.id for a in archs], "top1_pred": [40.0, 60.0],
                            "ms_pred:cpu-ort": [0.5, 1.5], "ms_pred:trt": [0.1, 0.2]})
    return run, archs


@pytest.fixture(scope="session")
def ort_bundle(export_run):
    """The small pareto member exported for cpu-ort (latency measured)."""
    from hwnas.export import export_subnet

    run, archs = export_run
    return export_subnet(run.run_dir, archs[0].id, "cpu-ort", **QUICK)


@pytest.fixture(scope="session")
def test_digits():
    """(raw uint8 28x28 digits, normalised float loader images, labels) of the test split,
    spread over the classes."""
    import torch

    from hwnas.supernet.data import DataConfig, build_loaders

    loaders = build_loaders(DataConfig(name="mnist-embedded"))
    ds = loaders.test.dataset
    picks = np.linspace(0, len(ds) - 1, 40).round().astype(int)
    raw = ds.images[torch.from_numpy(picks)][:, 0].numpy()
    normalised = torch.stack([ds[int(i)][0] for i in picks])
    return raw, normalised, ds.labels[torch.from_numpy(picks)].numpy()


@pytest.fixture(scope="session")
def trained_export_run(tmp_path_factory, tiny_supernet):
    """(run config, min arch at r32): the tiny supernet with its smallest subnet trained for 300
    steps on the digits, so its logits separate the classes and quantizing it is a
    fair test (an untrained net's int8 outputs are noise next to its near-constant logits)."""
    import torch

    from hwnas.run import open_run
    from hwnas.space import write_arch_table
    from hwnas.supernet.checkpoint import load_checkpoint_meta, save_checkpoint
    from hwnas.supernet.data import DataConfig, build_loaders, resize_batch
    from hwnas.supernet.pretrained import load_supernet

    model, _ = load_supernet(tiny_supernet)
    arch = open_run(tmp_path_factory.mktemp("int8-probe") / "run", tiny_supernet).space.min_arch(r=32)
    model.set_active_subnet(arch)
    model.train()
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loaders = build_loaders(DataConfig(name="mnist-embedded"))
    steps = 0
    while steps < 300:
        for x, y in loaders.train:
            loss = torch.nn.functional.cross_entropy(model(resize_batch(x, 32)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if steps == 300:
                break
    stem = tmp_path_factory.mktemp("trained") / "supernet"
    saved = load_checkpoint_meta(tiny_supernet)
    save_checkpoint(stem, model.eval(), {k: saved[k] for k in ("space", "n_classes", "dataset",
                                                               "class_names")}, rng=False)
    run = open_run(tmp_path_factory.mktemp("export-trained") / "run", stem)
    write_arch_table(run.run_dir / "pareto.csv", [arch],
                     extra={"id": [arch.id], "top1_pred": [90.0], "ms_pred:cpu-ort-int8": [0.5]})
    return run, arch
