"""A run directory (`runs/<name>/`): everything one search for one supernet produces.

`config.yaml` pins the supernet (checkpoint stem, search space, classes) so every stage of the run
(profile, latency fit, search, export) works on the same network; every open checks it against
the checkpoint's JSON. Stages write their own files atomically and resume from what exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hwnas.errors import ConfigError
from hwnas.fileio import atomic_write_text, file_lock, parse_yaml
from hwnas.families import DEFAULT_FAMILY, Family, NetworkSpec, get_family

if TYPE_CHECKING:
    from hwnas.supernet.data import DataConfig

__all__ = ["RunFiles", "RunConfig", "open_run", "run_lock"]

CONFIG = "config.yaml"


@dataclass(frozen=True)
class RunFiles:
    """Where every file of a run directory lives: the one place their names are spelled.

    Paths only (nothing is read), so readers of half-made or broken runs (the dashboard) use it
    too; `RunConfig.files` is the same for an opened run."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def measurements(self) -> Path:  # written by hwnas.profiling.store
        return self.root / "measurements.parquet"

    @property
    def accuracy(self) -> Path:  # the accuracy table (hwnas.accuracy.table)
        return self.root / "accuracy.csv"

    def accuracy_split(self, split: str) -> Path:
        """Measured top-1 of subnets on another split (verification: ``accuracy-test.csv``)."""
        return self.root / f"accuracy-{split}.csv"

    def drop_table(self, device: str, precision: str) -> Path:
        """Measured bf16 / INT8 top-1 drop of subnets on a device's variant (hwnas.accuracy.int8)."""
        return self.root / f"accuracy-{precision}-{device}.csv"

    @property
    def optuna_journal(self) -> Path:  # the Optuna samplers' study when no storage URL is given
        return self.root / "optuna.journal"

    # one search's outputs, written as one unit (hwnas.search.api)
    @property
    def pareto(self) -> Path:
        return self.root / "pareto.csv"

    @property
    def search(self) -> Path:
        return self.root / "search.json"

    @property
    def explored(self) -> Path:
        return self.root / "explored.csv"

    @property
    def pareto_png(self) -> Path:
        return self.root / "pareto.png"

    @property
    def predictors(self) -> Path:
        return self.root / "predictors"

    def latency_predictor(self, device: str) -> Path:
        return self.predictors / f"latency-{device}.json"

    @property
    def accuracy_predictor(self) -> Path:
        return self.predictors / "accuracy.json"

    def finetuned(self, arch_id: str) -> Path:
        """Folder of a subnet's fine-tuned weights (hwnas.supernet.finetune)."""
        return self.root / "finetuned" / arch_id

    @property
    def baselines(self) -> Path:
        """Hand-designed networks trained alone on the run's data (hwnas.baselines)."""
        return self.root / "baselines"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    def bundle(self, arch_id: str, device: str) -> Path:
        """Default folder of a subnet's bundle for a device."""
        return self.exports / f"{arch_id}-{device}"

    def lock(self, name: str):
        """The inter-process lock writers of `<root>/<name>` take (a context manager)."""
        return file_lock(self.root / ".locks" / f"{name}.lock")

    def mtimes(self) -> tuple[float, ...]:
        """A cache key that changes whenever any run file changes."""
        paths = [self.config, self.measurements, self.accuracy, self.pareto, self.search]
        paths += sorted(self.predictors.glob("*.json")) + sorted(self.exports.glob("*/model.json"))
        return tuple(p.stat().st_mtime if p.exists() else 0.0 for p in paths)


@dataclass(frozen=True)
class RunConfig:
    run_dir: Path
    supernet: str | None  # checkpoint stem; None = the shipped supernet
    space: Any  # the family's space (`Family.space_from_dict`'s: the space interface)
    n_classes: int
    # the dataset subnets are evaluated on (`DataConfig` as a dict); None = the supernet's own
    data: dict[str, Any] | None = None

    @property
    def family(self) -> Family:
        return self.space.family

    @property
    def network(self) -> NetworkSpec:
        """The networks the run's subnets are: its family, width and classes."""
        return NetworkSpec(self.family.name, self.space.width_mult, self.n_classes)

    @property
    def files(self) -> RunFiles:
        return RunFiles(self.run_dir)

    def to_dict(self) -> dict[str, Any]:
        out = {"supernet": self.supernet or "shipped", "family": self.family.name,
               "space": self.space.to_dict(), "n_classes": self.n_classes}
        if self.data is not None:
            out["data"] = self.data
        return out


