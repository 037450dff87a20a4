"""Which subnet to export: an arch (`GeneArch`), OFA JSON, or an id looked up in the run's tables.

Ids are the arch's `id` (a hash of the canonical arch), so any table with the run family's flat
columns can be searched by recomputing them; a table's own ``id`` column is honoured too. Lookup order:
``pareto.csv`` (the search result), ``accuracy.csv``, then the measurement store. A unique
prefix of at least 4 characters is enough, as with git hashes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas.errors import InputError
from hwnas.fileio import json_safe
from hwnas.families.base import GeneArch
from hwnas.run import RunConfig, RunFiles
from hwnas.search import columns

__all__ = ["PARETO", "ACCURACY", "Candidate", "pareto_members", "resolve_subnet"]

PARETO = RunFiles(Path("")).pareto.name
ACCURACY = RunFiles(Path("")).accuracy.name
MEASUREMENTS = RunFiles(Path("")).measurements.name


@dataclass(frozen=True)
class Candidate:
    """An arch to export, where it was found, and the other columns of its row there."""

    arch: GeneArch
    source: str
    row: dict[str, Any] = field(default_factory=dict)

    def _number(self, name: str) -> float | None:
        value = self.row.get(name) if self.source == PARETO else None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if number and math.isfinite(value) else None

    def predicted_latency_ms(self, device: str) -> float | None:
        """The search's prediction for `device` (pareto.csv rows only); for a bf16 or INT8 device,
        also the prediction a precision-aware search made of it under its fp32 sibling's name (the
        row's ``ms_device:<sibling>`` says which device that column's latency is of, so a bf16 /
        INT8 row's latency is never taken for its fp32 sibling's)."""
        own = self._number(columns.ms_pred(device))
        if own is not None and self.row.get(columns.ms_device(device), device) == device:
            return own
        siblings = [k.split(":", 1)[1] for k, v in self.row.items()
                    if k.startswith(columns.ms_device("")) and v == device]
        return next((v for v in map(self._number, map(columns.ms_pred, siblings)) if v is not None), None)

    @property
    def predicted_top1(self) -> float | None:
        return self._number(columns.TOP1_PRED)


def _table(run: RunConfig, name: str, device: str | None) -> list[Candidate] | None:
    """Candidates of a CSV in the run (None when the file does not exist)."""
    from hwnas.families.tables import read_arch_frame

    path = run.run_dir / name
    if not path.exists():
        return None
    archs, df = read_arch_frame(run.space, path)
    if device is not None and "device" in df.columns:
        keep = (df["device"].astype(str) == device).to_numpy()
        archs, df = [a for a, k in zip(archs, keep) if k], df[keep]
    extra = [c for c in df.columns if c not in run.space.flat_columns]
    rows = df[extra].to_dict(orient="records")
    return [Candidate(a, name, json_safe(r))
            for a, r in zip(archs, rows)]


def _store(run: RunConfig) -> list[Candidate]:
    from hwnas.families.tables import frame_archs
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run.run_dir, kind="subnet")
    if df.empty:
        return []
    archs = frame_archs(run.space, df, source=str(run.run_dir / MEASUREMENTS))
    return list({a.id: Candidate(a, MEASUREMENTS) for a in archs}.values())


def pareto_members(run: RunConfig, device: str | None = None) -> list[Candidate]:
    """Every member of the run's Pareto front (for `device` if the table has a device column)."""
    members = _table(run, PARETO, device)
    if members is None:
        raise InputError(f"run {run.run_dir} has no {PARETO}; search the run first "
                         f"(hwnas search --run {run.run_dir} ...)")
    if not members:
        raise InputError(f"{run.run_dir / PARETO} has no subnets" +
                         (f" for device '{device}'" if device else ""))
    return _one_per_subnet(members, device)


def _one_per_subnet(cands: list[Candidate], device: str | None) -> list[Candidate]:
    """One candidate per arch id (the last row of it), except that where a precision-aware search
    left a row per precision of one subnet, the row whose latency is of `device` wins (its
    ``ms_device:*`` names it), so a bf16 or INT8 export records that precision's prediction."""
    def mine(c: Candidate) -> bool:
        return device is not None and any(k.startswith(columns.ms_device("")) and v == device
                                          for k, v in c.row.items())

    out: dict[str, Candidate] = {}
    for c in cands:
        if c.arch.id not in out or mine(c) or not mine(out[c.arch.id]):
            out[c.arch.id] = c
    return list(out.values())


def _ids(c: Candidate) -> set[str]:
    own = c.row.get("id")
    return {c.arch.id} | ({str(own)} if own not in (None, "") else set())


def resolve_subnet(run: RunConfig, arch_or_id: GeneArch | str, device: str | None = None
                   ) -> Candidate:
    """The candidate for an arch, an OFA JSON string (Once-for-All's arch dict plus "r", of the
    run's family), or an id (or unique id prefix) in the run."""
    if isinstance(arch_or_id, GeneArch):
        arch = run.space.validate(arch_or_id)
        return _known(run, arch, device) or Candidate(arch, "given")
    text = str(arch_or_id).strip()
    if text.startswith("{"):
        arch = run.space.validate(run.family.arch_from_json(text, run.space.width_mult))
        return _known(run, arch, device) or Candidate(arch, "given")
    if len(text) < 4:
        raise InputError(f"subnet id {text!r} is too short; give at least 4 characters of it")
    looked = []
    sources = ((PARETO, lambda: _table(run, PARETO, device)),
               (ACCURACY, lambda: _table(run, ACCURACY, None)),
               (MEASUREMENTS, lambda: _store(run)))
    for name, load in sources:
        cands = load()
        looked.append(f"{name} ({'absent' if cands is None else f'{len(cands)} subnets'})")
        found = [c for c in cands or [] if any(i.startswith(text) for i in _ids(c))]
        hits = {c.arch.id: c for c in _one_per_subnet(found, device)}
        if len(hits) > 1:
            raise InputError(f"subnet id {text!r} matches {len(hits)} subnets in {name}: "
                             f"{', '.join(sorted(hits)[:5])}; give more characters")
        if hits:
            return next(iter(hits.values()))
    raise InputError(f"subnet {text!r} is not in run {run.run_dir}: looked in {', '.join(looked)}; "
                     f"ids are the id column of {run.run_dir / PARETO} "
                     "(or pass the arch as OFA JSON)")


def _known(run: RunConfig, arch: GeneArch, device: str | None) -> Candidate | None:
    """The pareto.csv row of an arch given directly, so its predictions still get recorded."""
    return next(iter(_one_per_subnet([c for c in _table(run, PARETO, device) or [] if c.arch == arch], device)),
                None)
