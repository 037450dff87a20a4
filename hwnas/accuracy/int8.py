"""What a reduced precision (INT8, bf16) costs in accuracy, per architecture: a measured table and a
drop model.

The table (`<run>/accuracy-<precision>-<device>.csv`, one per reduced-precision device: the drop
belongs to that runtime, e.g. its quantizer) holds, for a sample of subnets, the test top-1 of the
device's artifact (``top1_<precision>``) and of the fp32 subnet on the same images, their
difference (`drop`, points) and top-1 agreement. Each row is measured exactly as an INT8 or bf16
export bundle is checked (`hwnas.export.api`): the subnet is BN-recalibrated, compiled by the
device's backend (INT8: calibrated on images from the training split, never test images), and
`hwnas.accuracy.precision.precision_accuracy` runs the compiled artifact and the fp32 subnet on the test split.

bf16 is measured, not assumed lossless: compiling it is cheap (no calibration) and its 8-bit mantissa
does flip the top-1 of images near a decision boundary, so the search and its verification see
the drop the runtime really has (typically ~0 points) instead of a promise.

The drop model (`DropModel`) is honest about how much the table can say: with fewer than
`RIDGE_MIN_ROWS` rows it is the median measured drop with its spread (the same drop for every
subnet); with enough rows a ridge regression on the accuracy features (clipped to the measured
range), whose out-of-fold error is reported. `describe()` says which, for search.json.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from hwnas.errors import DeviceError, InputError

__all__ = ["RIDGE_MIN_ROWS", "INT8_COLUMNS", "DropModel", "Int8DropModel", "drop_columns", "drop_table_path",
           "int8_table_path", "read_drop_table", "read_int8_table", "measure_drop_table", "measure_int8_table",
           "fit_drop_model", "ensure_drop_model", "ensure_int8_drop_model", "int8_variant", "precision_top1",
           "quantized_top1"]

RIDGE_MIN_ROWS = 30  # below this, the drop model is the median measured drop (with its spread)
Progress = Callable[..., Any]
_OFFSET = 50.0  # drops fitted as 50 + drop (the accuracy predictors take percentages)


def drop_columns(precision: str) -> list[str]:
    """The measured columns of `precision`'s table (INT8 also says what ran in int8 and how it was
    calibrated)."""
    extra = ["int8_share", "calibration"] if precision == "int8" else []
    return ["top1_fp32", f"top1_{precision}", "drop", "top1_agreement", "n", *extra]


INT8_COLUMNS = drop_columns("int8")


def drop_table_path(run_dir: str | Path, device: str, precision: str) -> Path:
    from hwnas.run import RunFiles

    return RunFiles(Path(run_dir)).drop_table(device, precision)


def int8_table_path(run_dir: str | Path, device: str) -> Path:
    return drop_table_path(run_dir, device, "int8")


def int8_variant(device: str, devices_file: str | Path | None = None) -> str:
    """The INT8 device of `device`: itself when its precision is int8, else ``<device>-int8``
    (`hwnas.devices.registry.precision_variant`)."""
    from hwnas.devices.registry import precision_variant

    return precision_variant(device, "int8", devices_file)


def _reduced(device: str, devices_file: str | Path | None):
    """The Device `device`, which must run a reduced precision (one line otherwise)."""
    from hwnas.devices import get_device

    dev = get_device(device, devices_file)
    if dev.precision == "fp32":
        raise InputError(f"device '{device}' runs fp32: it has no accuracy drop to measure; name its bf16 "
                         "or int8 variant")
    return dev


def read_drop_table(run_dir: str | Path, device: str, precision: str, space=None):
    """The run's accuracy table of `precision` for `device` (empty when none yet)."""
    import pandas as pd

    from hwnas.accuracy.table import frame_codes

    path = drop_table_path(run_dir, device, precision)
    if not path.exists():
        return pd.DataFrame(columns=["id", *drop_columns(precision)])
    df = pd.read_csv(path)
    if "id" in df:
        df["id"] = df["id"].astype(str)
    if space is not None and len(df):
        frame_codes(space, df, source=str(path))  # one line naming row and column when malformed
    return df


def read_int8_table(run_dir: str | Path, device: str, space=None):
    """The run's INT8 accuracy table for `device` (empty when none yet)."""
    return read_drop_table(run_dir, device, "int8", space)