def _checkpoint_identity(stem: str | Path | None) -> tuple[Family, Any, int]:
    """(family, space, classes) that a supernet checkpoint's JSON states; None = the shipped one."""
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta, shipped_checkpoint

    meta = load_checkpoint_meta(shipped_checkpoint() if stem is None else stem)
    family = get_family(meta.get("family", DEFAULT_FAMILY))
    return family, family.space_from_dict(meta["space"]), int(meta["n_classes"])


def _check_against_supernet(stem: str | None, family: Family, raw: dict[str, Any], path: Path) -> None:
    """config.yaml restates its checkpoint's family, space and classes; an edited copy would let
    stages build subnets the supernet cannot (a kernel it lacks) or count costs for another head,
    all with exit 0, so a disagreement is refused. A checkpoint that is not there (a run folder
    copied alone) is not checked: the stages that need its weights say so when they load them."""
    from hwnas.supernet.checkpoint_meta import checkpoint_paths

    if stem is not None and not checkpoint_paths(stem).meta.exists():
        return
    said_family, said_space, said_classes = _checkpoint_identity(stem)

    def same(field: str, value: Any, said: Any) -> None:
        if value != said:
            raise ConfigError(f"{path}: {field} is {value}, but its supernet ({stem or 'shipped'}) has "
                              f"{said}; set {field} back to {said} (a run's config must match its "
                              "supernet) or start a new run directory")

    same("family", family.name, said_family.name)  # first: another family's space does not parse
    space = family.space_from_dict(raw["space"]).to_dict()
    for key, said in said_space.to_dict().items():
        same(f"space.{key}", space.get(key), said)
    same("n_classes", int(raw["n_classes"]), said_classes)


def _data_dict(data: "DataConfig") -> dict[str, Any]:
    return data.model_dump(mode="json", exclude_defaults=True)


def open_run(run_dir: str | Path, supernet: str | Path | None = None, create: bool = True,
             data: "DataConfig | None" = None) -> RunConfig:
    """Open (or create) a run. An existing run keeps its supernet and dataset; naming another is
    an error. `data` (``--data``) may be added to a run that has none."""
    run_dir = Path(run_dir)
    path = run_dir / CONFIG
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} is a file; give a folder (new or made by "
                          "`hwnas profile --run DIR`)")
    if path.exists():
        try:
            raw = parse_yaml(path.read_text(), f"run config {path}") or {}
            stem = None if raw.get("supernet") in (None, "shipped") else str(raw["supernet"])
            family = get_family(str(raw.get("family", DEFAULT_FAMILY)))
            _check_against_supernet(stem, family, raw, path)
            cfg = RunConfig(run_dir, stem, family.space_from_dict(raw["space"]), int(raw["n_classes"]),
                            _checked_data(raw.get("data"), path))
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{path} is not a valid run config ({type(err).__name__}: "
                              f"{' '.join(str(err).split())}); fix it or start a new run directory") from None
        if supernet is not None and str(supernet) != (cfg.supernet or "shipped"):
            raise ConfigError(f"run {run_dir} was made with supernet {cfg.supernet or 'shipped'}, "
                              f"not {supernet}; use another --run directory")
        if data is not None and _data_dict(data) != cfg.data:
            if cfg.data is not None:
                raise ConfigError(f"run {run_dir} evaluates on {cfg.data.get('name')}:"
                                  f"{cfg.data.get('root', '')}; use another --run directory for "
                                  "another dataset")
            with RunFiles(run_dir).lock(CONFIG):
                cfg = replace(cfg, data=_data_dict(data))
                atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        return cfg
    if not create:
        raise ConfigError(f"{run_dir} is not an hwnas run (no {CONFIG}); create it with `hwnas profile --run {run_dir} ...`")
    _, space, n_classes = _checkpoint_identity(supernet)
    cfg = RunConfig(run_dir, None if supernet is None else str(supernet), space, n_classes,
                    None if data is None else _data_dict(data))
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    return cfg


def _checked_data(raw: Any, path: Path) -> dict[str, Any] | None:
    if raw is None:
        return None
    from pydantic import ValidationError

    from hwnas.supernet.data import DataConfig

    try:
        return _data_dict(DataConfig.model_validate(raw))
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(f"{path}: data.{'.'.join(map(str, first['loc']))}: {first['msg']}; fix it or "
                          "start a new run directory") from None


def run_lock(run_dir: str | Path, name: str):
    """The inter-process lock that writers of `<run_dir>/<name>` take (a context manager)."""
    return RunFiles(Path(run_dir)).lock(name)
