"""Alias of `hwnas.devices.tensorrt_build` (moved there: the TensorRT device builds its engines with
it, and devices sit below export). The old import path stays the same module object."""

import sys

from hwnas.devices import tensorrt_build as _module

sys.modules[__name__] = _module