def measure_drop_table(run, archs: Sequence[Any], device: str, *, devices_file: str | Path | None = None,
                       progress: Progress | None = None):
    """Measure the subnets of `archs` that the accuracy table of reduced-precision `device` lacks
    (see the module doc) and append them (one writer, under the run's lock); returns the table's
    rows for `archs`."""
    import pandas as pd
    import torch

    from hwnas.accuracy.table import values_frame
    from hwnas.accuracy.precision import precision_accuracy
    from hwnas.fileio import atomic_path
    from hwnas.run import run_lock
    from hwnas.supernet.bn import recalibrate_bn
    from hwnas.supernet.data import (BN_IMAGES, CALIBRATION_IMAGES, build_loaders, calibration_loader,
                                     spread_images)
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    space = run.space
    dev = _reduced(device, devices_file)
    precision, columns = dev.precision, drop_columns(dev.precision)
    path = drop_table_path(run.run_dir, device, precision)
    table = read_drop_table(run.run_dir, device, precision, space)
    done = set(table["id"].astype(str))
    todo = list({a.id: a for a in archs if a.id not in done}.values())
    if todo:
        backend = dev.backend_impl()
        reason = backend.available()
        if reason:
            raise DeviceError(f"device '{device}' is not usable here: {reason}; the {precision} accuracy table "
                              f"is measured by running the {precision} artifact, so build it where the device runs")
        model, meta = load_supernet(run.supernet)
        loaders = build_loaders(data_config_of(meta, run.data))
        calib = calibration_loader(loaders.train, n_images=BN_IMAGES, seed=0)
        work = Path(tempfile.mkdtemp(prefix=f"hwnas-{precision}-acc-"))
        try:
            for k, arch in enumerate(todo):
                if progress:
                    progress(f"{precision}-accuracy", done=len(archs) - len(todo) + k, total=len(archs))
                subnet = model.get_subnet(arch).eval()
                recalibrate_bn(subnet, calib, len(calib), resolution=arch.r)
                images = spread_images(calib.dataset, CALIBRATION_IMAGES, arch.r)[0]  # training images, never test
                artifact = backend.compile(subnet, torch.zeros(1, 3, arch.r, arch.r), work / arch.id,
                                           calibration=images)  # (only INT8 calibrates)
                runner = backend.load(artifact)
                try:
                    rec = precision_accuracy(subnet, runner, loaders.test, arch.r, precision)
                finally:
                    runner.close()
                rec["int8_share"] = artifact.metadata.get("int8_share", np.nan)
                rec["calibration"] = artifact.metadata.get("calibration", "")
                row = {**values_frame(space, space.to_matrix([arch])).iloc[0].to_dict(), "id": arch.id,
                       **{c: rec.get(c, np.nan) for c in columns}}
                with run_lock(run.run_dir, path.name):
                    table = read_drop_table(run.run_dir, device, precision, space)
                    if arch.id not in set(table["id"]):
                        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True) if len(table) \
                            else pd.DataFrame([row])
                        with atomic_path(path, suffix=".csv") as tmp:
                            table.to_csv(tmp, index=False)
                shutil.rmtree(work / arch.id, ignore_errors=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if progress:
            progress(f"{precision}-accuracy", done=len(archs), total=len(archs))
    wanted = {a.id for a in archs}
    return table[table["id"].astype(str).isin(wanted)].reset_index(drop=True)


measure_int8_table = measure_drop_table  # the INT8 name of the same measurement


def precision_top1(run, archs: Sequence[Any], device: str, *, devices_file: str | Path | None = None,
                   progress: Progress | None = None) -> np.ndarray:
    """Test top-1 (%) of the artifacts of `archs` on reduced-precision `device` (measured once, kept
    in its accuracy table)."""
    precision = _reduced(device, devices_file).precision
    rows = measure_drop_table(run, archs, device, devices_file=devices_file, progress=progress)
    by_id = dict(zip(rows["id"].astype(str), rows[f"top1_{precision}"].astype(float)))
    return np.array([by_id[a.id] for a in archs], dtype=np.float64)


quantized_top1 = precision_top1  # the INT8 name


@dataclass
class DropModel:
    """Predicted top-1 drop (points, fp32 minus `precision`) of subnets compiled for `device`.

    kind "median": the median measured drop for every subnet, sigma from the measured spread;
    kind "ridge": a ridge on the accuracy features (`hwnas.accuracy.predictors.RidgePredictor`),
    its own sigma."""

    device: str
    kind: str
    rows: int
    median: float
    spread: dict[str, float] = field(default_factory=dict)
    ridge: Any = None
    oof: dict[str, float] | None = None
    precision: str = "int8"

    def predict_with_std(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(m)
        if self.ridge is not None:
            mean, std = self.ridge.predict_with_std(np.asarray(m, dtype=np.int32))
            return np.asarray(mean, np.float64) - _OFFSET, np.asarray(std, np.float64)
        return np.full(n, self.median), np.full(n, self.spread.get("std", 0.0))

    def predict(self, m: np.ndarray) -> np.ndarray:
        return self.predict_with_std(m)[0]

    def describe(self) -> dict[str, Any]:
        """search.json's account of the drop model: which kind, from how many measured rows."""
        how = (f"median measured drop of {self.rows} subnets, the same for every subnet (fewer than "
               f"{RIDGE_MIN_ROWS} rows: too few to model per architecture)" if self.kind == "median" else
               f"ridge on the accuracy features, fitted on {self.rows} measured subnets, clipped to the "
               "measured range")
        return {"device": self.device, "precision": self.precision, "kind": self.kind, "rows": self.rows,
                "median_drop": self.median, "spread": self.spread, "out_of_fold": self.oof,
                "table": drop_table_path("", self.device, self.precision).name,
                "note": how + f"; {self.precision} top-1 is predicted as fp32 top-1 minus the predicted drop"}


Int8DropModel = DropModel  # the INT8 name


def fit_drop_model(space, table, device: str, n_classes: int = 10, seed: int = 0, precision: str = "int8"
                   ) -> DropModel:
    """The drop model of a measured accuracy table of `precision` (see the module doc)."""
    from hwnas.accuracy.table import frame_codes

    table = table[np.isfinite(table["drop"].astype(float))]
    if not len(table):
        raise InputError(f"the {precision} accuracy table of '{device}' has no measured rows")
    y = table["drop"].to_numpy(np.float64)
    q25, q75 = np.percentile(y, [25, 75])
    spread = {"std": float(y.std(ddof=1)) if len(y) > 1 else 0.0, "p25": float(q25), "p75": float(q75),
              "min": float(y.min()), "max": float(y.max())}
    model = DropModel(device, "median", len(y), float(np.median(y)), spread, precision=precision)
    if len(y) >= RIDGE_MIN_ROWS:
        from hwnas.accuracy.predictors import make_accuracy_predictor
        from hwnas.accuracy.select import cross_val_predict, regression_metrics

        m = frame_codes(space, table)

        def make():
            return make_accuracy_predictor("ridge", space, n_classes, features="compact")

        # the predictor fits percentages; drops may be negative, so it fits 50 + drop
        oof = regression_metrics(cross_val_predict(make, m, y + _OFFSET, folds=5, seed=seed)[0] - _OFFSET, y)
        model.kind, model.ridge, model.oof = "ridge", make().fit(m, y + _OFFSET), oof
    return model


def ensure_drop_model(run, device: str, n: int = 8, *, seed: int = 0, devices_file: str | Path | None = None,
                      progress: Progress | None = None, space=None) -> DropModel:
    """The drop model of reduced-precision `device`, measuring a sample of `n` subnets first when
    its table has fewer rows (small to large: the sample of the accuracy table)."""
    from hwnas.accuracy.table import accuracy_sample

    space = space or run.space
    precision = _reduced(device, devices_file).precision
    table = read_drop_table(run.run_dir, device, precision, space)
    if len(table) < n:
        archs = space.from_matrix(accuracy_sample(space, n, seed))
        measure_drop_table(run, archs, device, devices_file=devices_file, progress=progress)
        table = read_drop_table(run.run_dir, device, precision, space)
    return fit_drop_model(space, table, device, n_classes=run.n_classes, seed=seed, precision=precision)


ensure_int8_drop_model = ensure_drop_model  # the INT8 name
