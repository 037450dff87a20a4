"""Install sets that fit their users (pyproject.toml): every module hwnas imports is declared by
the core or by the extra of its feature (`hwnas.extras.MODULES`), no torch pin, and the remote
agent measures with nothing but the agent's install set, torch and the search stack absent."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from agent_helpers import AgentProcess, tiny_onnx

from hwnas.devices import Artifact, builtin_devices
from hwnas.extras import MODULES

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
#: what the agent must run without (the slim agent's venv does not have them)
NOT_ON_AGENT = ["torch", "torchvision", "pandas", "pyarrow", "scipy", "optuna", "matplotlib",
                "streamlit", "altair", "timm", "safetensors", "moocore", "threadpoolctl"]
#: functions and class attributes that name a module hwnas imports at run time (optional runtimes)
DYNAMIC = {"require", "_require", "missing_module", "need"}


def _dist(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


def _own_extras(requirement: str) -> list[str]:
    """The extras of a self-reference: "hwnas[a,b]" -> [a, b]."""
    match = re.fullmatch(r"hwnas\[([^\]]+)\]", requirement.replace(" ", ""))
    return match.group(1).split(",") if match else []


def _expand(extra: str) -> set[str]:
    """The distributions an extra installs beside the core, its self-references followed."""
    out: set[str] = set()
    for req in EXTRAS[extra]:
        own = _own_extras(req)
        out |= set().union(*map(_expand, own)) if own else {_dist(req)}
    return out


def _imported_modules() -> dict[str, set[str]]:
    """Top-level third-party module -> the files of hwnas that import it: import statements
    anywhere (also inside functions and TYPE_CHECKING) and module names given to hwnas's
    run-time importers (`requires = (...)`, `require("x")`, `missing_module("x")`)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "hwnas").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) in DYNAMIC:
                names = [node.args[0].value]
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "requires"
                                                      for t in node.targets):
                names = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
            for name in names:
                top = name.split(".")[0]
                if top != "hwnas" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(rel)
    return found


IMPORTED = _imported_modules()


def test_every_imported_module_is_declared_where_its_feature_is():
    unknown = {m: sorted(files) for m, files in IMPORTED.items() if m not in MODULES}
    assert not unknown, ("hwnas imports modules that no install set declares; add each to "
                         f"pyproject.toml and hwnas/extras.py MODULES: {unknown}")
    core = {_dist(r) for r in PROJECT["dependencies"]}
    for module, (dist, extra) in MODULES.items():
        where = core if extra is None else {_dist(r) for r in EXTRAS.get(extra, [])}
        assert _dist(dist) in where, f"{module}: {dist} is not declared in {extra or 'the core'}"


def test_every_core_dependency_is_imported():
    provides = {_dist(dist): module for module, (dist, _) in MODULES.items()}
    unused = [d for d in map(_dist, PROJECT["dependencies"]) if provides.get(d) not in IMPORTED]
    assert not unused, f"core dependencies that hwnas never imports: {unused}"


def test_every_declared_distribution_has_its_module():
    """So a missing one is named by the CLI (`hwnas.extras.missing_extra`); dev's test tools
    and Once-for-All's reference code are not hwnas's."""
    named = {_dist(dist) for dist, _ in MODULES.values()} | {"onnxruntime-gpu"}  # onnxruntime's CUDA build
    for extra, reqs in EXTRAS.items():
        if extra == "dev":
            continue
        for req in reqs:
            assert _own_extras(req) or _dist(req) in named, f"[{extra}] {req} is not in MODULES"


def test_no_pins_beside_a_users_stack():
    """Ranges only (constraints.txt pins what CI tests); dev's Once-for-All is a test reference."""
    reqs = [r for extra, rs in EXTRAS.items() if extra != "dev" for r in rs]
    pinned = [r for r in PROJECT["dependencies"] + reqs if "==" in r]
    assert not pinned, pinned
    assert not [r for rs in EXTRAS.values() for r in rs if _dist(r) in ("torch", "torchvision")
                and "==" in r]


