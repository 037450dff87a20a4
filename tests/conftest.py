from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import pytest
import torch

# shared test helpers (e.g. ofa_reference; search_stubs; the test-only family tiny_convnet) import
# by name from any test folder
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(1, os.path.join(os.path.dirname(__file__), "search"))
sys.path.insert(2, os.path.join(os.path.dirname(__file__), "families"))

# Device anchors (hwnas.profiling.anchors) live in a per-user state folder: give the tests, and the
# processes they start, one of their own so they neither read nor change the user's.
os.environ["HWNAS_STATE_DIR"] = tempfile.mkdtemp(prefix="hwnas-test-state-")
atexit.register(shutil.rmtree, os.environ["HWNAS_STATE_DIR"], True)

# No test reaches beyond this machine (tests/no_network/sitecustomize.py): outbound connections are
# refused and logged here, in this process and, through PYTHONPATH, in every Python process it starts.
_GUARD_DIR = os.path.join(os.path.dirname(__file__), "no_network")
os.environ["HWNAS_TEST_NETWORK_LOG"] = os.path.join(os.environ["HWNAS_STATE_DIR"], "network.log")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_GUARD_DIR, os.environ.get("PYTHONPATH")]))
sys.path.insert(0, _GUARD_DIR)
import sitecustomize as network_guard  # noqa: E402  (the guard, under the name Python loads it by)

network_guard.install()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (README's test command): one worker per core, at most 4. Each test runs one torch
    thread (below), so workers scale with cores; every worker builds its own session fixtures, which
    past a few workers costs more than it saves."""
    return max(1, min(os.cpu_count() or 1, 4))


@pytest.hookimpl(trylast=True)  # after pytest-xdist's worker has renamed the grouped tests
def pytest_collection_modifyitems(config, items):
    """`gpu` tests skip, with the reason, where no CUDA device exists; a warning where pytest-xdist
    does not group."""
    _warn_unless_grouped(config, items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _warn_unless_grouped(config, items) -> None:
    """`--dist loadgroup` keeps the tests of one `xdist_group` (the browser tests, the INT8 export
    tests) on one worker, which builds their minutes-long session fixtures once. pytest-xdist marks a
    grouped test by suffixing its node id with ``@group``; where it cannot (pytest-xdist 3.8 on pytest
    9.2), every worker builds them and the suite runs minutes longer: say so."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rsplit("::", 1)[-1]]
    if lost:
        config.issue_config_time_warning(pytest.PytestWarning(
            f"pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]}): every worker builds their "
            "fixtures; install the pytest versions pyproject.toml's dev extra allows"), stacklevel=2)


@pytest.fixture(autouse=True)
def _no_network(request):
    """Fail the test during which (or since the previous test: collection, imports) any process
    tried to connect beyond this machine, unless it is marked `network_attempt` (it tries on
    purpose; the attempt stays refused). The log is emptied for the next test."""
    yield
    log = os.environ["HWNAS_TEST_NETWORK_LOG"]
    if not os.path.exists(log) or os.path.getsize(log) == 0:
        return
    with open(log, "r+") as f:
        attempts = f.read()
        f.truncate(0)
    if not request.node.get_closest_marker("network_attempt"):
        pytest.fail("the test reached beyond this machine (hwnas must not):\n" + attempts, pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Torch eager with 2 threads collapses when another process holds a core (shared machine);
    tests that need more threads set them explicitly."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_supernet(tmp_path_factory):
    """An (untrained) supernet checkpoint over a small space: enough for profiling and search
    plumbing, where weights do not matter."""
    from hwnas.space import SearchSpace
    from hwnas.supernet.checkpoint import save_checkpoint
    from hwnas.supernet.ofa_mbv3 import OFAMobileNetV3

    space = SearchSpace.from_dict({"r": "32:40:4"})
    torch.manual_seed(0)
    model = OFAMobileNetV3(space, n_classes=10)
    stem = tmp_path_factory.mktemp("supernet") / "supernet"
    save_checkpoint(stem, model, {"space": space.to_dict(), "n_classes": 10, "dataset": "mnist-embedded",
                                  "class_names": [str(i) for i in range(10)]}, rng=False)
    return stem


def _family_ids():
    from family_runs import every_family

    return every_family()


@pytest.fixture(params=_family_ids())
def family(request):
    """Each family in turn (`family_runs.every_family`), as its `Family`; the test-only family is
    registered for the test and unregistered after it."""
    from family_runs import family_in_registry

    from hwnas.families import get_family

    with family_in_registry(request.param):
        yield get_family(request.param)


@pytest.fixture(scope="session")
def family_supernet(tmp_path_factory):
    """family name -> the stem of a tiny untrained supernet checkpoint of it (made once)."""
    from family_runs import save_family_supernet

    made = {}

    def get(family: str):
        if family not in made:
            made[family] = save_family_supernet(family, tmp_path_factory.mktemp(family))
        return made[family]

    return get


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    """A fresh agent token file (the agent tests' shared secret)."""
    from hwnas.devices.agent import create_token_file

    path = tmp_path_factory.mktemp("token") / "agent.token"
    create_token_file(path)
    return path
