"""Every dashboard page on a run the tests create, through Streamlit's AppTest."""

from __future__ import annotations

import json

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
    assert not at.error, [e.value for e in at.error]
    return at


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def spec(at: AppTest, i: int = 0) -> dict:
    return json.loads(charts(at)[i].proto.spec)


def layer_data(at: AppTest, i: int, layer: dict):
    """A chart layer's data, as the page sent it (Streamlit ships Altair's datasets as Arrow)."""
    from streamlit import dataframe_util

    proto = charts(at)[i].proto
    named = {d.name: d.data.data for d in proto.datasets}
    return dataframe_util.convert_arrow_bytes_to_pandas_df(named[layer["data"]["name"]])


def points_layer(at: AppTest) -> tuple[dict, object]:
    """The Pareto chart's clickable layer (the one its click selection is defined on) and its data."""
    s = spec(at)
    views = s["params"][0]["views"]
    layer = next(lay for lay in s["layer"] if lay.get("name") in views)
    return layer, layer_data(at, 0, layer)


def frame(at: AppTest, column: str):
    """The first table on the page with `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def metric(at: AppTest, label: str) -> str:
    hits = [m.value for m in at.metric if m.label.startswith(label)]
    assert hits, [m.label for m in at.metric]
    return hits[0]


def pick_id(run) -> str:
    return json.loads((run / "search.json").read_text())["best"][0]["id"]


def test_overview_lists_each_stage(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Runs overview")
    table = frame(at, "stage")
    status = dict(zip(table["stage"], table["status"]))
    assert status["measurements"] == "done" and status["pareto front"] == "done"
    assert status["latency predictors"] == "missing" and status["exports"] == "missing"
    commands = " ".join(table["command"])
    assert "hwnas latency fit" in commands and "--device cpu-openvino" in commands  # the run's device


def test_one_recommended_subnet_everywhere(monkeypatch, demo_run):
    """search.json's best is what every page names, highlights and opens on."""
    best = pick_id(demo_run)
    at = open_page(monkeypatch, demo_run, "Runs overview")
    assert metric(at, "★ Recommended subnet") == best
    at = open_page(monkeypatch, demo_run, "Pareto front")
    rows = frame(at, "★")
    assert rows["★"].iloc[0] == "★" and rows["id"].iloc[0] == best and (rows["★"] != "").sum() == 1
    _, points = points_layer(at)
    assert list(points.loc[points["series"] == "recommended: the search's pick", "id"]) == [best]
    assert any(best in s.value for s in at.success)
    at = open_page(monkeypatch, demo_run, "Subnet detail")
    assert at.selectbox[0].value == best
    at = open_page(monkeypatch, demo_run, "Compare")
    summary = frame(at, "how").iloc[0]
    assert summary["recommended at this budget"] == best and summary["how"] == "the search's pick"


