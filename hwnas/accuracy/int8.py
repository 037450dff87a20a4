"""What INT8 costs in accuracy, per architecture: a measured table and a drop model.

The table (`<run>/accuracy-int8-<device>.csv`, one per INT8 device: the drop belongs to that
runtime's quantizer) holds, for a sample of subnets, the test top-1 of the quantized artifact and
of the fp32 subnet on the same images, their difference (`drop`, points) and top-1 agreement.
Each row is measured exactly as an INT8 export bundle is checked (`hwnas.export.api`): the subnet
is BN-recalibrated, compiled by the INT8 device's backend with calibration images from the
training split (never test images), and `hwnas.export.api.int8_accuracy` runs the compiled
artifact and the fp32 subnet on the test split.

The drop model (`Int8DropModel`) is honest about how much the table can say: with fewer than
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

__all__ = ["RIDGE_MIN_ROWS", "INT8_COLUMNS", "Int8DropModel", "int8_table_path", "read_int8_table",
           "measure_int8_table", "fit_drop_model", "ensure_int8_drop_model", "int8_variant", "quantized_top1"]

RIDGE_MIN_ROWS = 30  # below this, the drop model is the median measured drop (with its spread)
INT8_COLUMNS = ["top1_fp32", "top1_int8", "drop", "top1_agreement", "n", "int8_share", "calibration"]
Progress = Callable[..., Any]
_OFFSET = 50.0  # drops fitted as 50 + drop (the accuracy predictors take percentages)


def int8_table_path(run_dir: str | Path, device: str) -> Path:
    return Path(run_dir) / f"accuracy-int8-{device}.csv"


def int8_variant(device: str, devices_file: str | Path | None = None, *, check: bool = True) -> str:
    """The INT8 device of `device`: itself when its precision is int8, else ``<device>-int8``
    (one line when that is no known device)."""
    from hwnas.devices import get_device
    from hwnas.errors import HwnasError

    try:
        if get_device(device, devices_file).precision == "int8":
            return device
    except HwnasError:
        if check:
            raise
    name = f"{device}-int8"
    if check:
        try:
            dev = get_device(name, devices_file)
        except HwnasError:
            raise InputError(f"device '{device}' has no INT8 variant ('{name}' is no known device); "
                             "`hwnas devices list` shows the INT8 devices") from None
        if dev.precision != "int8":
            raise InputError(f"device '{name}' is not an INT8 device (precision {dev.precision})")
    return name


def read_int8_table(run_dir: str | Path, device: str, space=None):
    """The run's INT8 accuracy table for `device` (empty when none yet)."""
    import pandas as pd

    from hwnas.accuracy.table import frame_codes

    path = int8_table_path(run_dir, device)
    if not path.exists():
        return pd.DataFrame(columns=["id", *INT8_COLUMNS])
    df = pd.read_csv(path)
    if "id" in df:
        df["id"] = df["id"].astype(str)
    if space is not None and len(df):
        frame_codes(space, df, source=str(path))  # one line naming row and column when malformed
    return df


