"""The family's network and plan names in one namespace: what `hwnas.supernet.ofa_mbv3` re-exports
under the names hwnas has always had. Imports torch."""

from hwnas.families.mbconv import BlockSpec as BlockSpec
from hwnas.families.ofa_mbv3 import network, plan
from hwnas.families.ofa_mbv3.network import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.plan import *  # noqa: F401,F403

__all__ = [*network.__all__, *plan.__all__, "BlockSpec"]
