"""Supernets: loading (`load_supernet`), training, transfer, fine-tuning; the default family's network
and exact cost counting (defined in `hwnas.families`) are re-exported under their old names.

Names load lazily: the cost counters need no torch, and `hwnas search` should not pay for it.
"""

from __future__ import annotations

from hwnas.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "hwnas.supernet.ofa_mbv3": ("OFAMobileNetV3", "MobileNetV3Subnet", "mbv3_plan"),
    "hwnas.channels": ("make_divisible",),
    "hwnas.supernet.stats": ("count_params", "count_macs", "count_params_macs", "stats_frame"),
    "hwnas.supernet.pretrained": ("load_supernet", "shipped_checkpoint"),
    "hwnas.supernet.finetune": ("finetune_subnet", "FinetuneSettings"),
})
