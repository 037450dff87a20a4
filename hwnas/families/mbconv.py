"""The block description both MobileNet families' plans yield (torch-free, so costs and layouts
are computed without building a network)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockSpec"]


@dataclass(frozen=True)
class BlockSpec:
    """One searchable MBConv block: its stage, index in the stage, gene slot, widths, stride,
    activation and whether it has squeeze-and-excitation."""

    stage: int
    index: int
    slot: int
    in_channels: int
    out_channels: int
    stride: int
    act: str
    use_se: bool

    @property
    def residual(self) -> bool:
        """An identity shortcut: same width in and out, stride 1."""
        return self.stride == 1 and self.in_channels == self.out_channels
