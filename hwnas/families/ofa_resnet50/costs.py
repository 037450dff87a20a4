"""Exact params and MACs of OFA-ResNet50 subnets, vectorised over int-matrix rows, no network built.

Once-for-All's convention, as ``ofa.utils.count_parameters`` and ``count_net_flops`` apply it to a
static subnet: params = every trainable parameter (conv weights, BN affine, classifier weight and
bias; not BN running statistics); MACs = convolutions (``C_in * k * k * C_out * H_out * W_out``) and
the classifier (``in * out``) only -- BN, ReLU, max/avg pooling, the global pool and the residual
adds count nothing. Counts are exact int64 (OFA sums them as float32, off by rounding above 2^24).

All 3x3 convs (padding 1), the 3x3 max pool (padding 1) and the ceil-mode 2x2 average pool of the
shortcut give ``(size - 1) // stride + 1``; the spatial size depends only on r, never on the genes.
"""

from __future__ import annotations

import numpy as np

from hwnas.families.ofa_resnet50.plan import (
    BASE_DEPTHS,
    D_CHOICES,
    BLOCK_POS,
    BLOCK_STAGE,
    MID,
    N_BLOCKS,
    STAGE_STRIDES,
    STAGE_WIDTHS,
    STEM_MID,
    STEM_OUT,
)

__all__ = ["count_params_macs"]

_STEM_MID = np.asarray(STEM_MID, dtype=np.int64)
_STEM_OUT = np.asarray(STEM_OUT, dtype=np.int64)
_WIDTHS = np.asarray(STAGE_WIDTHS, dtype=np.int64)  # [stage, w]
_MID = np.asarray(MID, dtype=np.int64)  # [stage, w, e]


def _out(size: np.ndarray, stride: int) -> np.ndarray:
    return (size - 1) // stride + 1


def _conv_bn(cin, cout, k: int, area):
    """(params, MACs) of a bias-free conv + BN producing `area` output pixels per channel."""
    weights = cin * cout * k * k
    return weights + 2 * cout, weights * area


def count_params_macs(m: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(params, MACs), int64 [n] each, of valid rows ``r, d_0..d_4, e_0..e_17, w_0..w_5`` (e as
    choice indices), by position as in the family's `flat_columns`. Canonical or not: genes that
    do not change the network are not read."""
    m = np.asarray(m, dtype=np.int64)
    r, d, e, w = m[:, 0], m[:, 1:6], m[:, 6:6 + N_BLOCKS], m[:, 6 + N_BLOCKS:]
    mid, cin = _STEM_MID[w[:, 0]], _STEM_OUT[w[:, 1]]
    size = _out(r, 2)
    area = size * size
    stem = [_conv_bn(3, mid, 3, area), _conv_bn(mid, cin, 3, area)]
    p_res, m_res = _conv_bn(mid, mid, 3, area)
    keep = d[:, 0] == max(D_CHOICES)  # the stem's residual conv
    params = sum(p for p, _ in stem) + np.where(keep, p_res, 0)
    macs = sum(c for _, c in stem) + np.where(keep, m_res, 0)
    size = _out(size, 2)  # max pooling
    for i, (s, j) in enumerate(zip(BLOCK_STAGE, BLOCK_POS)):
        stride = STAGE_STRIDES[s] if j == 0 else 1
        out_size = _out(size, stride)
        a_in, a_out = size * size, out_size * out_size
        cout = _WIDTHS[s, w[:, s + 2]]
        cmid = _MID[s, w[:, s + 2], e[:, i]]
        parts = [_conv_bn(cin, cmid, 1, a_in), _conv_bn(cmid, cmid, 3, a_out),
                 _conv_bn(cmid, cout, 1, a_out)]
        if j == 0:
            parts.append(_conv_bn(cin, cout, 1, a_out))  # shortcut conv, after the average pool
        active = j < BASE_DEPTHS[s] + d[:, s + 1]  # the first BASE_DEPTHS[s] blocks always run
        params = params + np.where(active, sum(p for p, _ in parts), 0)
        macs = macs + np.where(active, sum(c for _, c in parts), 0)
        cin, size = cout, out_size  # skipped blocks have the stage's width and stride 1 anyway
    params = params + cin * n_classes + n_classes
    macs = macs + cin * n_classes
    return params.astype(np.int64), macs.astype(np.int64)