def test_extras_compose():
    for extra, reqs in EXTRAS.items():
        for req in reqs:
            assert all(e in EXTRAS for e in _own_extras(req)), f"[{extra}] {req}: unknown extra"
        # the two builds of ONNX Runtime install the same module: never in one install set
        assert not {"onnxruntime", "onnxruntime-gpu"} <= _expand(extra), extra
    assert "torch" not in _expand("agent") and "pandas" not in _expand("agent")
    core = {_dist(r) for r in PROJECT["dependencies"]}
    assert "torch" not in core and {"typer", "rich"} <= core  # the `hwnas` command on an agent
    # README's command and CI install `all`: the pipeline, the dashboard, the agent, the tests
    needed = set().union(*(_expand(e) for e in ("pipeline", "dashboard", "agent", "dev")))
    assert needed <= _expand("all") and {"torch", "pandas", "timm", "onnxruntime"} <= _expand("pipeline")


def test_every_device_names_a_declared_extra():
    for device in builtin_devices().values():
        extra = device.backend_impl().extra
        assert extra is None or extra in EXTRAS, (device.name, extra)


# -- the slim agent: torch and the search stack absent ---------------------------------------
_ABSENT = '''\
import os, sys
from importlib.machinery import PathFinder

class _Absent(PathFinder):  # these modules and their distributions are absent, as in the agent's venv
    names = set(os.environ["HWNAS_ABSENT"].split(","))

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] in cls.names else super().find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        return (d for d in super().find_distributions(*args, **kwargs)
                if (d.metadata["Name"] or "").lower() not in cls.names)

sys.meta_path[:] = [_Absent if finder is PathFinder else finder for finder in sys.meta_path]
'''


@pytest.fixture(scope="module")
def slim_env(tmp_path_factory) -> dict[str, str]:
    """The environment of a process (and of the processes it starts) in which NOT_ON_AGENT
    cannot be imported: a sitecustomize on PYTHONPATH."""
    folder = tmp_path_factory.mktemp("absent")
    (folder / "sitecustomize.py").write_text(_ABSENT)
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "HWNAS_ABSENT": ",".join(NOT_ON_AGENT)}


def test_agent_measures_without_torch_or_the_search_stack(slim_env, token_file, tmp_path):
    agent = AgentProcess(token_file, tmp_path / "state", cli=True, env=slim_env)
    try:
        assert "cpu-ort" in agent.banner.split("devices usable here:")[1]
        model = Artifact("onnx", tiny_onnx(tmp_path / "tiny.onnx"), (1, 3, 8, 8))
        # the client in a slim process too: a device's own `hwnas` measures through the agent
        code = ("import sys; from pathlib import Path; from agent_helpers import remote; "
                "from hwnas.devices import Artifact; "
                "stats = remote('slim', int(sys.argv[1]), Path(sys.argv[2])).backend_impl().measure("
                "Artifact('onnx', Path(sys.argv[3]), (1, 3, 8, 8)), runs=4, warmup_runs=1, warmup_s=0.0); "
                "print(stats.n, stats.median_ms, stats.backend)")
        env = {**slim_env, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), slim_env["PYTHONPATH"]])}
        out = subprocess.run([sys.executable, "-c", code, str(agent.port), str(token_file),
                              str(model.path)], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        n, median_ms, backend = out.stdout.split()
        assert int(n) == 4 and float(median_ms) > 0 and backend == "onnxruntime"
    finally:
        stopped = agent.stop()
    assert stopped == 0 and "Traceback" not in agent.log.read_text()


def test_a_command_without_its_extra_says_which_in_one_line(slim_env):
    out = subprocess.run([sys.executable, "-m", "hwnas", "train"], capture_output=True, text=True,
                         env=slim_env, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: python -m hwnas train needs the 'train' extra: "
                                  "pip install 'hwnas[train]'")
