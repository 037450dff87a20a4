"""Tiny stand-in predictors for search tests (module-level, so worker processes can unpickle them).

They are exact functions of the architecture, so tests can tell what the right answer is."""

from __future__ import annotations

import numpy as np

from hwnas.families import NetworkSpec
from hwnas.space import SearchSpace

N_CLASSES = 10


def macs_of(archs, width_mult: float = 1.0) -> np.ndarray:
    from hwnas.supernet.stats import stats_frame

    m = SearchSpace.to_matrix(archs)
    return stats_frame(m, width_mult, N_CLASSES)["macs"].to_numpy(np.float64)


class MacsLatency:
    """ms = a + b * MMACs: additive per block, like a lookup table."""

    def __init__(self, a: float = 0.2, per_mmac: float = 0.05):
        self.a, self.per_mmac = a, per_mmac

    def predict(self, archs) -> np.ndarray:
        return self.a + self.per_mmac * macs_of(archs) / 1e6


class LogLatency(MacsLatency):
    """Not additive: forces the search to call the model itself."""

    def predict(self, archs) -> np.ndarray:
        return np.log1p(super().predict(archs)) * 3.0


class SynthAccuracy:
    """Saturating in MACs plus a bonus for wide expand ratios in used slots: bigger is better but
    not only MACs count, so the best subnet under a budget is not simply the largest."""

    def predict(self, archs) -> np.ndarray:
        m = SearchSpace.to_matrix(archs)
        macs = macs_of(m) / 1e6
        d = m[:, 41:46]
        used = np.repeat(d, 4, axis=1) > np.tile(np.arange(4), 5)
        wide = ((m[:, 21:41] == 6) & used).sum(axis=1) / np.maximum(used.sum(axis=1), 1)
        return 60.0 + 25.0 * (1 - np.exp(-macs / 15.0)) + 4.0 * wide


class FamilyMacsLatency:
    """ms = a + b * MMACs of any family's int rows (its exact `count_params_macs`): a deterministic
    stand-in latency predictor for searches on families hwnas latency models do not cover yet."""

    def __init__(self, space, a: float = 0.2, per_mmac: float = 0.05):
        self.space, self.a, self.per_mmac = space, a, per_mmac

    def predict(self, archs) -> np.ndarray:
        m = np.asarray(self.space.to_matrix(archs), dtype=np.int64)
        macs = self.space.family.count_params_macs(m, self.space.width_mult, N_CLASSES)[1]
        return self.a + self.per_mmac * np.asarray(macs, dtype=np.float64) / 1e6


class FamilySynthAccuracy:
    """Saturating in MACs plus a bonus for large active gene values: any family."""

    def __init__(self, space):
        self.space = space

    def predict(self, archs) -> np.ndarray:
        m = np.asarray(self.space.to_matrix(archs), dtype=np.int64)
        macs = self.space.family.count_params_macs(m, self.space.width_mult, N_CLASSES)[1] / 1e6
        x = self.space.encode(m, "ordinal")[:, :-1]
        act = self.space.active_mask(m)
        big = (x * act).sum(axis=1) / np.maximum(act.sum(axis=1), 1)
        return 60.0 + 25.0 * (1 - np.exp(-macs / np.median(macs))) + 0.5 * big


def fit_stub_predictors(run, device: str):
    """Save, where search looks, an analytic latency predictor fitted to `MacsLatency` and a ridge
    accuracy predictor fitted to `SynthAccuracy` (200 sampled subnets of the run's space); returns
    (the latency predictor, a budget at its median subnet)."""
    from hwnas.accuracy import ACCURACY_PREDICTOR, accuracy_sample, make_accuracy_predictor
    from hwnas.latency import AnalyticPredictor
    from hwnas.search.problem import latency_predictor_path

    m = accuracy_sample(run.space, 200, seed=0)
    lat = AnalyticPredictor(features="stage", net=NetworkSpec("ofa-mbv3", 1.0, N_CLASSES)).fit(m, MacsLatency().predict(m))
    lat.save(latency_predictor_path(run.run_dir, device))
    acc = make_accuracy_predictor("ridge", run.space, N_CLASSES, features="full").fit(m, SynthAccuracy().predict(m))
    acc.save(run.run_dir / ACCURACY_PREDICTOR)
    return lat, float(np.median(lat.predict(m)))
