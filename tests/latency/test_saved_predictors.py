"""Predictor files written before the latency models read every family through its interface
(`data/saved/`, version 1, see data/README.md) load and predict what they predicted then, and
refitting the first family's models whose layout did not change gives the same models."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("name", ["lut-entries", "analytic-log", "hybrid"])
def test_refits_of_the_first_family_give_the_saved_models(name, ort, blocks, expected):
    """(An nnls table fitted today types every part, stem and head too: version 2 records it.)"""
    kw = dict(net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes))
    pred = {"lut-entries": lambda: LookupTablePredictor.from_entries(blocks, **kw).clone(),
            "analytic-log": lambda: AnalyticPredictor("full", "log", 1e-2, **kw),
            "hybrid": lambda: HybridPredictor(**kw)}[name]().fit(*ort.train)
    rows = expected["rows/ofa-mbv3"].astype(np.int64)
    np.testing.assert_allclose(pred.predict(rows), expected[f"ms/ofa-mbv3-{name}"], rtol=1e-12, atol=0)


def test_the_gene_encoding(family):
    """Every family (the registry's, and the test-only one): its space's one-hots over every
    choice, then r and r^2; saved and loaded."""
    fam, family = family, family.name
    space = fam.default_space()
    rows = np.asarray(space.sample_matrix(50, np.random.default_rng(0)), dtype=np.int64)
    enc = GeneEncoder.from_rows(family, rows)
    x = enc(rows)
    assert x.shape == (50, enc.width)
    np.testing.assert_array_equal(encoder_from_dict(enc.to_dict(), family)(rows), x)
    r = (rows[:, 0] - enc.r_center) / enc.r_scale
    np.testing.assert_array_equal(x[:, -2:], np.stack([r, r**2], axis=1))
    active, at = fam.active_mask(rows), 0  # gene by gene in flat-column order, one-hot where active
    for g, sl in zip(fam.gene_groups(), fam.group_slices().values()):
        codes = np.asarray(g.to_codes(g.choices))
        for c in range(sl.start, sl.stop):
            hot = (rows[:, c:c + 1] == codes) & active[:, c - 1:c]
            np.testing.assert_array_equal(x[:, at:at + len(codes)], hot)
            at += len(codes)
    assert at == enc.width - 2


def test_version_1_slot_encoding_still_reads():
    """OFA-MobileNetV3's version-1 encoders (by slot, over the training rows' choices) keep their
    layout: slot s's one-hot k (3 choices), then e (3)."""
    saved = {"ks": [3, 5, 7], "es": [3, 4, 6], "ds": [2, 3, 4], "r_center": 176.0, "r_scale": 28.0}
    enc = encoder_from_dict(saved, "ofa-mbv3")
    assert enc.to_dict() == saved
    space = NetworkSpec("ofa-mbv3", 1.0, 10).get_family().default_space()
    rows = np.asarray(space.sample_matrix(50, np.random.default_rng(0)), dtype=np.int64)
    per_slot = enc(rows)[:, :20 * 6].reshape(50, 20, 6)
    run = per_slot[:, :, :3].any(axis=2)
    np.testing.assert_array_equal(per_slot[:, :, :3].argmax(axis=2)[run],
                                  np.searchsorted([3, 5, 7], rows[:, 1:21])[run])


def test_files_written_today_are_version_2_and_record_their_layout(ort, tmp_path):
    """A version-2 nnls table names its part types, so reading it never depends on its family."""
    pred = LookupTablePredictor("nnls", 10.0, net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes)).fit(*ort.train)
    path = pred.save(tmp_path / "lut.json")
    doc = json.loads(path.read_text())
    assert doc["version"] == 2 and doc["state"]["types"] == {"keep": [0, 1, 2, 3, 4, 5], "lumped": False}
    rows = ort.train[0][:20]
    np.testing.assert_array_equal(load_predictor(path).predict(rows), pred.predict(rows))
