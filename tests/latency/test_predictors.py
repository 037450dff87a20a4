"""Every predictor kind: beats a FLOPs-only fit on held-out real measurements, saves and loads
to identical predictions without pickle, and predicts 100k subnets in well under a second."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import CheckpointError, InputError, TableError
from hwnas.latency import (AnalyticPredictor, HybridPredictor, LookupTablePredictor, MLPPredictor,
                           TransferPredictor, load_predictor)
from hwnas.latency.metrics import kendall_tau, rmse_log, within
from hwnas.space import Arch, SearchSpace

KINDS = ["analytic", "analytic-log", "lut-nnls", "lut-entries", "mlp", "hybrid", "hybrid-mlp",
         "transfer"]


def _make(kind: str, ort, blocks):
    kw = dict(net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes))
    if kind == "analytic":
        return AnalyticPredictor("stage", "linear", 1e-3, **kw)
    if kind == "analytic-log":
        return AnalyticPredictor("full", "log", 1e-2, **kw)
    if kind == "lut-nnls":
        return LookupTablePredictor("nnls", 10.0, **kw)
    if kind == "lut-entries":
        return LookupTablePredictor.from_entries(blocks, **kw).clone()
    if kind == "mlp":
        return MLPPredictor(epochs=300, **kw)
    if kind == "hybrid":
        return HybridPredictor(**kw)
    if kind == "hybrid-mlp":
        return HybridPredictor(residual="mlp", **kw)
    # the per-block table as the "source device", adapted from whole-subnet rows
    return TransferPredictor(LookupTablePredictor.from_entries(blocks, **kw), **kw)


@pytest.fixture(scope="module")
def fitted(ort, blocks):
    m, y = ort.train
    return {kind: _make(kind, ort, blocks).fit(m, y) for kind in KINDS}


@pytest.fixture(scope="module")
def flops(ort):
    return AnalyticPredictor("macs", "linear", 0.0, net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes)).fit(*ort.train)


@pytest.mark.parametrize("kind", KINDS)
def test_beats_flops_only_on_heldout_rows(kind, fitted, flops, ort):
    m, y = ort.test
    pred, base = fitted[kind].predict(m), flops.predict(m)
    assert rmse_log(pred, y) < rmse_log(base, y)
    assert within(pred, y, 0.10) >= within(base, y, 0.10)
    assert kendall_tau(pred, y) > kendall_tau(base, y)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_gives_identical_predictions_and_no_pickle(kind, fitted, ort, tmp_path):
    pred = fitted[kind]
    path = pred.save(tmp_path / "pred.json")
    loaded = load_predictor(path)
    assert type(loaded) is type(pred) and loaded.get_params() == pred.get_params()
    others = SearchSpace(r_choices=tuple(range(32, 65, 4))).sample_matrix(500, 5)
    for m in (ort.test[0], others):
        assert np.array_equal(loaded.predict(m), pred.predict(m))
    assert loaded.meta.n_train == len(ort.train[0])
    for f in _files(tmp_path):
        assert f.suffix in (".json", ".npz"), f
        if f.suffix == ".json":
            json.loads(f.read_text())
        else:
            with np.load(f, allow_pickle=False) as data:  # raises on any pickled object array
                for key in data.files:
                    assert data[key].dtype != object


@pytest.mark.parametrize("kind", KINDS)
def test_predicts_100k_archs_in_one_call(kind, fitted):
    """Behaviour only; the speed goal (100k archs in under a second) is timed by
    experiments/bench_latency_predictors.py, where a busy machine cannot fail the suite."""
    m = SearchSpace(r_choices=tuple(range(32, 65, 4))).sample_matrix(100_000, 9)
    out = fitted[kind].predict(m)
    assert out.shape == (100_000,) and np.isfinite(out).all() and (out > 0).all()


def test_arch_lists_and_matrices_agree(fitted, ort):
    archs = SearchSpace(r_choices=tuple(range(32, 65, 4))).from_matrix(ort.test[0][:20])
    pred = fitted["hybrid"]
    np.testing.assert_array_equal(pred.predict(archs), pred.predict(ort.test[0][:20]))


def test_user_mistakes_are_one_line_errors(fitted, ort):
    with pytest.raises(InputError, match="not fitted"):
        AnalyticPredictor(net=NetworkSpec("ofa-mbv3", 1.0, 1000)).predict(ort.test[0])
    with pytest.raises(InputError, match="positive"):
        AnalyticPredictor(net=NetworkSpec("ofa-mbv3", 1.0, 1000)).fit(ort.train[0][:5], [1.0, 2.0, -1.0, 1.0, 1.0])
    with pytest.raises(InputError, match="5 archs but 4"):
        AnalyticPredictor(net=NetworkSpec("ofa-mbv3", 1.0, 1000)).fit(ort.train[0][:5], [1.0] * 4)
    wide = Arch.from_row(ort.test[0][0].tolist(), w=1.2)
    with pytest.raises(InputError, match="width"):
        fitted["analytic"].predict([wide])
    with pytest.raises(InputError, match="unknown feature set"):
        AnalyticPredictor("flops", net=NetworkSpec("ofa-mbv3", 1.0, 1000))
    with pytest.raises(InputError, match="fitted source"):
        TransferPredictor(AnalyticPredictor(net=NetworkSpec("ofa-mbv3", 1.0, 1000)), net=NetworkSpec("ofa-mbv3", 1.0, 1000))


def test_lookup_table_entries(blocks, ort):
    lut = LookupTablePredictor.from_entries(blocks, net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes))
    m, y = ort.test
    raw = lut.predict(m)  # the plain sum of per-part measurements, uncalibrated
    assert within(raw, y, 0.10) > 0.7 and kendall_tau(raw, y) > 0.7
    # a block type that was never profiled is named in the error
    no_k7 = blocks[~((blocks.part == "block") & (blocks.k == 7) & (blocks.stage == 2))]
    with pytest.raises(InputError, match="stage=2 .*k=7"):
        LookupTablePredictor.from_entries(no_k7, net=NetworkSpec("ofa-mbv3", 1.0, 10)).predict(
            SearchSpace(ks_choices=(7,), r_choices=(32,)).sample_matrix(3, 0))
    # sizes that were not profiled are interpolated per block type
    sparse = blocks[(blocks.part != "block") | (blocks["size"] % 2 == 0)]
    close = LookupTablePredictor.from_entries(sparse, net=NetworkSpec("ofa-mbv3", 1.0, 10)).predict(m)
    assert np.median(np.abs(close / raw - 1)) < 0.05
    bad = blocks.copy()
    bad.loc[3, "ms"] = -1
    with pytest.raises(TableError, match="row 4, column ms"):
        LookupTablePredictor.from_entries(bad, net=NetworkSpec("ofa-mbv3", 1.0, 1000))
    with pytest.raises(TableError, match="in_ch.*width"):
        LookupTablePredictor.from_entries(blocks, net=NetworkSpec("ofa-mbv3", 1.2, 1000))
    with pytest.raises(InputError, match="from_entries"):
        LookupTablePredictor(mode="entries", net=NetworkSpec("ofa-mbv3", 1.0, 1000)).fit(*ort.train)


def test_corrupt_or_foreign_files_are_checkpoint_errors(fitted, tmp_path):
    path = fitted["hybrid"].save(tmp_path / "p.json")
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "foreign.json").write_text(json.dumps({"model": "xgboost"}))
    for name, pattern in (("junk.json", "not valid JSON"), ("foreign.json", "not an hwnas latency")):
        with pytest.raises(CheckpointError, match=pattern) as err:
            load_predictor(tmp_path / name)
        assert "\n" not in str(err.value)
    doc = json.loads(path.read_text())
    doc["state"]["base"]["state"]["coef"] = [1.0]
    (tmp_path / "damaged.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="damaged"):
        load_predictor(tmp_path / "damaged.json")
    path.with_suffix(".npz").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_predictor(path)
    path.with_suffix(".npz").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        load_predictor(path)
    with pytest.raises(InputError, match="does not exist"):
        load_predictor(tmp_path / "nope.json")


def test_latency_package_never_pickles():
    import hwnas.latency as pkg

    for src in Path(pkg.__file__).parent.glob("*.py"):
        text = src.read_text()
        for banned in ("import pickle", "joblib", "allow_pickle=True", "torch.save", "cloudpickle"):
            assert banned not in text, f"{src.name} uses {banned}"


def test_mlp_backprop_matches_autograd():
    """The latency MLP trains in plain numpy with hand-written backprop: its gradients must be
    autograd's (float64, SiLU layers, a batched ensemble)."""
    import torch

    from hwnas.latency.mlp import mse_gradients

    rng = np.random.default_rng(0)
    seeds, n, d, h = 2, 7, 5, 4
    ws = [rng.normal(size=(seeds, d, h)), rng.normal(size=(seeds, h, h)), rng.normal(size=(seeds, h, 1))]
    bs = [rng.normal(size=(seeds, 1, h)), rng.normal(size=(seeds, 1, h)), rng.normal(size=(seeds, 1, 1))]
    x, target = rng.normal(size=(n, d)), rng.normal(size=(1, n, 1))
    gw, gb = mse_gradients(ws, bs, x, target)
    tw = [torch.tensor(w, requires_grad=True) for w in ws]
    tb = [torch.tensor(b, requires_grad=True) for b in bs]
    out = torch.tensor(x).expand(seeds, n, d)
    for i in range(len(tw)):
        out = out @ tw[i] + tb[i]
        if i < len(tw) - 1:
            out = torch.nn.functional.silu(out)
    ((out - torch.tensor(target)) ** 2).mean(dim=(1, 2)).sum().backward()  # each member's own MSE
    for mine, theirs in zip(gw + gb, tw + tb):
        np.testing.assert_allclose(mine, theirs.grad.numpy(), rtol=1e-10, atol=1e-12)
