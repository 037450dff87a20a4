"""Moved to `hwnas.profiling.anchors` (issue 16 part 5); this name keeps old imports working."""

from hwnas.profiling.anchors import AnchorBook, anchor_key  # noqa: F401

__all__ = ["AnchorBook", "anchor_key"]
