"""What the elastic MBConv supernets (OFA-MobileNetV3, OFA-ProxylessNAS) share: a fixed first block,
then stages of `DynamicMBConv` blocks of which each runs its first ``runtime_depth[s]``; forward,
static-subnet extraction and channel sorting work the same on both."""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import torch
import torch.nn as nn

__all__ = ["MBConvChain", "ElasticMBConvChain"]


class MBConvChain(nn.Module):
    """``first_conv``, the blocks `active_blocks` yields (a static subnet: all of them), then the
    family's ``forward_head``: the forward of every MobileNet network, static or elastic."""

    def active_blocks(self) -> Iterator[nn.Module]:
        return iter(self.blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first_conv(x)
        for block in self.active_blocks():
            x = block(x)
        return self.forward_head(x)


class ElasticMBConvChain(MBConvChain):
    """Base of a supernet with ``first_conv``, ``blocks`` (blocks[0] fixed), ``block_group_info``
    (block indices per stage), ``runtime_depth`` and a ``forward_head``; `FIXED_LAYERS` names the
    layers besides the blocks that a static subnet copies as they are."""

    FIXED_LAYERS: tuple[str, ...] = ()

    def elastic_block(self, stage: int, index: int) -> nn.Module:
        return self.blocks[self.block_group_info[stage][index]].conv

    def active_blocks(self) -> Iterator[nn.Module]:
        yield self.blocks[0]
        for group, depth in zip(self.block_group_info, self.runtime_depth):
            for idx in group[:depth]:
                yield self.blocks[idx]

    def _subnet_state(self, blocks: Iterable, ks: Sequence[int], e: Sequence[int]) -> dict[str, torch.Tensor]:
        """The static subnet's state dict: fixed layers and the first block copied, every active
        block (`blocks`: its plan's block specs) sliced and kernel-transformed. Detached copies."""
        state: dict[str, torch.Tensor] = {}
        for name in (*self.FIXED_LAYERS, "blocks.0"):
            module = self.get_submodule(name)
            for key, t in module.state_dict().items():
                state[f"{name}.{key}"] = t.detach().clone()
        for i, b in enumerate(blocks, start=1):
            layer = self.elastic_block(b.stage, b.index)
            for key, t in layer.active_state(b.in_channels, ks[b.slot], e[b.slot]).items():
                state[f"blocks.{i}.conv.{key}"] = t
        return state

    def _filled(self, subnet: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
        """`subnet` holding `state`, in this supernet's mode, device and dtype."""
        subnet.load_state_dict(state, strict=True)
        p = next(self.parameters())
        return subnet.to(device=p.device, dtype=p.dtype).train(self.training)

    def sort_channels(self, expand_stage: int = 0) -> None:
        """Reorder every searchable block's hidden channels by importance (Once-for-All's
        ``re_organize_middle_weights``); the max network computes the same function afterwards."""
        for block in self.blocks[1:]:
            block.conv.sort_channels(expand_stage)
