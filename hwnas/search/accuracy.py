"""Accuracy of subnets: the run's accuracy table and the accuracy predictor fitted on it.

The table (`<run>/accuracy.csv`: flat arch columns, id, top1, loss, n) holds subnets of the run's
supernet evaluated on the held-out validation split after BN recalibration
(`hwnas.supernet.evaluation.evaluate_subnets`). Evaluating a subnet takes about a second, so the
table is built in chunks, each appended atomically, and a rerun evaluates only what is missing.
The sample is prefix-stable: asking for more subnets later extends the same list.

The predictor is Once-for-All's: an MLP with three hidden layers of 400 on the one-hot encoding
(`SearchSpace.encode`), predicting top-1. It trains with torch but predicts with numpy (a few
matmuls, thousands of archs per call) and is saved as JSON + .npz, never pickled.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hwnas.errors import CheckpointError, InputError, TableError
from hwnas.fileio import atomic_path, atomic_write_json, read_npz
from hwnas.latency.metrics import kendall_tau, rmse
from hwnas.search.operators import sample_graded, unique_rows
from hwnas.space import FLAT_COLUMNS, Arch, SearchSpace

__all__ = ["ACCURACY_TABLE", "ACCURACY_PREDICTOR", "accuracy_sample", "build_accuracy_table",
           "read_accuracy_table", "MLPAccuracyPredictor", "fit_accuracy_predictor",
           "load_accuracy_predictor", "regression_metrics"]

ACCURACY_TABLE = "accuracy.csv"
ACCURACY_PREDICTOR = Path("predictors") / "accuracy.json"
FORMAT = "hwnas-accuracy-predictor"
VERSION = 1
_BLOCK = 50  # archs per seeded block of the prefix-stable sample

Progress = Callable[..., Any]  # progress(event, **fields)


# -- the table ---------------------------------------------------------------------------------
def accuracy_sample(space: SearchSpace, n: int, seed: int = 0) -> np.ndarray:
    """`n` distinct canonical subnets (int [n, 46]): the space's min and max, then seeded blocks,
    each half uniform over networks and half graded small-to-large (`sample_graded`), so the
    predictor also sees the small subnets tight budgets select. The first k rows of a larger
    sample are the same k rows."""
    if n < 1:
        raise InputError(f"the accuracy table needs at least 1 subnet, got n={n}")
    parts = [space.to_matrix([space.min_arch(), space.max_arch()])]
    total, b = 2, 0
    while total < n + 2 * _BLOCK:  # margin: duplicates are dropped below
        rng = np.random.default_rng([seed, b])
        half = _BLOCK // 2
        parts += [space.sample_matrix(_BLOCK - half, rng), sample_graded(space, half, rng)]
        total, b = total + _BLOCK, b + 1
    m = np.concatenate(parts)
    m = m[unique_rows(m)]
    return m[:n]


def read_accuracy_table(run_dir: str | Path):
    """The run's accuracy table (an empty DataFrame when there is none)."""
    import pandas as pd

    path = Path(run_dir) / ACCURACY_TABLE
    if not path.exists():
        return pd.DataFrame(columns=[*FLAT_COLUMNS, "id", "top1", "loss", "n"])
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise TableError(f"accuracy table {path} is unreadable ({str(err).splitlines()[0]}); "
                         "move it away and rebuild it with build_accuracy_table") from None
    missing = [c for c in (*FLAT_COLUMNS, "id", "top1") if c not in df.columns]
    if missing:
        raise TableError(f"{path} is not an hwnas accuracy table (missing {', '.join(missing[:4])})")
    return df


