"""The dashboard's readers and numbers (no Streamlit): hwnas.dashboard.data, stats, quality, summary."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hwnas.dashboard import charts, data, stats, summary
from hwnas.dashboard.data import RunFiles, load_exports
from hwnas.search.record import SearchRecord, read_search


def test_a_pair_of_devices_with_few_shared_subnets_is_flagged():
    m = pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0], "b": [1.1, 2.2, 3.0, np.nan]})
    row = data.device_pairs(m).iloc[0]
    assert row["shared subnets"] == 2 and row["Kendall τ"] is None and "not reliable" in row["note"]


def test_held_out_and_out_of_fold_points_are_separated():
    from hwnas.dashboard.quality import pair_metrics, split_pairs

    pairs = pd.DataFrame({"key": ["a", "b", "c", "c"], "predicted_ms": [1.0, 2.0, 3.0, 3.0],
                          "measured_ms": [1.0, 2.5, 3.0, 3.1],
                          "measured_at": ["2026-01-01T00:00:00+00:00", "2026-01-01T00:10:00+00:00",
                                          "2026-01-01T00:00:00+00:00", "2026-01-01T00:20:00+00:00"]})
    split = split_pairs(pairs, {"a", "c"})  # the ids the predictor file says it was fitted on
    assert list(split["split"]) == ["out-of-fold", "held-out", "out-of-fold", "out-of-fold"]
    m = pair_metrics(split).set_index("points")
    assert m.loc["held-out", "n"] == 1 and m.loc["held-out", "within ±10 %"] == 0
    assert m.loc["out-of-fold", "n"] == 3
    assert set(split_pairs(pairs, None)["split"]) == {"out-of-fold"}  # an older file: no held-out claims


def test_held_out_figures_are_the_same_for_a_run_copied_with_new_file_times(tmp_path, demo_run):
    """cp -r gives every file a new mtime, cp -a keeps them: held-out comes from the predictor's own
    record of the subnets it was fitted on, so the Predictor quality page shows the same figures."""
    import os
    import shutil

    from hwnas.dashboard.quality import HELD_OUT, fitted_ids, latency_quality
    from hwnas.latency.record import PredictorMeta
    from hwnas.latency.api import fit_from_run
    from hwnas.profiling.store import MeasurementStore, read_measurements, stats_row
    from hwnas.devices.stats import summarize
    from hwnas.run import open_run

    store = read_measurements(demo_run, device="cpu-ort", kind="subnet")
    fit_from_run(demo_run, "cpu-ort", kinds=["analytic"], seed=0)
    meta = json.loads((demo_run / "predictors" / "latency-cpu-ort.json").read_text())["meta"]
    assert fitted_ids(PredictorMeta.from_dict(meta)) == set(store["key"].astype(str))
    run = open_run(demo_run, create=False)
    later = run.space.sample(3, np.random.default_rng(7))  # measured after the fit: held out
    MeasurementStore(demo_run).append([stats_row("cpu-ort", "subnet", a.id, summarize([1.0, 1.01], warmup=1,
                                                 device="cpu-ort", backend="x"), arch=a) for a in later])
    figures = []
    for how in ("copy", "copy2"):  # cp -r, cp -a
        dst = tmp_path / how
        shutil.copytree(demo_run, dst, copy_function=getattr(shutil, how))
        if how == "copy2":
            os.utime(dst / "predictors" / "latency-cpu-ort.json", (0, 0))  # older than every measurement
        q = latency_quality(data.RunFiles(dst), "cpu-ort")
        assert (q["pairs"]["split"] == HELD_OUT).sum() == 3
        figures.append(q["metrics"].round(6).fillna(-1).to_dict())
    assert figures[0] == figures[1]


def test_front_and_hypervolume_are_the_search_librarys():
    """The dashboard's front and hypervolume are hwnas.search.pareto's, with search.json's reference."""
    from hwnas.search.pareto import hypervolume

    ms, top1 = np.array([1.0, 2.0, 3.0, 2.5]), np.array([90.0, 95.0, 97.0, 94.0])
    assert list(stats.front_mask_2d(ms, top1)) == [True, True, True, False]
    assert stats.hypervolume_2d(ms, top1, 4.0) == pytest.approx(90 * 1 + 95 * 1 + 97 * 1)
    loss = np.column_stack([-top1, ms])
    assert stats.hypervolume_2d(ms, top1, 3.5) == hypervolume(loss, np.array([0.0, 3.5]))


