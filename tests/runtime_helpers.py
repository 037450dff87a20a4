"""Optional runtimes in tests, imported as hwnas imports them."""

from __future__ import annotations

import pytest


def openvino_or_skip():
    """``openvino`` imported without its usage telemetry (a plain import sends an event, which the
    suite's network guard fails), or the test skipped when it is not installed."""
    from hwnas.devices.openvino_backend import import_openvino
    from hwnas.errors import DeviceError, MissingExtraError

    try:
        return import_openvino("tests")
    except (DeviceError, MissingExtraError, ImportError):
        pytest.skip("OpenVINO is not installed")
