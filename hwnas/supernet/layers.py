"""Moved to `hwnas.families.layers` (families are the bottom layer); kept for existing imports."""

from hwnas.families.layers import *  # noqa: F401,F403
from hwnas.families.layers import __all__ as __all__
