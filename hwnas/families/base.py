"""What a search-space family is: its genes, its networks, its costs and its Once-for-All layout.

A family (OFA-MobileNetV3, OFA-ProxylessNAS, OFA-ResNet50, ...) is one subclass of `Family` in its
own folder under ``hwnas/families/`` plus one line in the registry (``hwnas/families/__init__.py``).

Genes. A subnet is an input resolution ``r`` plus named groups of categorical genes, in the key
order of Once-for-All's arch dict (``ks, e, d`` for the MobileNets, ``d, e, w`` for ResNet). Its flat
row -- the CSV layout, and the int matrix every vectorised stage works on -- is ``r`` followed by the
groups flattened (``ks_0..ks_20, e_0..e_20, d_0..d_5``). In the int matrix a gene holds its value
when the group's choices are integers and its index in the choices otherwise (ResNet's expand
ratios 0.2/0.25/0.35); CSV files and arch dicts always hold values.

Some genes do not change the network for a given depth (the slots past a stage's depth). The family
says which (`active_mask`) and `canonical` sets them to a fixed filler, so two configs that build the
same network share one row and one id.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from hwnas.errors import InputError
from hwnas.families.genes import (IMAGENET_MEAN, IMAGENET_STD, OFA_RESOLUTIONS, GeneArch, GeneGroup, ShrinkPhase,
                                  arch_resolution, check_head_args, check_n_classes)

if TYPE_CHECKING:  # torch stays a lazy import: space tools and the CLI's startup do not need it
    import torch.nn as nn

__all__ = ["GeneGroup", "Family", "ElasticSupernet", "GeneArch", "check_n_classes", "check_head_args",
           "IMAGENET_MEAN", "IMAGENET_STD",
           "OFA_RESOLUTIONS"]

@runtime_checkable
class ElasticSupernet(Protocol):
    """What `Family.build_supernet` returns: an ``nn.Module`` holding every subnet, whose forward
    runs the active one. Arch arguments are a `GeneArch` of the family or Once-for-All's arch dict
    plus "r" (`Family.resolve_arch`). Its classifier is a module named ``classifier`` (transfer
    re-initialises ``classifier.*``). Optionally ``sort_channels(expand_stage=0)``: training calls
    it before the expand phase when the network has one."""

    def set_active_subnet(self, arch: Any) -> None:
        """Make `arch` the subnet that forward runs (the weights are shared, not copied)."""

    def get_subnet(self, arch: Any) -> Any:
        """A static ``nn.Module`` copy of `arch`'s weights, in the supernet's mode, device and dtype;
        its state-dict keys equal those of the family's `Family.static_subnet`."""


