"""Exact params and MACs of OFA-ProxylessNAS subnets, from their rows alone (no network is built).

Once-for-All's convention on the static subnet: params = ``ofa.utils.count_parameters`` (every
parameter: convolutions, BN affine, classifier weight and bias; no running statistics, no
kernel-transform matrices, which a static subnet does not have); MACs = ``ofa.utils.count_net_flops``
(its profile hooks count Conv2d as ``C_in/groups * k^2 * output elements`` and Linear as
``in * out``; BN, ReLU6, pooling, residual adds and biases count nothing). The per-layer arithmetic
is `hwnas.families.mbconv`'s, shared with OFA-MobileNetV3; what differs is the layout
(`plan.iter_blocks`) and the head (feature mix with BN at full resolution, then pooling).
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.families.base import check_n_classes
from hwnas.families.mbconv import (
    add_block_costs,
    add_costs,
    conv_params_macs,
    per_distinct_key,
    stem_params_macs,
)
from hwnas.families.ofa_proxyless.plan import N_SLOTS, STAGE_DEPTHS, ProxylessPlan, iter_blocks, proxyless_plan

__all__ = ["count_params_macs"]


@functools.lru_cache(maxsize=4096)
def _head(plan: ProxylessPlan, size: int, n_classes: int) -> tuple[int, int]:
    """feature_mix_layer (1x1 conv + BN, on the `size` x `size` map) and the classifier."""
    fm = plan.feature_mix
    return add_costs(conv_params_macs(plan.stage_widths[-1], fm, 1, size),
                     (fm * n_classes + n_classes, fm * n_classes))


def count_params_macs(m: np.ndarray, width_mult: float, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(params, MACs), int64 [n] each, of checked canonical flat rows `m` (int [n, 49]): slot by
    slot, each distinct (kernel, expand, input size) is costed once and scattered to its rows."""
    check_n_classes(n_classes)
    m = np.asarray(m, dtype=np.int64)
    if len(m) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    plan = proxyless_plan(width_mult)
    r, ks, es = m[:, 0], m[:, 1:1 + N_SLOTS], m[:, 1 + N_SLOTS:1 + 2 * N_SLOTS]
    depth = np.minimum(m[:, 1 + 2 * N_SLOTS:], np.asarray(STAGE_DEPTHS))
    # the stem conv and the fixed first block, from plan.stem / plan.first_block
    stem = per_distinct_key(r[:, None], lambda rr: stem_params_macs(plan, rr))
    params, macs, size = stem[:, 0].copy(), stem[:, 1].copy(), stem[:, 2].copy()
    add_block_costs(iter_blocks(plan, STAGE_DEPTHS), ks, es, depth, size, params, macs)
    head = per_distinct_key(size[:, None], lambda s: _head(plan, s, int(n_classes)))
    return params + head[:, 0], macs + head[:, 1]
