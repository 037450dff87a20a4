"""Moved to the default family's `network` module (and its layout to `plan`; families are the bottom
layer); kept for existing imports."""

from hwnas.families.ofa_mbv3.network_names import *  # noqa: F401,F403
__all__ = sorted(name for name in dir() if not name.startswith("_"))  # the star import's names