def measure_int8_table(run, archs: Sequence[Any], device: str, *, devices_file: str | Path | None = None,
                       progress: Progress | None = None):
    """Measure the subnets of `archs` that the INT8 table of `device` lacks (see the module doc)
    and append them (one writer, under the run's lock); returns the table's rows for `archs`."""
    import pandas as pd
    import torch

    from hwnas.accuracy.table import values_frame
    from hwnas.devices import get_device
    from hwnas.export.api import int8_accuracy
    from hwnas.fileio import atomic_path
    from hwnas.run import run_lock
    from hwnas.supernet.bn import recalibrate_bn
    from hwnas.supernet.data import (BN_IMAGES, CALIBRATION_IMAGES, build_loaders, calibration_loader,
                                     spread_images)
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    space = run.space
    path = int8_table_path(run.run_dir, device)
    table = read_int8_table(run.run_dir, device, space)
    done = set(table["id"].astype(str))
    todo = list({a.id: a for a in archs if a.id not in done}.values())
    if todo:
        dev = get_device(device, devices_file)
        if dev.precision != "int8":
            raise InputError(f"device '{device}' is not an INT8 device (precision {dev.precision})")
        backend = dev.backend_impl()
        reason = backend.available()
        if reason:
            raise DeviceError(f"device '{device}' is not usable here: {reason}; the INT8 accuracy table is "
                              "measured by running the quantized artifact, so build it where the device runs")
        model, meta = load_supernet(run.supernet)
        loaders = build_loaders(data_config_of(meta, run.data))
        calib = calibration_loader(loaders.train, n_images=BN_IMAGES, seed=0)
        work = Path(tempfile.mkdtemp(prefix="hwnas-int8-acc-"))
        try:
            for k, arch in enumerate(todo):
                if progress:
                    progress("int8-accuracy", done=len(archs) - len(todo) + k, total=len(archs))
                subnet = model.get_subnet(arch).eval()
                recalibrate_bn(subnet, calib, len(calib), resolution=arch.r)
                images = spread_images(calib.dataset, CALIBRATION_IMAGES, arch.r)[0]  # training images, never test
                artifact = backend.compile(subnet, torch.zeros(1, 3, arch.r, arch.r), work / arch.id,
                                           calibration=images)
                runner = backend.load(artifact)
                try:
                    rec = int8_accuracy(subnet, runner, loaders.test, arch.r)
                finally:
                    runner.close()
                rec["int8_share"] = artifact.metadata.get("int8_share", np.nan)
                rec["calibration"] = artifact.metadata.get("calibration", "")
                row = {**values_frame(space, space.to_matrix([arch])).iloc[0].to_dict(), "id": arch.id,
                       **{c: rec.get(c, np.nan) for c in INT8_COLUMNS}}
                with run_lock(run.run_dir, path.name):
                    table = read_int8_table(run.run_dir, device, space)
                    if arch.id not in set(table["id"]):
                        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True) if len(table) \
                            else pd.DataFrame([row])
                        with atomic_path(path, suffix=".csv") as tmp:
                            table.to_csv(tmp, index=False)
                shutil.rmtree(work / arch.id, ignore_errors=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if progress:
            progress("int8-accuracy", done=len(archs), total=len(archs))
    wanted = {a.id for a in archs}
    return table[table["id"].astype(str).isin(wanted)].reset_index(drop=True)


def quantized_top1(run, archs: Sequence[Any], device: str, *, devices_file: str | Path | None = None,
                   progress: Progress | None = None) -> np.ndarray:
    """Test top-1 (%) of the quantized artifacts of `archs` on INT8 `device` (measured once, kept
    in the INT8 table)."""
    rows = measure_int8_table(run, archs, device, devices_file=devices_file, progress=progress)
    by_id = dict(zip(rows["id"].astype(str), rows["top1_int8"].astype(float)))
    return np.array([by_id[a.id] for a in archs], dtype=np.float64)


@dataclass
class Int8DropModel:
    """Predicted top-1 drop (points, fp32 minus int8) of subnets quantized for `device`.

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
        return {"device": self.device, "kind": self.kind, "rows": self.rows, "median_drop": self.median,
                "spread": self.spread, "out_of_fold": self.oof, "table": int8_table_path("", self.device).name,
                "note": how + "; int8 top-1 is predicted as fp32 top-1 minus the predicted drop"}


def fit_drop_model(space, table, device: str, n_classes: int = 10, seed: int = 0) -> Int8DropModel:
    """The drop model of a measured INT8 table (see the module doc)."""
    from hwnas.accuracy.table import frame_codes

    table = table[np.isfinite(table["drop"].astype(float))]
    if not len(table):
        raise InputError(f"the INT8 accuracy table of '{device}' has no measured rows")
    y = table["drop"].to_numpy(np.float64)
    q25, q75 = np.percentile(y, [25, 75])
    spread = {"std": float(y.std(ddof=1)) if len(y) > 1 else 0.0, "p25": float(q25), "p75": float(q75),
              "min": float(y.min()), "max": float(y.max())}
    model = Int8DropModel(device, "median", len(y), float(np.median(y)), spread)
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


def ensure_int8_drop_model(run, device: str, n: int = 8, *, seed: int = 0,
                           devices_file: str | Path | None = None, progress: Progress | None = None,
                           space=None) -> Int8DropModel:
    """The drop model of INT8 `device`, measuring a sample of `n` subnets first when the table
    has fewer rows (small to large: the sample of the accuracy table)."""
    from hwnas.accuracy.table import accuracy_sample

    space = space or run.space
    table = read_int8_table(run.run_dir, device, space)
    if len(table) < n:
        archs = space.from_matrix(accuracy_sample(space, n, seed))
        measure_int8_table(run, archs, device, devices_file=devices_file, progress=progress)
        table = read_int8_table(run.run_dir, device, space)
    return fit_drop_model(space, table, device, n_classes=run.n_classes, seed=seed)