@pytest.mark.parametrize("algo", ["evolution", "nsga2"])
def test_the_dashboards_hypervolume_is_search_jsons(tiny_supernet, tmp_path, algo):
    """One run, one number: the overview's hypervolume, recomputed from pareto.csv, is the
    hypervolume a real search wrote into search.json."""
    from search_stubs import fit_stub_predictors

    from hwnas.run import open_run
    from hwnas.search.api import run_search

    run = open_run(tmp_path / "run", tiny_supernet)
    _, budget = fit_stub_predictors(run, "cpu-ort")
    run_search(run.run_dir, "cpu-ort", budget, algo=algo, pareto=True, verify=False, plot=False,
               population=30, generations=8)
    doc = json.loads((run.run_dir / "search.json").read_text())
    front = data.load_front(RunFiles(run.run_dir))
    assert doc["metrics"]["hypervolume"] > 0
    assert front.hypervolume() == pytest.approx(doc["metrics"]["hypervolume"], rel=1e-12)
    assert int(front.df["on_front"].sum()) == doc["metrics"]["front_size"]


def test_intervals():
    lo, hi = stats.wilson_interval([99.6, 50.0, np.nan], [500, 100, 500])
    assert 98.5 < lo[0] < 99.6 < hi[0] < 100 and hi[1] - lo[1] == pytest.approx(19.2, abs=0.3)
    assert np.isnan(lo[2])
    lo, hi = stats.latency_interval([1.0, 1.0], [0.05, 0.0])
    assert (lo[0], hi[0]) == pytest.approx((0.9, 1.1)) and np.isnan(lo[1])  # one round: no standard error


def test_the_front_frame_says_what_is_measured(demo_run):
    front = data.load_front(RunFiles(demo_run))
    df = front.df.set_index("id")
    assert front.device == "cpu-openvino" and front.budget == 1.5 and front.pick_id == front.pick_row["id"]
    assert list(front.df["measured_state"]) == ["both", "none", "both", "top-1", "latency", "none"]
    pick = df.loc[front.pick_id]
    assert pick["pick"] and pick["top1_n"] == 500 and pick["rel_se"] == 0.02 and pick["ucb_ms"] == pytest.approx(1.272)
    assert (pick["ms_lo"], pick["ms_hi"]) == pytest.approx((1.152, 1.248))
    assert pick["objective"] == pytest.approx(pick["top1_pred"] - 0.5)
    assert front.hypervolume() == stats.hypervolume_2d(front.df["ms"], front.df["objective"], 1.5)


def test_points_sit_where_they_were_measured(demo_run):
    """A diamond only where top-1 and latency are both measured, at those coordinates; half-measured
    subnets get their own symbols; the pick is drawn last (on top)."""
    df = data.load_front(RunFiles(demo_run)).df
    pts = charts.subnet_points(df, "objective", show_candidates=True)
    measured = pts[pts["shown_at"] == "measured"].set_index("id")
    for _, r in df[df["measured_state"] != "none"].iterrows():
        p = measured.loc[r["id"]]
        p = p.iloc[0] if isinstance(p, pd.DataFrame) else p
        assert p["px"] == (r["measured"] if pd.notna(r["measured"]) else r["ms"])
        assert p["py"] == (r["measured_top1"] if pd.notna(r["measured_top1"]) else r["objective"])
        diamond = p["series"] in (charts.BOTH_IN, charts.BOTH_OVER)
        assert diamond == (r["measured_state"] == "both")
    assert pts["series"].iloc[-1] == charts.PICKED


def test_pick_under_a_budget_is_the_searchs_at_its_own_budget(demo_run):
    front = data.load_front(RunFiles(demo_run))
    row, how = summary.pick_under(front, 1.5)
    assert row["id"] == front.pick_id and how == "the search's pick"
    row, how = summary.pick_under(front, 0.6)  # only subnet 0 is measured within 0.6 ms (bound 0.583)
    assert row["id"] == front.df["id"].iloc[0] and how.startswith("what-if: best measured")
    assert summary.pick_under(front, 0.4) == (None, summary.NO_PICK)


def test_slider_covers_every_runs_budget(demo_run):
    from hwnas.dashboard.views.compare import slider_range

    front = data.load_front(RunFiles(demo_run))
    other = data.RunFront(front.files, front.search, "x", "x", 2.3, front.df)
    lo, hi, start, step = slider_range({("a", "d"): front, ("b", "x"): other})
    assert lo <= front.df["ms"].min() and hi >= 2.3 and start == pytest.approx(1.5, abs=step)


