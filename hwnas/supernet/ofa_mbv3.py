"""Moved to the default family's `network` module (and its layout to `plan`; families are the bottom
layer); kept for existing imports."""

from hwnas.families.ofa_mbv3.network_names import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.network_names import __all__ as __all__