class Family(ABC):
    """One search-space family. Subclasses are stateless singletons (see the registry)."""

    #: registry name, e.g. "ofa-resnet50"
    name: ClassVar[str]
    #: Once-for-All's class of the supernet ("OFAResNets"); None for a family with no Once-for-All
    #: original (then `ofa_layout` is not needed and `hwnas supernet import --from-ofa` refuses it)
    ofa_class: ClassVar[str | None] = None
    #: the name users know it by, for messages ("OFA-ResNet50")
    title: ClassVar[str]
    #: the width multipliers a whole supernet can be built at (published ones first)
    widths: ClassVar[tuple[float, ...]]
    #: Once-for-All's published checkpoint name per width, for messages
    published: ClassVar[Mapping[float, str]] = {}
    #: True when any positive width multiplier builds a network (not only `widths`)
    any_width: ClassVar[bool] = False
    #: progressive shrinking, in training order: `ShrinkPhase`s (name, the gene group it makes
    #: elastic, how); its names are the phases a training config may set besides "full" and "elastic"
    shrink_phases: ClassVar[tuple[ShrinkPhase, ...]] = ()
    #: how `compact` accuracy features summarise the genes (`hwnas.accuracy.features`): "groups"
    #: (each always-active group as values, each other group's mean over its active genes and
    #: their number) or "stages" (per depth gene of the `slot_layout`: its value and, per gene
    #: group the slots own, the mean over the slots it runs)
    compact_summary: ClassVar[str] = "groups"
    #: True when latency tables may hold any network the slots run (depth 1, other kernels), not
    #: only the space's: `check_model_rows` then checks shapes and depths alone
    open_latency_rows: ClassVar[bool] = False

    def __reduce__(self):
        # a singleton: unpickled (e.g. in a spawned worker) as the registry's instance, not a copy
        from hwnas.families.registry import get_family

        return get_family, (self.name,)

    # -- genes ----------------------------------------------------------------------------
    @abstractmethod
    def gene_groups(self) -> tuple[GeneGroup, ...]:
        """The groups in Once-for-All's arch-dict key order, with Once-for-All's default choices."""

    @abstractmethod
    def active_mask(self, m: np.ndarray) -> np.ndarray:
        """bool [n, genes] (columns as `gene_columns`): True where the gene changes the network."""

    def gene_columns(self) -> tuple[str, ...]:
        return tuple(c for g in self.gene_groups() for c in g.columns)

    def flat_columns(self) -> tuple[str, ...]:
        return ("r",) + self.gene_columns()

    def group_slices(self) -> dict[str, slice]:
        """Column range of each group in the flat row (r is column 0)."""
        out, start = {}, 1
        for g in self.gene_groups():
            out[g.name] = slice(start, start + g.count)
            start += g.count
        return out

    def fillers(self) -> np.ndarray:
        """int [genes]: the code each gene is normalised to when inactive."""
        return np.concatenate([np.full(g.count, g.to_codes([g.filler])[0]) for g in self.gene_groups()])

    def canonical(self, m: np.ndarray) -> np.ndarray:
        """Flat rows (int [n, 1 + genes]) with inactive genes set to the filler."""
        m = np.array(m, copy=True)
        if m.dtype.kind not in "iu":
            m = m.astype(np.int64)
        genes = m[:, 1:]
        active = self.active_mask(m)
        m[:, 1:] = np.where(active, genes, self.fillers()[None, :])
        return m

    def sample_matrix(self, n: int, rng: np.random.Generator, resolutions: Sequence[int]) -> np.ndarray:
        """`n` canonical rows, every gene uniform over its choices (families override this to be
        uniform over distinct networks)."""
        cols = [rng.choice(np.asarray(resolutions), size=(n, 1))]
        for g in self.gene_groups():
            codes = np.asarray(g.to_codes(g.choices))
            cols.append(rng.choice(codes, size=(n, g.count)))
        return self.canonical(np.concatenate(cols, axis=1))

    def networks_per_resolution(self) -> int | None:
        """How many distinct networks the family's genes build at one resolution (None: unknown)."""
        return None

    def info(self) -> dict[str, Any]:
        """The family's facts: genes, columns, widths, resolutions, size (see `space_info`)."""
        return {"family": self.name, "title": self.title, "once_for_all_class": self.ofa_class,
                "published": {str(w): n for w, n in self.published.items()},
                "widths": list(self.widths),
                "genes": {g.name: {"count": g.count, "choices": list(g.choices)} for g in self.gene_groups()},
                "resolutions": list(OFA_RESOLUTIONS), "columns": list(self.flat_columns()),
                "networks_per_resolution": self.networks_per_resolution()}

    # -- archs ----------------------------------------------------------------------------
    def arch_from_dict(self, obj: Mapping[str, Any], w: float | None = None) -> "GeneArch":
        """An arch from Once-for-All's arch dict (``{"d": [...], "e": [...], "w": [...]}``) plus
        ``"r": [r]`` (or an int)."""
        if not isinstance(obj, Mapping):
            raise InputError(f"a {self.name} arch must be a dict with keys "
                             f"{', '.join(g.name for g in self.gene_groups())}, r")
        missing = [g.name for g in self.gene_groups() if g.name not in obj] + \
            (["r"] if "r" not in obj else [])
        if missing:
            raise InputError(f"{self.name} arch dict is missing {', '.join(missing)}")
        row: list[Any] = [arch_resolution(obj["r"])]
        for g in self.gene_groups():
            values = obj[g.name]
            if not isinstance(values, (list, tuple)) or len(values) != g.count:
                raise InputError(f"{self.name} arch '{g.name}' must be a list of {g.count} values, "
                                 f"got {values!r}")
            row += g.to_codes(values, g.name)
        return GeneArch.from_codes(self, row, self.default_width if w is None else w)

    def arch_from_json(self, text: str, w: float | None = None) -> "GeneArch":
        """An arch from OFA JSON: Once-for-All's arch dict plus "r" (`arch_from_dict`)."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"arch {text[:40]!r} is not valid OFA JSON: {err}") from None
        return self.arch_from_dict(obj, w)

    @property
    def default_width(self) -> float:
        return self.widths[0]

    def check_width(self, width_mult: float | None) -> float:
        """`width_mult` (None = the default) if this family builds it, else one clear InputError."""
        if width_mult is None:
            return self.default_width
        if not isinstance(width_mult, bool) and isinstance(width_mult, (int, float, np.integer, np.floating)):
            w = float(width_mult)
            if self.any_width and not 0 < w < 16:
                raise InputError(f"--width-mult must be positive (and below 16), got {width_mult}; "
                                 f"{self.name} publishes " + " and ".join(str(x) for x in self.widths))
            if self.any_width:
                return w
            for known in self.widths:
                if abs(w - known) < 1e-9:
                    return known
        raise InputError(f"width multiplier {width_mult!r} is not a width of {self.name}; use "
                         + ("a positive number, e.g. " if self.any_width else "")
                         + " or ".join(str(x) for x in self.widths))

    def check_rows(self, m: np.ndarray) -> np.ndarray:
        """`m` as int64 flat rows [n, 1 + genes] whose every gene is one of its choices and whose
        r is positive; one InputError naming the first bad row and column otherwise."""
        m = np.asarray(m)
        cols = self.flat_columns()
        if m.ndim != 2 or m.shape[1] != len(cols) or m.dtype.kind not in "iu":
            raise InputError(f"{self.name} arch rows must be integers [n, {len(cols)}] (r, "
                             f"{', '.join(g.name + '_*' for g in self.gene_groups())}), got "
                             f"{m.dtype} {list(m.shape)}")
        m = m.astype(np.int64, copy=False)
        groups = self.gene_groups()
        ok = [m[:, :1] > 0] + [np.isin(m[:, sl], g.to_codes(g.choices))
                               for g, sl in zip(groups, self.group_slices().values())]
        bad = ~np.concatenate(ok, axis=1)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            if j == 0:
                raise InputError(f"{self.name} arch row {i}: r={m[i, 0]} must be positive")
            g = next(g for g in groups if cols[j] in g.columns)
            value = int(m[i, j])
            shown = g.choices[value] if g.by_index and 0 <= value < len(g.choices) else value
            raise InputError(f"{self.name} arch row {i}: {cols[j]}={shown!r} is not one of "
                             f"{list(g.choices)}" + (" (as an index)" if g.by_index else ""))
        return m

    def check_model_rows(self, m: np.ndarray) -> np.ndarray:
        """`m` as the int64 flat rows latency models read: `check_rows`, then `canonical`; with
        `open_latency_rows`, any network the slots run: only the shape, r > 0 and each depth gene
        within its slots are checked."""
        if not self.open_latency_rows:
            return self.canonical(self.check_rows(m))
        m = np.asarray(m)
        n_cols, depth, lo, hi = _row_bounds(self)
        if m.ndim != 2 or m.shape[1] != n_cols:
            raise InputError(f"{self.name} arch rows must be [n, {n_cols}] (r, "
                             f"{', '.join(g.name + '_*' for g in self.gene_groups())}), got {list(m.shape)}")
        m = m.astype(np.int64, copy=False)
        bad = np.concatenate([m[:, :1] < 1, (m[:, depth] < lo) | (m[:, depth] > hi)], axis=1)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            if j == 0:
                raise InputError(f"{self.name} arch row {i}: r={m[i, 0]} must be positive")
            c = depth[j - 1]
            raise InputError(f"{self.name} arch row {i}: {self.flat_columns()[c]}={m[i, c]} is outside "
                             f"{lo[j - 1]}..{hi[j - 1]}")
        return m

    def resolve_arch(self, arch: Any, width_mult: float | None = None) -> "GeneArch":
        """A checked arch of this family from a `GeneArch` or Once-for-All's arch dict plus "r"
        (what every supernet's ``set_active_subnet``/``get_subnet`` accept)."""
        w = self.check_width(width_mult)
        if isinstance(arch, Mapping):
            arch = self.arch_from_dict(arch, w)
        elif not isinstance(arch, GeneArch) or arch.family_name != self.name:
            what = arch.family_name if isinstance(arch, GeneArch) else type(arch).__name__
            raise InputError(f"expected an {self.name} arch (a GeneArch, or Once-for-All's arch dict "
                             f"with {', '.join(g.name for g in self.gene_groups())} and r), got {what}")
        if abs(arch.w - w) > 1e-9:
            raise InputError(f"the arch is at width {arch.w}, the {self.name} supernet at {w}")
        return arch

    def default_space(self, width_mult: float | None = None):
        """Once-for-All's space of this family at `width_mult` (every choice, r 128..224)."""
        from hwnas.families.space import FamilySpace

        return FamilySpace.published(self, width_mult)

    def space_from_dict(self, obj: Mapping[str, Any]):
        """A space of this family from its dict form (what checkpoints and runs store)."""
        from hwnas.families.space import FamilySpace

        return FamilySpace.from_dict(self, obj)

    def space_from_file(self, path: str | Path):
        """A space of this family from a YAML file of its dict form (`--space`): the gene groups'
        choices, ``r`` (a list or a range like '32:64:4') and ``width_mult``; what is left out keeps
        the default space's choices."""
        from hwnas.errors import ConfigError
        from hwnas.fileio import parse_yaml

        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"search-space file {path} does not exist") from None
        except (IsADirectoryError, UnicodeDecodeError):
            raise ConfigError(f"search-space file {path} is not a YAML file") from None
        return self.space_from_dict(parse_yaml(text, f"search-space file {path}") or {})

    def table_codes(self, df, source: str = "table") -> np.ndarray:
        """The canonical int matrix of a DataFrame of flat rows (errors name row and column)."""
        from hwnas.families.tables import table_codes

        return table_codes(self, df, source)

    # -- networks -------------------------------------------------------------------------
    @abstractmethod
    def build_supernet(self, n_classes: int = 1000, width_mult: float | None = None,
                       dropout: float = 0.0) -> ElasticSupernet:
        """The elastic supernet (an ``nn.Module``, `ElasticSupernet`) with the family's module tree
        (Once-for-All's, for a family with an original) and default choices."""

    @abstractmethod
    def static_subnet(self, arch: "GeneArch", n_classes: int = 1000) -> "nn.Module":
        """The subnet as a plain static network with fixed random weights (what profiling compiles
        and times: latency does not depend on the weights), built without a supernet."""

    def arch_params_macs(self, arch: "GeneArch", n_classes: int) -> tuple[int, int]:
        """Exact (params, MACs) of one arch at its width (`count_params_macs` of its row)."""
        params, macs = self.count_params_macs(np.asarray([arch.to_row()], dtype=np.int64), arch.w, n_classes)
        return int(params[0]), int(macs[0])

    def supernet_for(self, space, n_classes: int, dropout: float = 0.0) -> "nn.Module":
        """The supernet of a stored space (`space_from_dict`): by default the whole family's at
        the space's width (a narrower space restricts sampling, not the network)."""
        return self.build_supernet(n_classes, space.width_mult, dropout)

    @abstractmethod
    def count_params_macs(self, m: np.ndarray, width_mult: float, n_classes: int
                          ) -> tuple[np.ndarray, np.ndarray]:
        """Exact params and MACs (Once-for-All's convention: every parameter of the static subnet;
        MACs of convolutions and linear layers) of canonical flat rows, int64 [n] each."""

    @abstractmethod
    def cost_layout_class(self) -> type:
        """Its `hwnas.families.parts.CostLayout` subclass (from the family's torch-free ``parts.py``,
        imported here lazily)."""

    def cost_layout(self, width_mult: float | None = None, n_classes: int = 1000):
        """The additive cost layout (`hwnas.families.parts.CostLayout`) of this family's networks at
        `width_mult` (None = the default) with `n_classes` classes: the parts a subnet runs, the
        columns each depends on, their exact costs and the modules that time them alone -- what the
        lookup-table and analytic latency predictors sum. Torch-free; one shared instance per
        (family, width, classes), so its per-key costs are memoised."""
        from hwnas.families.parts import cached_layout

        return cached_layout(self.cost_layout_class(), self, self.check_width(width_mult),
                             check_n_classes(n_classes))

    def memory_trace(self, row: Sequence[int], width_mult: float, n_classes: int, precision: str = "fp32"):
        """The tensors one subnet (flat row `row`, batch 1) allocates and the weights it stores, as a
        `hwnas.families.memory.TensorTrace`: what its RAM arena and flash bytes are computed from.
        A family without one has no memory columns (`has_memory_model`)."""
        from hwnas.families.memory import check_memory_model

        check_memory_model(self)
        raise AssertionError("unreachable")

    @property
    def has_memory_model(self) -> bool:
        return type(self).memory_trace is not Family.memory_trace

    def slot_layout(self):
        """Its flat rows as additive slots (`hwnas.families.slots.SlotLayout`): which genes each
        searchable position owns and shares, and the depth gene that decides whether it runs --
        what lets a search tabulate additive costs, breed choice-index rows and gather accuracy
        features at lookup speed. None (the default): the search calls the models on whole
        matrices instead. Torch-free."""
        return None

    def latency_priors(self) -> dict[str, dict[str, Any]]:
        """{runtime: a latency predictor document} fitted once on measured subnets of this family
        (`hwnas.latency.priors`): the ``latency_priors.json`` beside the family's module, if it
        ships one. Data only: the latency package loads it."""
        from importlib import resources

        package = type(self).__module__
        path = resources.files(package) / "latency_priors.json" if "." in package else None
        if path is None or not path.is_file():
            return {}
        return json.loads(path.read_text())

    # -- Once-for-All checkpoints ---------------------------------------------------------
    def ofa_layout(self, width_mult: float, n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
        """Every key of Once-for-All's supernet state dict and its shape. Only a family with a
        Once-for-All original (`ofa_class`) defines it."""
        raise InputError(f"{self.title} has no Once-for-All original, so there is no Once-for-All "
                         f"checkpoint of it to import; train one with hwnas train --family {self.name}")

    def hwnas_key(self, ofa_key: str) -> str:
        """The hwnas supernet's key for a key of Once-for-All's state dict (same by default)."""
        return ofa_key


@functools.lru_cache(maxsize=None)
def _row_bounds(family: Family) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(flat columns, depth gene columns, the least and the most slots each can run: from the first
    of its slots to all of them) for `Family.check_model_rows` (families are singletons)."""
    layout = family.slot_layout()
    afters: dict[int, list[int]] = {}
    for s in layout.slots if layout is not None else ():
        if s.depth is not None:
            afters.setdefault(s.depth, []).append(s.after)
    depth = sorted(afters)
    return (len(family.flat_columns()), np.asarray(depth, dtype=np.intp),
            np.asarray([min(afters[d]) + 1 for d in depth], dtype=np.int64),
            np.asarray([max(afters[d]) + 1 for d in depth], dtype=np.int64))
