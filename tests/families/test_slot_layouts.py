"""Every family's slot layout (`family_runs.every_family`: the registry and the test-only one) (`Family.slot_layout`, what the search tabulates) agrees
with its genes and its cost layout: a slot's genes are active exactly when it runs, every part of
the cost layout is a slot (same columns, same activity) or reads only the context and always
runs, and the layout is torch-free."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hwnas.families.slots import Slot, SlotLayout


def _layout_of(fam):
    """(family, its slot layout); skipped for a family searched on the generic path."""
    layout = fam.slot_layout()
    if layout is None:
        pytest.skip(f"{fam.name} has no slot layout (searched on the generic path)")
    return fam, layout


def _rows(fam, n: int = 400) -> np.ndarray:
    space = fam.default_space()
    return np.asarray(space.sample_matrix(n, np.random.default_rng(0)), dtype=np.int64)


def test_slot_genes_are_active_exactly_when_the_slot_runs(family):
    fam, layout = _layout_of(family)
    layout.check(len(fam.flat_columns()))
    m = _rows(fam)
    used, active = layout.used(m), fam.active_mask(m)
    for i, slot in enumerate(layout.slots):
        for c in slot.genes:
            np.testing.assert_array_equal(active[:, c - 1], used[:, i], err_msg=f"slot {i} gene {c}")
    shared = list(layout.shared) + list(layout.depth_columns)
    assert active[:, np.asarray(shared, dtype=int) - 1].all()  # context and depth genes always count
    assert used.any(axis=0).all() and not used.all(axis=0).all()  # depths switch some slots


def test_every_part_of_the_cost_layout_is_a_slot_or_context(family):
    fam, layout = _layout_of(family)
    cost = fam.cost_layout(n_classes=10)
    m = _rows(fam)
    part_active = cost.active(m)
    used = layout.used(m)
    by_columns = {frozenset(s.context + s.genes): i for i, s in enumerate(layout.slots)}
    matched = set()
    for p, part in enumerate(cost.parts):
        i = by_columns.get(frozenset(part.columns))
        if i is None:  # stem, head: keyed by the context only, always run
            assert set(part.columns) <= set(layout.context), part
            assert part_active[:, p].all()
            continue
        matched.add(i)
        np.testing.assert_array_equal(part_active[:, p], used[:, i])
    assert matched == set(range(len(layout.slots)))


def test_layouts_are_checked():
    with pytest.raises(Exception, match="shares a gene it owns"):
        SlotLayout((Slot((1,)), Slot((1, 2)))).check(4)
    with pytest.raises(Exception, match="columns within"):
        SlotLayout((Slot((7,)),)).check(4)
    assert SlotLayout((Slot((1,), depth=3, after=0), Slot((2,), depth=3, after=1))).depth_columns == (3,)


def test_slot_layouts_need_no_torch():
    from pathlib import Path

    code = ("import sys; from hwnas.families import family_names, get_family, register_family; "
            "from tiny_convnet import TinyConvFamily; register_family(TinyConvFamily); "
            "[get_family(n).slot_layout() for n in family_names()]; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent)