def build_accuracy_table(run, n: int = 1000, *, seed: int = 0, bn_images: int = 1000,
                         max_batches: int | None = None, chunk: int = 25,
                         progress: Progress | None = None):
    """Evaluate `n` sampled subnets of the run's supernet into `<run>/accuracy.csv` and return the
    table's rows for them. Already evaluated subnets are skipped; each chunk is appended atomically,
    so an interrupted build loses at most one chunk."""
    import pandas as pd

    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    space = run.space
    archs = space.from_matrix(accuracy_sample(space, n, seed))
    path = Path(run.run_dir) / ACCURACY_TABLE
    table = read_accuracy_table(run.run_dir)
    done = set(table["id"].astype(str))
    todo = [a for a in archs if a.id not in done]
    if progress:
        progress("accuracy", done=len(archs) - len(todo), total=len(archs))
    if todo:
        model, meta = load_supernet(run.supernet)
        loaders = build_loaders(data_config_of(meta))
        for lo in range(0, len(todo), chunk):
            part = todo[lo:lo + chunk]
            rows = evaluate_subnets(model, part, loaders, split="val", bn_images=bn_images, seed=seed,
                                    max_batches=max_batches)
            new = pd.DataFrame(space.to_matrix(part), columns=list(FLAT_COLUMNS))
            for key in ("id", "top1", "loss", "n"):
                new[key] = [r[key] for r in rows]
            table = new if table.empty else pd.concat([table, new], ignore_index=True)
            with atomic_path(path, suffix=".csv") as tmp:
                table.to_csv(tmp, index=False)
            if progress:
                progress("accuracy", done=len(archs) - len(todo) + lo + len(part), total=len(archs))
    wanted = {a.id for a in archs}
    return table[table["id"].astype(str).isin(wanted)].reset_index(drop=True)


