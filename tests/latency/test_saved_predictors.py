"""Predictor files written before the latency models read every family through its interface
(`data/saved/`, see data/README.md) load and predict what they predicted then, and refitting the
first family's models on the same rows gives the same models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.latency import AnalyticPredictor, HybridPredictor, LookupTablePredictor, load_predictor
from hwnas.latency.encoding import GeneEncoder, encoder_from_dict

SAVED = Path(__file__).parent / "data" / "saved"


@pytest.fixture(scope="module")
def expected():
    with np.load(SAVED / "expected.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("path", sorted(SAVED.glob("*.json")), ids=lambda p: p.stem)
def test_saved_predictors_predict_as_they_did(path, expected):
    pred = load_predictor(path)
    rows = expected[f"rows/{pred.meta.family}"].astype(np.int64)
    np.testing.assert_allclose(pred.predict(rows), expected[f"ms/{path.stem}"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["lut-nnls", "lut-entries", "analytic-log", "hybrid"])
def test_refits_of_the_first_family_give_the_saved_models(name, ort, blocks, expected):
    kw = dict(net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes))
    pred = {"lut-nnls": lambda: LookupTablePredictor("nnls", 10.0, **kw),
            "lut-entries": lambda: LookupTablePredictor.from_entries(blocks, **kw).clone(),
            "analytic-log": lambda: AnalyticPredictor("full", "log", 1e-2, **kw),
            "hybrid": lambda: HybridPredictor(**kw)}[name]().fit(*ort.train)
    rows = expected["rows/ofa-mbv3"].astype(np.int64)
    np.testing.assert_allclose(pred.predict(rows), expected[f"ms/ofa-mbv3-{name}"], rtol=1e-12, atol=0)


def test_the_gene_encoding(family):
    """Every family (the registry's, and the test-only one) but the first: its space's one-hots over
    every choice; the first (`predates_families`): by slot, over the training rows' choices (as its
    models were first fitted). Both save and load."""
    fam, family = family, family.name
    space = fam.default_space()
    rows = np.asarray(space.sample_matrix(50, np.random.default_rng(0)), dtype=np.int64)
    enc = GeneEncoder.from_rows(family, rows)
    x = enc(rows)
    assert x.shape == (50, enc.width)
    np.testing.assert_array_equal(encoder_from_dict(enc.to_dict(), family)(rows), x)
    r = (rows[:, 0] - enc.r_center) / enc.r_scale
    np.testing.assert_array_equal(x[:, -2:], np.stack([r, r**2], axis=1))
    if fam.predates_families:  # OFA-MobileNetV3's encoding, as first written
        assert set(enc.to_dict()) == {"ks", "es", "ds", "r_center", "r_scale"}
        per_slot = x[:, :20 * 6].reshape(50, 20, 6)  # slot s: one-hot k (3 choices), then e (3)
        np.testing.assert_array_equal(per_slot[:, :, :3].argmax(axis=2)[per_slot[:, :, :3].any(axis=2)],
                                      np.searchsorted([3, 5, 7], rows[:, 1:21])[per_slot[:, :, :3].any(axis=2)])
    else:
        np.testing.assert_array_equal(x[:, :-2], space.encode(rows)[:, :-len(space.r_choices)])