def test_pareto_page_plots_what_the_search_ranked(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    assert "6 subnets on the front" in at.caption[0].value
    assert len(frame(at, "★")) == 6
    s = json.dumps(spec(at), ensure_ascii=False)
    assert "latency on cpu-openvino (ms)" in s and "top-1 % (search objective; measured where marked)" in s
    assert any("predicted top-1 − 1 σ" in m.value and "clipped to 80–97 %" in m.value for m in at.markdown)
    line = next(lay for lay in spec(at)["layer"] if lay["mark"]["type"] == "line")
    assert line["encoding"]["y"]["field"] == "objective"
    for series in ("Pareto front (predicted top-1 − σ)", "measured top-1 and latency, within budget",
                   "measured latency (top-1 predicted)", "measured top-1 (latency predicted)",
                   "95 % interval of a measurement", "recommended: the search's pick", "latency budget"):
        assert series in s, series
    assert "ms, predicted" not in s and '"zero": true' not in s


def test_pareto_legend_symbols_are_distinct_and_tooltips_never_null(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    layer, points = points_layer(at)
    shape = layer["encoding"]["shape"]["scale"]
    symbols = dict(zip(shape["domain"], shape["range"]))
    marks = [symbols[s] for s in set(points["series"])]
    assert len(marks) == 5 and len(set(marks)) == 5  # front, both measured, latency only, top-1 only, the pick
    tips = [t["field"] for t in layer["encoding"]["tooltip"]]
    assert points[tips].notna().all().all() and not points[tips].isin(["null", "None", "nan"]).any().any()


def test_pareto_history_and_table_filters(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    assert any(lay.get("facet") or "facet" in lay for lay in (spec(at, i) for i in range(len(charts(at)))))
    at.checkbox(key="pareto_measured").check().run()
    assert len(frame(at, "★")) == 4  # measured: two both, one top-1 only, one latency only
    at.text_input(key="pareto_filter").input(pick_id(demo_run)[:6]).run()
    assert list(frame(at, "★")["id"]) == [pick_id(demo_run)]


def test_device_comparison_has_rank_correlation(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Device comparison")
    row = frame(at, "device A").iloc[0]
    assert {row["device A"], row["device B"]} == {"cpu-ort", "cpu-openvino"}
    assert row["shared subnets"] == 12 and row["Kendall τ"] > 0.5 and row["note"] == "ok"
    assert not at.warning
    assert charts(at)


def test_subnet_detail_shows_the_arch_costs_and_how_to_export(monkeypatch, demo_run):
    from hwnas.run import open_run

    at = open_page(monkeypatch, demo_run, "Subnet detail")
    run = open_run(demo_run, create=False)
    arch_json, command = at.code[0].value, at.code[1].value
    assert run.family.arch_from_json(arch_json, run.space.width_mult).id == pick_id(demo_run)
    assert command == f"hwnas export --run {demo_run} --device cpu-openvino --subnet {pick_id(demo_run)}"
    assert metric(at, "MACs").endswith(" M") and metric(at, "Parameters").endswith(" M")
    latency = frame(at, "p90 ms")
    assert set(latency["device"]) == {"cpu-ort", "cpu-openvino"} and latency["p90 ms"].notna().all()


def test_training_curves_name_the_loss(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Supernet training")
    assert len(charts(at)) == 2 and len(frame(at, "first epoch")) == 6
    title = spec(at, 1)["layer"][-1]["encoding"]["y"]["title"]
    assert title == "training loss: cross-entropy / cross-entropy + distillation"
    assert any("distillation" in c.value for c in at.caption)


def test_predictor_page_says_what_is_missing(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Predictor quality")
    assert any("hwnas latency fit" in c.value for c in at.code)
    assert at.dataframe  # gene importance from the measurements


def test_predictor_page_plots_out_of_fold_points(monkeypatch, demo_run):
    from hwnas.latency.api import fit_from_run

    _, report = fit_from_run(demo_run, "cpu-openvino", n_classes=10, folds=3)
    at = open_page(monkeypatch, demo_run, "Predictor quality")
    points = spec(at)["layer"][-1]
    assert set(layer_data(at, 0, points)["split"]) == {"out-of-fold"}  # all trained it: none plotted in-sample
    oof = metric(at, "Cross-validation: within ±10 %")
    assert oof == f"{100 * report['chosen_metrics']['within_10']:.0f} %"  # the fit's own cross-validation


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


def test_overview_has_one_hypervolume_with_n_and_intervals(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Runs overview")
    hv = metric(at, "Hypervolume")
    assert any("area (top-1 % × ms) the front dominates" in c.value for c in at.caption)
    rec = frame(at, "predicted")
    top1 = rec.iloc[0]
    assert top1["measured"] == "95.20" and top1["95 % interval"] == "92.96–96.75" and top1["from"].startswith("500 ")
    latency = rec.iloc[1]
    assert latency["95 % interval"] == "1.152–1.248" and "1.272 ms" in latency["from"]
    runs = frame(at, "searched at")
    assert list(runs["run"]) == ["demo"] and runs["hypervolume"].iloc[0] == hv
    at = open_page(monkeypatch, demo_run, "Compare")
    assert frame(at, "how")["hypervolume at this budget"].iloc[0] == hv  # the same number on Compare


def test_compare_page_has_a_budget_slider_and_summary(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Compare")
    slider = at.slider[0]
    assert slider.max >= 1.5 and slider.value == pytest.approx(1.5, abs=0.01)
    summary = frame(at, "how")
    assert {"front size", "hypervolume at this budget", "best measured top-1 % within budget"} <= set(summary.columns)
    assert summary.map(lambda v: isinstance(v, str) and v not in ("None", "nan")).all().all()
    slider.set_value(slider.min).run()
    row = frame(at, "how").iloc[0]
    assert row["recommended at this budget"] == "no subnet of this front fits the budget"
    assert row["best measured top-1 % within budget"] == "none measured within budget"


def test_a_damaged_sibling_run_leaves_the_overview_and_compare_usable(monkeypatch, demo_run):
    """Runs overview and Compare read every run beside the served one: a damaged one is said on its
    own row (and left out of Compare), never an error for the whole page."""
    import shutil

    broken = demo_run.parent / "broken"
    shutil.copytree(demo_run, broken)
    store = broken / "measurements.parquet"
    store.write_bytes(store.read_bytes()[:100])
    at = open_page(monkeypatch, demo_run, "Runs overview")
    runs = frame(at, "supernet").set_index("run")
    assert {"demo", "broken"} <= set(runs.index) and runs.loc["broken", "supernet"].startswith("unreadable:")
    at = open_page(monkeypatch, demo_run, "Compare")
    assert at.slider  # the healthy run's front is still compared
