"""Every dashboard page on a run the tests create, through Streamlit's AppTest."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from hwnas.dashboard import APP
from hwnas.dashboard.app import PAGES


def open_page(monkeypatch, run, page: str) -> AppTest:
    monkeypatch.setenv("HWNAS_DASHBOARD_RUN", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.sidebar.radio[0].set_value(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def test_overview_lists_each_stage(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Runs overview")
    table = at.dataframe[0].value
    status = dict(zip(table["stage"], table["status"]))
    assert status["measurements"] == "done" and status["pareto front"] == "done"
    assert status["latency predictors"] == "missing"
    assert any("hwnas latency fit" in c for c in table["command"])


def test_pareto_page_plots_the_front(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    assert charts(at), "no chart on the Pareto page"
    assert "6 subnets on the front" in at.caption[0].value
    assert len(at.dataframe[0].value) == 6


def test_device_comparison_has_rank_correlation(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Device comparison")
    pairs = at.dataframe[0].value
    row = pairs.iloc[0]
    assert {row["device A"], row["device B"]} == {"cpu-ort", "cpu-openvino"}
    assert row["shared subnets"] == 12 and row["Kendall τ"] > 0.5 and row["note"] == "ok"
    assert not at.warning
    assert charts(at)


def test_subnet_detail_shows_the_arch_and_how_to_export(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Subnet detail")
    assert at.code[0].value.startswith("r")
    assert any("hwnas export" in c.value for c in at.code)


def test_training_curves(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Supernet training")
    assert len(charts(at)) == 2 and len(at.dataframe[0].value) == 6


def test_predictor_page_says_what_is_missing(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Predictor quality")
    assert any("hwnas latency fit" in c.value for c in at.code)


@pytest.mark.parametrize("page", PAGES)
def test_an_empty_run_shows_commands_not_tracebacks(monkeypatch, tmp_path, tiny_supernet, page):
    from hwnas.run import open_run

    run = open_run(tmp_path / "empty", tiny_supernet).run_dir
    at = open_page(monkeypatch, run, page)
    assert at.code or at.dataframe  # overview shows the status table; others the command


def test_no_run_at_all(monkeypatch, tmp_path):
    monkeypatch.setenv("HWNAS_DASHBOARD_RUN", str(tmp_path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception and "No hwnas run" in at.warning[0].value


def test_pareto_page_labels_predicted_and_measured(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    spec = charts(at)[0].proto.spec
    assert "latency on cpu-ort (ms)" in spec and "top-1 accuracy (%): predicted, or measured" in spec
    for series in ("Pareto front (predicted)", "measured, within budget", "latency budget"):
        assert series in spec
    assert "ms, predicted" not in spec and '"zero": true' not in spec


def test_compare_page_has_a_budget_slider_and_summary(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Compare")
    assert at.slider, "no budget slider"
    summary = at.dataframe[0].value
    assert {"front size", "hypervolume", "best measured top-1 % under budget"} <= set(summary.columns)


def test_a_pair_of_devices_with_few_shared_subnets_is_flagged():
    import numpy as np
    import pandas as pd

    from hwnas.dashboard.data import device_pairs

    m = pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0], "b": [1.1, 2.2, 3.0, np.nan]})
    row = device_pairs(m).iloc[0]
    assert row["shared subnets"] == 2 and row["Kendall τ"] is None and "not reliable" in row["note"]


def test_training_and_held_out_points_are_separated():
    import pandas as pd

    from hwnas.dashboard.data import pair_metrics, split_pairs

    pairs = pd.DataFrame({"key": ["a", "b", "c", "c"], "predicted_ms": [1.0, 2.0, 3.0, 3.0],
                          "measured_ms": [1.0, 2.5, 3.0, 3.1], "error_pct": [0.0, -20.0, 0.0, -3.0],
                          "measured_at": ["2026-01-01T00:00:00+00:00", "2026-01-01T00:10:00+00:00",
                                          "2026-01-01T00:00:00+00:00", "2026-01-01T00:20:00+00:00"]})
    split = split_pairs(pairs, pd.Timestamp("2026-01-01T00:05:00", tz="UTC"))
    assert list(split["split"]) == ["training", "held-out", "training", "training"]
    m = pair_metrics(split).set_index("points")
    assert m.loc["held-out", "n"] == 1 and m.loc["held-out", "within ±10 %"] == 0
    assert m.loc["training", "n"] == 3


def test_hypervolume_and_best_under_a_budget():
    import numpy as np
    import pandas as pd

    from hwnas.dashboard.data import best_under, hypervolume_2d, pareto_mask

    ms, top1 = np.array([1.0, 2.0, 3.0, 2.5]), np.array([90.0, 95.0, 97.0, 94.0])
    assert list(pareto_mask(ms, top1)) == [True, True, True, False]
    assert hypervolume_2d(ms, top1, 4.0) == 90 * 1 + 95 * 1 + 97 * 1
    df = pd.DataFrame({"id": list("abcd"), "ms": ms, "top1_pred": top1, "measured": [np.nan, 3.5, np.nan, np.nan]})
    assert best_under(df, 3.0)["id"] == "c" and best_under(df, 2.9)["id"] == "d"
    assert best_under(df, 0.5) is None


def test_exports_are_listed_with_flags(tmp_path):
    import json

    import pandas as pd

    from hwnas.dashboard.data import RunFiles, load_exports

    b = tmp_path / "exports" / "abc-cpu-ort"
    b.mkdir(parents=True)
    (b / "model.json").write_text(json.dumps({"id": "abc", "status": "verified", "accuracy": {"top1": 97.0},
                                              "latency": {"measured": {"corrected_ms": 1.2}},
                                              "predicted": {"top1": 97.5, "latency_ms": 1.1,
                                                            "row": {"search_id": "old"}}}))
    (b / "verify.json").write_text(json.dumps({"passed": True, "device": "cpu-ort"}))
    front = pd.DataFrame({"id": ["xyz"], "search_id": ["new"]})
    search = {"search_id": "new", "settings": {"devices": ["cpu-ort"], "budgets_ms": {"cpu-ort": 1.0}}}
    row = load_exports(RunFiles(tmp_path), front, search).iloc[0]
    assert row["device"] == "cpu-ort" and row["status"] == "verified" and row["measured_top1"] == 97.0
    assert row["over_budget"] and "orphaned" in row["flags"] and "over the current 1 ms budget" in row["flags"]
    row = load_exports(RunFiles(tmp_path), pd.DataFrame({"id": ["abc"], "search_id": ["new"]}), search).iloc[0]
    assert "stale" in row["flags"]


def test_an_int8_bundle_shows_its_int8_top1(tmp_path):
    """An INT8 bundle ships the quantized model: its measured top-1 is the INT8 one, with the drop."""
    import json

    from hwnas.dashboard.data import RunFiles, load_exports

    b = tmp_path / "exports" / "abc-cpu-ort-int8"
    b.mkdir(parents=True)
    (b / "model.json").write_text(json.dumps({"id": "abc", "status": "verified", "accuracy": {
        "top1": 97.0, "int8": {"top1_int8": 96.6, "top1_fp32": 97.0, "drop": 0.4}}}))
    (b / "verify.json").write_text(json.dumps({"passed": True, "device": "cpu-ort-int8"}))
    row = load_exports(RunFiles(tmp_path)).iloc[0]
    assert row["device"] == "cpu-ort-int8" and row["measured_top1"] == 96.6 and row["int8_drop"] == 0.4


def test_the_bundle_zip_is_cached_until_a_file_changes(tmp_path):
    import os

    from hwnas.dashboard.data import bundle_signature

    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    sig = bundle_signature(tmp_path)
    assert bundle_signature(tmp_path) == sig
    os.utime(tmp_path / "a.bin", ns=(1, 1))
    assert bundle_signature(tmp_path) != sig


def test_explored_points_are_the_searchs_own_population(tmp_path):
    """The grey cloud is what the search scored (explored.csv, written with pareto.csv), thinned to
    at most n; without that file it falls back to a sample of the space, and says which."""
    import pandas as pd

    from hwnas.dashboard.data import RunFiles, explored_points

    pd.DataFrame({"top1_pred": range(10), "ms_pred:cpu-ort": [0.1 * i for i in range(10)],
                  "search_id": "s"}).to_csv(tmp_path / "explored.csv", index=False)
    df = explored_points(RunFiles(tmp_path), "cpu-ort", n=5)
    assert list(df.columns) == ["ms", "top1_pred", "source"] and len(df) == 5
    assert (df["source"] == "search").all()
    assert explored_points(RunFiles(tmp_path), "cpu-openvino").empty  # not searched, no predictors here


def test_subnet_detail_shows_a_finetuned_subnets_numbers(monkeypatch, demo_run, tmp_path):
    """A fine-tuned subnet's record (what `hwnas finetune` writes) is on its detail page."""
    import json
    import shutil

    from hwnas.run import RunFiles

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    at = open_page(monkeypatch, run, "Subnet detail")
    chosen = at.selectbox[0].value if at.selectbox else None
    arch_id = str(chosen).split(" ")[0] if chosen else None
    assert arch_id
    folder = RunFiles(run).finetuned(arch_id)
    folder.mkdir(parents=True)
    (folder / "subnet.json").write_text(json.dumps({"extra": {"finetune": {
        "epochs": 3, "top1_before": {"val": 90.1, "test": 90.0}, "top1_after": {"val": 91.2, "test": 91.5},
        "n": {"val": 5000, "test": 10000}}}}))
    at = open_page(monkeypatch, run, "Subnet detail")
    assert any("Fine-tuned for 3 epoch(s)" in i.value and "91.50" in i.value for i in at.info), \
        [i.value for i in at.info]
