"""`SearchSettings`: every search setting checked once, in the library's terms; the CLI re-spells
the same line with its flags; `run_search(run_dir, settings)` and the earlier keyword call are one
code path."""

from __future__ import annotations

import pandas as pd
import pytest

from hwnas.errors import InputError
from hwnas.search import SearchSettings
from hwnas.search.checks import SettingError


@pytest.mark.parametrize("changes, says, flag_says", [
    ({"top_k": 0}, "top_k must be at least 1, got 0", "--top-k must be at least 1"),
    ({"population": 0}, "population must be at least 1, got 0; leave it out for the default",
     "--population must be at least 1"),
    ({"n_trials": 2.5}, "n_trials must be a whole number, got 2.5", "--trials must be a whole number"),
    ({"latency_ms": float("nan")}, "latency_ms must be a positive number of milliseconds", "--latency-ms must be"),
    ({"latency_ms": (1.0, 2.0)}, "give one latency_ms for all devices or one per device", "give one --latency-ms"),
    ({"device": ("a", "a")}, "a device is named twice", "a --device is named twice"),
    ({"max_macs": 0}, "max_macs must be a positive count (e.g. 3e8), got 0; leave it out for no limit",
     "--max-macs must be a positive count"),
    ({"precision": "fp16"}, "precision must be one of fp32, bf16, int8, auto, got 'fp16'", "--precision must be"),
    ({"workers": 2}, "workers and storage apply to optuna-nsga2, optuna-tpe", "--workers and --storage apply to"),
    ({"latency_margin": 0.9}, "latency_margin must be within [0, 0.5)", "--latency-margin must be within"),
    ({"accuracy_risk": -1.0}, "accuracy_risk must be within [0, 10)", "--accuracy-risk must be within"),
    ({"objectives": ("ms:cpu-ort",)}, "objectives must include top1", "--objective must include top1"),
    ({"int8_samples": 0}, "int8_samples must be at least 1", "--int8-samples must be at least 1"),
    ({"accuracy_checks": 0}, "accuracy_checks must be at least 1", "--accuracy-checks must be at least 1"),
])
def test_a_broken_setting_is_one_line_naming_it(changes, says, flag_says):
    from hwnas.cli import _search_flag

    kw = {"device": "cpu-ort", "latency_ms": 5.0, **changes}
    with pytest.raises(SettingError) as err:
        SearchSettings(**kw)
    assert isinstance(err.value, InputError) and str(err.value).startswith(says) and "\n" not in str(err.value)
    assert "--" not in str(err.value)  # the library's terms, not the CLI's
    assert err.value.render(_search_flag).startswith(flag_says)


def test_settings_normalise_devices_and_budgets():
    one = SearchSettings("cpu-ort", 5)
    assert one.budgets == {"cpu-ort": 5.0} and one.devices == ["cpu-ort"]
    assert one.goals.objectives == ("top1", "ms:cpu-ort")
    two = SearchSettings(("a", "b"), (1.0, 2.0), objectives=["top1", "ms:b", "macs"])
    assert two.budgets == {"a": 1.0, "b": 2.0} and two.objectives == ("top1", "ms:b", "macs")
    assert two.goals.count_columns() == ["macs"]
    with pytest.raises(SettingError, match="^top_k"):
        one.replace(top_k=0)


def test_the_settings_call_and_the_keyword_call_write_the_same_search(tiny_supernet, tmp_path):
    from search_stubs import fit_stub_predictors

    from hwnas.run import open_run
    from hwnas.search.api import run_search

    cfg = open_run(tmp_path / "run", supernet=tiny_supernet)
    _, budget = fit_stub_predictors(cfg, "cpu-ort")
    kw = dict(top_k=2, seed=3, verify=False, plot=False, population=20, generations=5, max_params=1e9)

    def written():
        return pd.read_csv(cfg.files.pareto).drop(columns="search_id")

    old = run_search(cfg.run_dir, "cpu-ort", budget, **kw)
    first = written()
    new = run_search(cfg.run_dir, SearchSettings("cpu-ort", budget, **kw))
    pd.testing.assert_frame_equal(first, written())
    assert [b["id"] for b in old.best] == [b["id"] for b in new.best]
    with pytest.raises(TypeError, match="SearchSettings field"):
        run_search(cfg.run_dir, SearchSettings("cpu-ort", budget), top_k=3)
