"""Moved to the default family's `costs` module (its exact params and MACs, counted without building
a network); kept for existing imports. `count_params_macs` here counts one arch (the family module's
name for that is `arch_params_macs`)."""

from hwnas.families.ofa_mbv3.costs import *  # noqa: F401,F403

count_params_macs = arch_params_macs  # noqa: F405 (one arch, as this module always counted)

__all__ = ["count_params", "count_macs", "count_params_macs", "stats_frame"]
