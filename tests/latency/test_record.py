"""A latency predictor file's meta is read through one typed schema (`hwnas.latency.record`)."""

from __future__ import annotations

import pytest

from hwnas.errors import CheckpointError
from hwnas.families import DEFAULT_FAMILY
from hwnas.latency.record import PredictorMeta


def test_meta_round_trips_and_keeps_what_a_newer_hwnas_adds():
    meta = PredictorMeta.from_dict({"family": "ofa-mbv3", "width_mult": 1.2, "n_classes": 10,
                                    "cv": {"chosen": "analytic", "oof_log_ratios": [0.01, 0.02], "new_key": 1},
                                    "notes": {"fitted_on": ["a", "b"], "front": ["b"], "someone's": "note"}})
    assert meta.cv.oof_log_ratios == [0.01, 0.02] and meta.notes.fitted_on == ["a", "b"]
    again = PredictorMeta.from_dict(meta.to_dict())
    assert again == meta and again.to_dict()["cv"]["new_key"] == 1 and again.to_dict()["notes"]["someone's"] == "note"


def test_a_version_1_meta_names_no_family_and_is_the_first_familys():
    meta = PredictorMeta.from_dict({"device": "cpu-ort", "cv": None, "notes": None})
    assert (meta.family, meta.width_mult, meta.n_classes) == (DEFAULT_FAMILY, 1.0, 1000)
    assert meta.cv.oof_log_ratios == [] and meta.notes.fitted_on is None


@pytest.mark.parametrize("bad", [{"cv": {"oof_log_ratios": "many"}}, {"notes": {"fitted_on": 3}},
                                 {"n_classes": "ten"}])
def test_a_malformed_meta_is_one_clear_error(bad):
    with pytest.raises(CheckpointError, match="latency predictor meta: "):
        PredictorMeta.from_dict(bad)