def _manifest() -> dict:
    from hwnas.export.manifest import FORMAT, VERSION

    return {"format": FORMAT, "version": VERSION, "id": "abc", "status": "verified",
            "accuracy": {"top1": 97.0, "n": 500}}


MANIFEST = _manifest()  # the least model.json that fits the bundle schema


def test_exports_are_listed_with_flags(tmp_path):
    b = tmp_path / "exports" / "abc-cpu-ort"
    b.mkdir(parents=True)
    (b / "model.json").write_text(json.dumps({**MANIFEST, "accuracy": {"top1": 97.0, "n": 500},
                                              "latency": {"measured": {"corrected_ms": 1.2}},
                                              "predicted": {"top1": 97.5, "latency_ms": 1.1,
                                                            "row": {"search_id": "old"}}}))
    (b / "verify.json").write_text(json.dumps({"passed": True, "device": "cpu-ort"}))
    front = pd.DataFrame({"id": ["xyz"], "search_id": ["new"]})
    search = SearchRecord.model_validate({"search_id": "new", "settings": {"devices": ["cpu-ort"],
                                                                           "budgets_ms": {"cpu-ort": 1.0}}})
    row = load_exports(RunFiles(tmp_path), front, search).iloc[0]
    assert row["device"] == "cpu-ort" and row["status"] == "verified" and row["measured_top1"] == 97.0
    assert row["top1_n"] == 500
    assert row["over_budget"] and "orphaned" in row["flags"] and "over the current 1 ms budget" in row["flags"]
    row = load_exports(RunFiles(tmp_path), pd.DataFrame({"id": ["abc"], "search_id": ["new"]}), search).iloc[0]
    assert "stale" in row["flags"]
    (b / "model.json").write_text(json.dumps({**MANIFEST, "accuracy": {"top1": "high"}}))  # someone else's, damaged
    row = load_exports(RunFiles(tmp_path), front, search).iloc[0]
    assert row["status"] == "unreadable" and "does not fit the bundle schema (accuracy" in row["flags"]


def test_an_orphaned_bundle_for_another_device_is_not_current(demo_run):
    """One bundle, orphaned and for another device than the searched one: nothing current to ship."""
    files = RunFiles(demo_run)
    b = files.bundle("abc", "cpu-ort")
    b.mkdir(parents=True)
    (b / "model.json").write_text(json.dumps(MANIFEST))
    (b / "verify.json").write_text(json.dumps({"passed": True, "device": "cpu-ort"}))
    state = data.exports_state(load_exports(files), "cpu-openvino")
    assert state["status"] == "none current" and (state["current"], state["total"]) == (0, 1)
    assert "1 orphaned" in state["text"] and "1 for another device than cpu-openvino" in state["text"]
    stage = {r["stage"]: r for r in data.run_status(files)}["exports"]
    assert stage["status"] == "none current" and stage["command"].endswith(
        f"--device cpu-openvino --subnet {data.search_pick(data.load_search(files))['id']}")
    assert "for cpu-ort, not the searched cpu-openvino" in load_exports(files).iloc[0]["flags"]


def test_an_int8_bundle_shows_its_int8_top1(tmp_path):
    """An INT8 bundle ships the quantized model: its measured top-1 is the INT8 one, with the drop."""
    b = tmp_path / "exports" / "abc-cpu-ort-int8"
    b.mkdir(parents=True)
    (b / "model.json").write_text(json.dumps({**MANIFEST, "accuracy": {
        "top1": 97.0, "n": 500, "int8": {"top1_int8": 96.6, "top1_fp32": 97.0, "drop": 0.4}}}))
    (b / "verify.json").write_text(json.dumps({"passed": True, "device": "cpu-ort-int8"}))
    row = load_exports(RunFiles(tmp_path)).iloc[0]
    assert row["device"] == "cpu-ort-int8" and row["measured_top1"] == 96.6 and row["int8_drop"] == 0.4


def test_the_bundle_zip_is_cached_until_a_file_changes(tmp_path):
    import os

    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    sig = data.bundle_signature(tmp_path)
    assert data.bundle_signature(tmp_path) == sig
    os.utime(tmp_path / "a.bin", ns=(1, 1))
    assert data.bundle_signature(tmp_path) != sig


