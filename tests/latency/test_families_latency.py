"""Profiling and latency prediction for every family (`family_runs.every_family`, issue 16): the
families' cost layouts are exact, a profile stores the run family's columns, `latency fit` picks a
predictor that loads and predicts, and per-block entries (`profile --blocks`) make a lookup table."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from hwnas.families import NetworkSpec, get_family
from hwnas.families.parts import check_cost_names
from hwnas.families.space import FamilySpace
from hwnas.latency import (AnalyticPredictor, HybridPredictor, LookupTablePredictor, MLPPredictor,
                           TransferPredictor, fit_best, load_predictor)
from hwnas.latency.api import fit_from_run
from hwnas.latency.layout import PartGather, family_cost_gather
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.stage import profile
from hwnas.profiling.store import read_measurements
from hwnas.run import open_run

FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)


@pytest.fixture(scope="module")
def family_run(tmp_path_factory):
    """family -> a fresh run over a tiny untrained supernet of it (r 32..40, 10 classes)."""
    from family_runs import save_family_supernet

    made = {}

    def get(family: str):
        if family not in made:
            made[family] = save_family_supernet(family, tmp_path_factory.mktemp(family))
        return open_run(tmp_path_factory.mktemp("run") / "run", made[family])

    return get


def test_cost_layout_macs_sum_to_the_exact_count(family):
    fam, family = family, family.name
    rng = np.random.default_rng(3)
    for width in fam.widths:
        layout = fam.cost_layout(width, 1000)
        space = fam.default_space(width)
        rows = np.concatenate([fam.sample_matrix(400, rng, [32, 40, 128, 160, 177, 224]),
                               space.to_matrix([space.min_arch(), space.max_arch(), space.max_arch(r=129)])])
        names = layout.cost_names  # the family's own vocabulary: MAC counts first (`check_cost_names`)
        assert check_cost_names(names, layout.kernel_split) is None
        n_macs = names.index("macs_fixed") + 1
        per_part = PartGather(layout, layout.cost, len(names)).per_part(rows)
        macs = per_part[:, :, :n_macs].sum(axis=(1, 2))
        _, exact = fam.count_params_macs(rows, width, 1000)
        assert np.array_equal(macs.astype(np.int64), exact)
        # every part's key reads its columns only; inactive parts cost nothing
        assert (per_part[~layout.active(rows)] == 0).all()
        assert {p.kind for p in layout.parts} == {"stem", "block", "head"}
        # the analytic gather adds the kernel_split MACs (depthwise/spatial) split by kernel size
        gathered = family_cost_gather(NetworkSpec(family, width, 1000)).total(rows)
        assert np.array_equal(gathered[:, len(names):].sum(axis=1), gathered[:, names.index(layout.kernel_split)])


def test_every_predictor_kind_fits_saves_and_loads(family, tmp_path):
    """Synthetic latencies (exact costs + noise): each kind fits, and a saved one predicts the same."""
    fam, family = family, family.name
    w = fam.default_width
    rng = np.random.default_rng(0)
    m = fam.sample_matrix(60, rng, [32, 36, 40])
    costs = family_cost_gather(NetworkSpec(family, w, 10)).total(m)
    names = fam.cost_layout(w, 10).cost_names
    macs = costs[:, :names.index("macs_fixed") + 1].sum(axis=1)
    y = 0.1 + macs * 2e-8 + costs[:, names.index("convs")] * 3e-3 + rng.normal(0, 1e-3, len(m))
    kw = dict(net=NetworkSpec(family, w, 10))
    base = AnalyticPredictor("compact", **kw).fit(m, y)
    preds = [base, AnalyticPredictor("full", "log", **kw).fit(m, y),
             LookupTablePredictor("nnls", 10.0, **kw).fit(m, y),
             HybridPredictor({"kind": "analytic", "params": {"features": "compact"}}, **kw).fit(m, y),
             MLPPredictor(hidden=8, epochs=30, seeds=1, **kw).fit(m, y),
             TransferPredictor(base, "compact", **kw).fit(m[:15], 2 * y[:15])]
    for i, pred in enumerate(preds):
        got = pred.predict(m)
        assert np.isfinite(got).all() and (got > 0).all(), pred.describe()
        loaded = load_predictor(pred.save(tmp_path / f"p{i}.json"))
        assert loaded.meta.family == family
        np.testing.assert_allclose(loaded.predict(m), got, rtol=1e-9)
    assert np.median(np.abs(preds[0].predict(m) / y - 1)) < 0.05
    # archs work as rows do; rows of another width (another family's) are refused
    archs = fam.default_space(w).from_matrix(m[:3])
    np.testing.assert_allclose(base.predict(archs), base.predict(m[:3]))
    with pytest.raises(Exception, match="rows must be"):
        base.predict(np.zeros((2, len(fam.flat_columns()) + 1), dtype=np.int64))


def test_profile_then_latency_fit(family, family_run):
    fam, family = family, family.name
    run = family_run(family)
    res = profile(run, ["cpu-ort"], 6, protocol=FAST)
    assert res[0]["measured"] == 6
    df = read_measurements(run.run_dir, device="cpu-ort", kind="subnet")
    assert all(c in df.columns for c in fam.flat_columns()) and len(df) == 6
    for g in fam.gene_groups():  # the store holds values, as CSV tables do
        assert set(np.unique(df[list(g.columns)])) <= set(g.choices), g.name
    m = fam.table_codes(df)
    assert {a.id for a in run.space.from_matrix(m)} == set(df["key"])
    pred, report = fit_from_run(run.run_dir, "cpu-ort", width_mult=run.space.width_mult,
                                n_classes=run.n_classes, folds=3)
    assert report["chosen"] and pred.meta.family == family
    loaded = load_predictor(report["path"])
    rows = run.space.sample_matrix(20, 1)
    got = loaded.predict(rows)
    assert np.isfinite(got).all() and (got > 0).all()
    np.testing.assert_allclose(got, pred.predict(rows))
    lut, _ = fit_from_run(run.run_dir, "cpu-ort", n_classes=run.n_classes, kinds=["lut"], folds=3,
                          out_json=run.run_dir / "lut.json")
    assert lut.kind == "lut" and (lut.predict(rows) > 0).all()
    assert lut.meta.width_mult == run.space.width_mult  # from the run's config


def narrowed(fam) -> dict[str, list]:
    """Every gene group but the one holding depth genes (they decide which slots run) at its
    smallest choice: few lookup-table entries to time."""
    layout = fam.slot_layout()
    depths = set(layout.depth_columns if layout is not None else ())
    slices = fam.group_slices()
    return {g.name: [min(g.choices)] for g in fam.gene_groups()
            if not depths & set(range(slices[g.name].start, slices[g.name].stop))}


def test_blocks_profile_makes_a_lookup_table(family, family_run):
    fam, family = family, family.name
    run = family_run(family)
    space = fam.space_from_dict({**narrowed(fam), "r": [32, 40], "width_mult": run.space.width_mult})
    run = dataclasses.replace(run, space=space)
    res = profile(run, ["cpu-ort"], 4, protocol=FAST, blocks=True)
    blocks = read_measurements(run.run_dir, device="cpu-ort", kind="block")
    assert res[0]["measured"] == 4 + len(blocks) and len(blocks) >= 10
    layout = NetworkSpec(family, space.width_mult, run.n_classes).cost_layout()
    entries = [json.loads(b) for b in blocks["block"]]
    assert all(set(e) == set(layout.entry_columns) for e in entries)
    pred, report = fit_from_run(run.run_dir, "cpu-ort", n_classes=run.n_classes, kinds=["lut"], folds=4,
                                out_json=run.run_dir / "lut.json")
    names = [c["name"] for c in report["candidates"]]
    assert "lut(mode=entries)" in names and pred.meta.notes.block_entries == len(blocks)
    entries_lut = LookupTablePredictor.from_entries(
        blocks.assign(**{c: [e[c] for e in entries] for c in layout.entry_columns}),
        net=NetworkSpec(family, space.width_mult, run.n_classes), ms_column="corrected_ms")
    rows = space.sample_matrix(10, 2)
    sums = entries_lut.predict(rows)
    assert np.isfinite(sums).all() and (sums > 0).all()
    # a subnet outside the measured choices (every narrowed gene at its largest) has no entry: one clear error
    other = fam.default_space(space.width_mult).max_arch(r=32)
    with pytest.raises(Exception, match="no entry for"):
        entries_lut.predict([other])


def test_the_mbv3_cost_layout_sums_its_per_block_costs():
    """OFA-MobileNetV3's `cost_layout` wraps its per-block costs: gathered, a row costs the stem and
    head plus the blocks its depths run, and its lookup-table entries are those of its blocks."""
    from legacy_mbv3_blocks import block_cost, entry_keys, fixed_cost

    from hwnas.latency.layout import family_entry_keys
    from hwnas.space import SearchSpace

    space = SearchSpace.from_dict({"r": "128:224:16"})
    m = space.sample_matrix(300, 5).astype(np.int64)
    for width in (1.0, 1.2):
        layout = get_family("ofa-mbv3").cost_layout(width, 10)
        want = [fixed_cost(width, 10, int(r)) + sum(block_cost(width, s, int(row[1 + s]), int(row[21 + s]), int(r))
                                                    for s in range(20) if s % 4 < row[41 + s // 4])
                for r, row in zip(m[:, 0], m)]
        assert np.array_equal(PartGather(layout, layout.cost, 8).total(m), np.stack(want))
        assert family_entry_keys(NetworkSpec("ofa-mbv3", width, 10), m).equals(entry_keys(m, width))
