"""Exact params and MACs of TinyConvNet subnets from their rows, in Once-for-All's convention
(`hwnas.families.mbconv`: every parameter, BN affine included; MACs of convolutions and linear layers)."""

from __future__ import annotations

import numpy as np

from hwnas.families.mbconv import add_block_costs, conv_params_macs
from hwnas.families.parts import out_size

from .plan import ALL_BLOCKS, N_SLOTS, STAGE_WIDTHS, STEM

__all__ = ["count_params_macs"]


def count_params_macs(m: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(params, MACs), int64 [n] each, of checked canonical flat rows (each distinct block once)."""
    m = np.asarray(m, dtype=np.int64)
    r, ks, es, depth = m[:, 0], m[:, 1:1 + N_SLOTS], m[:, 1 + N_SLOTS:1 + 2 * N_SLOTS], m[:, 1 + 2 * N_SLOTS:]
    size = np.asarray([out_size(int(v), 3, 2) for v in r], dtype=np.int64)
    stem = np.asarray([conv_params_macs(3, STEM, 3, int(s)) for s in size], dtype=np.int64).reshape(-1, 2)
    params, macs = stem[:, 0].copy(), stem[:, 1].copy()
    add_block_costs(ALL_BLOCKS, ks, es, depth, size, params, macs)
    linear = STAGE_WIDTHS[-1] * n_classes  # the classifier (pooling counts nothing)
    return params + linear + n_classes, macs + linear