# -- metrics -------------------------------------------------------------------------------------
def regression_metrics(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Held-out quality of an accuracy predictor: RMSE / MAE in top-1 points, and Kendall tau
    (what a search needs: the right order of subnets)."""
    err = np.asarray(pred, dtype=np.float64) - np.asarray(true, dtype=np.float64)
    return {"rmse": rmse(pred, true), "mae": float(np.mean(np.abs(err))),
            "kendall_tau": kendall_tau(pred, true), "n": int(len(err))}


# -- the predictor -------------------------------------------------------------------------------
class MLPAccuracyPredictor:
    """Top-1 (%) from the one-hot encoding: ReLU MLP, numpy inference."""

    kind = "mlp"

    def __init__(self, space: SearchSpace, weights: list[np.ndarray], biases: list[np.ndarray],
                 y_mean: float, y_std: float, meta: Mapping[str, Any] | None = None):
        self.space = space
        self.weights = [np.ascontiguousarray(w, dtype=np.float32) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float32) for b in biases]
        self.y_mean, self.y_std = float(y_mean), float(y_std)
        self.meta: dict[str, Any] = dict(meta or {})
        n_in = len(space.encoding_names("onehot"))
        if self.weights[0].shape[0] != n_in:
            raise CheckpointError(f"accuracy predictor expects {self.weights[0].shape[0]} input "
                                  f"features but the space encodes {n_in}; refit it for this space")

    @property
    def hidden(self) -> list[int]:
        return [w.shape[1] for w in self.weights[:-1]]

    @classmethod
    def fit(cls, space: SearchSpace, archs: Sequence[Arch] | np.ndarray, top1: Sequence[float],
            *, hidden: Sequence[int] = (400, 400, 400), epochs: int = 300, lr: float = 1e-3,
            weight_decay: float = 1e-5, batch_size: int = 128, seed: int = 0) -> MLPAccuracyPredictor:
        """Train on (archs, top1) with Adam and a cosine schedule (MSE on standardised top-1)."""
        import torch

        x = space.encode(archs, "onehot")
        y = np.asarray(top1, dtype=np.float64)
        if len(x) != len(y):
            raise InputError(f"got {len(x)} archs but {len(y)} accuracies")
        if len(x) < 2:
            raise InputError(f"fitting an accuracy predictor needs at least 2 subnets, got {len(x)}")
        y_mean, y_std = float(y.mean()), float(y.std()) or 1.0
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        sizes = [x.shape[1], *hidden, 1]
        layers: list[torch.nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(torch.nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
        xt = torch.from_numpy(x)
        yt = torch.from_numpy(((y - y_mean) / y_std).astype(np.float32))
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
        steps = epochs * math.ceil(len(x) / batch_size)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps))
        net.train()
        for _ in range(epochs):
            for idx in torch.randperm(len(x), generator=gen).split(batch_size):
                loss = torch.nn.functional.mse_loss(net(xt[idx]).squeeze(1), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        weights = [m.weight.detach().numpy().T.copy() for m in linears]
        biases = [m.bias.detach().numpy().copy() for m in linears]
        meta = {"n_train": int(len(x)), "epochs": epochs, "lr": lr, "weight_decay": weight_decay,
                "seed": seed}
        return cls(space, weights, biases, y_mean, y_std, meta)

    def predict(self, archs: Sequence[Arch] | np.ndarray) -> np.ndarray:
        """Predicted top-1 (%) of many archs at once (a list of Arch or an int [n, 46] matrix)."""
        h = self.space.encode(archs, "onehot")
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            h = h @ w
            h += b
            np.maximum(h, 0.0, out=h)
        out = (h @ self.weights[-1] + self.biases[-1])[:, 0].astype(np.float64)
        return np.clip(out * self.y_std + self.y_mean, 0.0, 100.0)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """``path`` (JSON) + ``path`` with suffix .npz (the weights), both atomically."""
        path = Path(path)
        npz = path.with_suffix(".npz")
        arrays = {f"w{i}": w for i, w in enumerate(self.weights)}
        arrays.update({f"b{i}": b for i, b in enumerate(self.biases)})
        with atomic_path(npz, suffix=".npz") as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        doc = {"format": FORMAT, "version": VERSION, "kind": self.kind, "target": "top1",
               "encoding": "onehot", "space": self.space.to_dict(), "hidden": self.hidden,
               "layers": len(self.weights), "y_mean": self.y_mean, "y_std": self.y_std,
               "meta": self.meta, "arrays": npz.name, "sha256": digest}
        atomic_write_json(path, doc)
        return path

    @classmethod
    def load(cls, path: str | Path) -> MLPAccuracyPredictor:
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"accuracy predictor {path} does not exist") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{path} is not an accuracy predictor (not valid JSON: "
                                  f"{str(err).splitlines()[0]})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise CheckpointError(f"{path} is not a version-{VERSION} hwnas accuracy predictor; "
                                  "refit it with fit_accuracy_predictor")
        arrays = read_npz(path.parent / str(doc.get("arrays")), path)
        try:
            n = int(doc["layers"])
            return cls(SearchSpace.from_dict(doc["space"]), [arrays[f"w{i}"] for i in range(n)],
                       [arrays[f"b{i}"] for i in range(n)], doc["y_mean"], doc["y_std"], doc.get("meta"))
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{path} is a damaged accuracy predictor ({type(err).__name__}: "
                                  f"{err}); refit it") from None


def load_accuracy_predictor(run_dir: str | Path) -> MLPAccuracyPredictor:
    return MLPAccuracyPredictor.load(Path(run_dir) / ACCURACY_PREDICTOR)


def fit_accuracy_predictor(run, *, test_fraction: float = 0.2, seed: int = 0, epochs: int = 300,
                           hidden: Sequence[int] = (400, 400, 400), min_rows: int = 20,
                           save: bool = True) -> tuple[MLPAccuracyPredictor, dict[str, Any]]:
    """Fit the MLP on the run's accuracy table, holding out `test_fraction` of the subnets to
    report RMSE / MAE / Kendall tau; saved to `<run>/predictors/accuracy.json` (+ .npz)."""
    df = read_accuracy_table(run.run_dir)
    if len(df) < min_rows:
        raise InputError(f"the accuracy table of {run.run_dir} has {len(df)} subnets; fitting needs "
                         f"at least {min_rows}: build it with build_accuracy_table(run, n=1000) "
                         "(`hwnas search` does this when the table is missing)")
    if not 0.0 < test_fraction < 1.0:
        raise InputError(f"test_fraction must be within (0, 1), got {test_fraction}")
    m = df[list(FLAT_COLUMNS)].to_numpy(dtype=np.int32)
    y = df["top1"].to_numpy(dtype=np.float64)
    perm = np.random.default_rng(seed).permutation(len(df))
    n_test = max(1, int(round(test_fraction * len(df))))
    test, train = perm[:n_test], perm[n_test:]
    pred = MLPAccuracyPredictor.fit(run.space, m[train], y[train], hidden=hidden, epochs=epochs,
                                    seed=seed)
    metrics = {"test": regression_metrics(pred.predict(m[test]), y[test]),
               "train": regression_metrics(pred.predict(m[train]), y[train]),
               "table_rows": int(len(df)), "top1_range": [float(y.min()), float(y.max())]}
    pred.meta["metrics"] = metrics
    if save:
        pred.save(Path(run.run_dir) / ACCURACY_PREDICTOR)
    return pred, metrics