def test_explored_points_are_the_searchs_own_population(tmp_path):
    """The grey cloud is what the search scored (explored.csv, written with pareto.csv), thinned to
    at most n, with the search's objective when the file has it; without that file it falls back to
    a sample of the space, and says which."""
    pd.DataFrame({"top1_pred": range(10), "ms_pred:cpu-ort": [0.1 * i for i in range(10)],
                  "search_id": "s"}).to_csv(tmp_path / "explored.csv", index=False)
    df = data.explored_points(RunFiles(tmp_path), "cpu-ort", n=5)
    assert list(df.columns) == ["ms", "top1_pred", "source"] and len(df) == 5
    assert (df["source"] == "search").all()
    assert data.explored_points(RunFiles(tmp_path), "cpu-openvino").empty  # not searched, no predictors here
    pd.DataFrame({"top1_pred": [1.0], "top1_objective": [0.5], "ms_pred:cpu-ort": [0.1]}).to_csv(
        tmp_path / "explored.csv", index=False)
    assert data.explored_points(RunFiles(tmp_path), "cpu-ort")["objective"].tolist() == [0.5]


def test_accuracy_candidates_of_one_kind_have_distinct_names(tmp_path):
    from hwnas.dashboard.quality import accuracy_error

    cand = {"mae": 1.0, "n": 20}
    search = SearchRecord.model_validate({"accuracy_predictor": {"metrics": {"oof": {"mae": 1.0, "n": 20}, "candidates": [
        {"kind": "ridge", "settings": {"features": "compact"}, **cand},
        {"kind": "ridge", "settings": {"features": "full"}, **cand}, {"kind": "mlp", "settings": {}, **cand}]}}})
    names = [c["name"] for c in accuracy_error(RunFiles(tmp_path), search)["candidates"]]
    assert names == ["ridge (features=compact)", "ridge (features=full)", "mlp"]


def test_gene_importance_ranks_latency_drivers(demo_run):
    from hwnas.dashboard.quality import gene_importance

    imp = gene_importance(RunFiles(demo_run)).set_index("gene group")
    assert list(imp.index) == ["resolution (r)", "ks", "e", "d"]
    col = next(c for c in imp.columns if "latency on cpu-ort" in c)
    assert "(n=12)" in col and imp[col].abs().max() > 0.3  # the demo's latency is MACs-driven


def test_search_history_reads_records_or_values(tmp_path):
    long = data.search_history(SearchRecord(history=[{"generation": 1, "hypervolume": 3.0},
                                                     {"generation": 2, "hypervolume": 4.0}]))
    assert list(long["value"]) == [3.0, 4.0] and set(long["measure"]) == {"hypervolume"}
    # an early search.json: one number per generation (it still reads, through the schema)
    (tmp_path / "search.json").write_text(json.dumps({"history": [90.0, 91.0], "best": []}))
    assert list(data.search_history(read_search(tmp_path / "search.json"))["generation"]) == [1, 2]
    assert data.search_history(None).empty and data.search_history(SearchRecord()).empty


def test_runs_table_lists_every_run_with_its_settings(demo_run, tmp_path, tiny_supernet):
    from hwnas.run import open_run

    other = open_run(tmp_path / "other", tiny_supernet).run_dir
    table = summary.runs_table([demo_run, other]).set_index("run")
    assert table.loc["demo", "device"] == "cpu-openvino" and table.loc["demo", "budget ms"] == "1.5"
    assert table.loc["demo", "recommended"] == data.search_pick(data.load_search(RunFiles(demo_run)))["id"]
    assert table.loc["other", "device"] == "not searched" and table.loc["other", "recommended"] == "—"
    assert not table.isna().any().any()


def test_the_server_hides_streamlits_deploy_button():
    from hwnas.dashboard import serve_command

    cmd = serve_command()
    assert cmd[cmd.index("--client.toolbarMode") + 1] == "minimal"


def test_training_loss_names_the_distillation_term():
    log = pd.DataFrame({"phase": ["full", "full", "kernel"], "train_loss": [1.0, 0.9, 1.4]})
    assert list(data.loss_terms(log, 1.0)) == ["cross-entropy", "cross-entropy", "cross-entropy + distillation"]
    assert data.loss_terms(log, 0.5).iloc[-1] == "cross-entropy + 0.5 × distillation"
    assert set(data.loss_terms(log, 0.0)) == {"cross-entropy"}
