"""Moved to `hwnas.families.elastic` (families are the bottom layer); kept for existing imports."""

from hwnas.families.elastic import *  # noqa: F401,F403
from hwnas.families.elastic import __all__ as __all__
