"""Issue 32, items 8-10 and 12: Ctrl-C, YAML alias bombs, an edited run config, negative seeds and
repeated CSV columns. Each is one line and a clear exit code, nothing written or lost; where the
behaviour belongs to the process (signals, exit codes) the real CLI runs in a subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fault_stubs import sigint_at_default
from hwnas.families import NetworkSpec

DEV = "cpu-ort"
INTERRUPTED = "interrupted; what was written so far is kept, and the same command resumes"
ENV = {**os.environ, "HWNAS_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}


def cli(capsys, *args: str) -> tuple[int, list[str]]:
    """`hwnas ARGS` in this process: (exit code, the non-empty lines of stderr)."""
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    return done.value.code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def one_line(capsys, *args: str, code: int = 2) -> str:
    got, lines = cli(capsys, *args)
    assert got == code and len(lines) == 1 and "Traceback" not in lines[0], (got, lines)
    return lines[0]


def hwnas(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hwnas", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("HWNAS_NO_PROGRESS", "1")


@pytest.fixture(scope="module")
def searchable(tiny_supernet, tmp_path_factory) -> Path:
    """A run on the tiny supernet with a latency predictor (ms = MMACs) and an accuracy predictor,
    so `search --no-verify` finishes in seconds."""
    from hwnas.accuracy import ACCURACY_PREDICTOR, accuracy_sample, make_accuracy_predictor
    from hwnas.latency import AnalyticPredictor
    from hwnas.run import open_run
    from hwnas.search.problem import latency_predictor_path

    cfg = open_run(tmp_path_factory.mktemp("searchable") / "run", supernet=tiny_supernet)
    m = accuracy_sample(cfg.space, 200, seed=0)
    macs = cfg.family.count_params_macs(m, cfg.space.width_mult, cfg.n_classes)[1]
    AnalyticPredictor(features="stage", net=NetworkSpec("ofa-mbv3", 1.0, cfg.n_classes)).fit(m, macs / 1e6).save(
        latency_predictor_path(cfg.run_dir, DEV))
    make_accuracy_predictor("ridge", cfg.space, cfg.n_classes, features="full").fit(
        m, 60 + 5 * np.log(macs / macs.min())).save(cfg.run_dir / ACCURACY_PREDICTOR)
    return cfg.run_dir


@pytest.fixture
def run(searchable, tmp_path) -> Path:
    """A fresh copy of the searchable run, for a test to edit."""
    return Path(shutil.copytree(searchable, tmp_path / "run"))


def edit_config(run: Path, **changes) -> None:
    """Change config.yaml as a user would: `n_classes=...`, `family=...` or `space_<key>=...`."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    for key, value in changes.items():
        if key.startswith("space_"):
            config["space"][key[len("space_"):]] = value
        else:
            config[key] = value
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def search_args(run: Path, *extra: str) -> list[str]:
    return ["search", "--run", str(run), "--device", DEV, "--latency-ms", "15", "--no-verify",
            "--population", "12", "--generations", "2", *extra]


# -- item 8: Ctrl-C ----------------------------------------------------------------------------------
def store_rows(run: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(run / "measurements.parquet")
    except (FileNotFoundError, OSError, ValueError):  # not there yet, or replaced under us
        return pd.DataFrame(columns=["key"])


def test_ctrl_c_stops_profile_at_once_keeps_what_was_measured_and_says_so(tiny_supernet, tmp_path):
    """SIGINT used to leave the measurement running in a thread pool that the exit waited for (the
    process measured most of the remaining rows and exited 20 s later), and exit 130 silently."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "hwnas", "profile", "--run", str(run), "--device", DEV,
                             "--supernet", str(tiny_supernet), "--samples", "80", "--rounds", "3"],
                            stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=sigint_at_default)
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
        while len(store_rows(run)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        before = set(store_rows(run)["key"])
        assert proc.poll() is None and len(before) >= 3, "profile did not get going"
        proc.send_signal(signal.SIGINT)
        # a guard against a hang, not a timing assertion: on a loaded CI machine the process can be
        # inside a long runtime call when the signal lands; "at once" is checked below as "no
        # measurement after the one in flight"
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130 and lines == [f"error: {INTERRUPTED}"], (proc.returncode, err)
    after = store_rows(run)
    assert before <= set(after["key"]) and len(after) <= len(before) + 1  # at most the one in flight
    assert after["key"].is_unique


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(capsys, tmp_path, monkeypatch):
    """Typer turned the KeyboardInterrupt into a quiet exit 130: the message never showed."""
    import hwnas.families.tables as tables

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tables, "stats_frame", interrupted)
    table = tmp_path / "t.csv"
    table.write_text("r\n32\n")
    line = one_line(capsys, "supernet", "stats", "--table", str(table), "--out", str(tmp_path / "s.csv"),
                    code=130)
    assert line == f"error: {INTERRUPTED}"


# -- item 9: YAML aliases -------------------------------------------------------------------------
# nine levels of nine aliases: 9**9 strings once expanded, from about 400 bytes
BOMB = "devices:\n- name: bomb\n  backend: onnxruntime\n  options:\n" + "".join(
    f"    {a}: &{a} [{','.join([f'*{p}' if p else 'lol'] * 9)}]\n"
    for p, a in zip(["", *"abcdefgh"], "abcdefghi"))


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    """A 477-byte devices file kept `hwnas devices list` busy 20+ s at gigabytes."""
    bomb = tmp_path / "devices.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 500
    started = time.monotonic()
    proc = hwnas("devices", "list", "--devices", str(bomb), timeout=15)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "alias *a" in lines[0], proc.stderr
    assert str(bomb) in lines[0] and time.monotonic() - started < 10


ALIAS = "x: &x [3, 5]\nks: *x\n"


@pytest.mark.parametrize("where", ["--space", "--devices", "train --config", "train --set",
                                   "run config"])
def test_every_user_yaml_refuses_aliases(capsys, tmp_path, searchable, where):
    path = tmp_path / "in.yaml"
    path.write_text(ALIAS)
    args = {"--space": ["space", "info", "--space", str(path)],
            "--devices": ["devices", "list", "--devices", str(path)],
            "train --config": ["train", "--config", str(path), "--out", str(tmp_path / "t")],
            "train --set": ["train", "--set", "seed=[&a 1, *a]", "--out", str(tmp_path / "t")],
            "run config": ["latency", "fit", "--run", str(tmp_path / "run"), "--device", DEV]}[where]
    if where == "run config":
        shutil.copytree(searchable, tmp_path / "run")
        with (tmp_path / "run" / "config.yaml").open("a") as f:
            f.write(ALIAS)
    line = one_line(capsys, *args)
    assert "YAML alias *" in line and "write the values out" in line
    assert not (tmp_path / "t").exists()


def test_the_yaml_helper_is_one_line_for_broken_and_deep_yaml():
    from hwnas.errors import ConfigError, DeviceError
    from hwnas.fileio import parse_yaml

    assert parse_yaml("a: [1, 2]\nb: {c: x}\n", "f") == {"a": [1, 2], "b": {"c": "x"}}
    with pytest.raises(DeviceError, match=r"^devices file f is not valid YAML: .* at line 2"):
        parse_yaml("devices: [\n", "devices file f", DeviceError)
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_yaml("[" * 100_000, "f")
    with pytest.raises(ConfigError, match="could not determine a constructor"):  # safe types only
        parse_yaml("!!python/object/apply:os.system ['true']", "f")


# -- item 10: config.yaml against the checkpoint -----------------------------------------------------
def test_an_intact_run_searches(capsys, run):
    assert cli(capsys, *search_args(run))[0] == 0 and (run / "pareto.csv").is_file()


@pytest.mark.parametrize("change,field,said", [
    ({"space_ks": [3, 5, 7, 9]}, "space.ks", "[3, 5, 7]"),  # subnets the supernet cannot build
    ({"n_classes": 1000}, "n_classes", "10"),  # MACs and params of another classifier
    ({"space_width_mult": 1.2}, "space.width_mult", "1.0"),
    ({"space_r": [32, 36, 40, 44]}, "space.r", "[32, 36, 40]"),
    ({"family": "ofa-resnet50"}, "family", "ofa-mbv3"),  # checked before its space is read
])
def test_a_config_edited_against_its_checkpoint_is_refused_by_every_stage(capsys, run, change, field,
                                                                          said):
    edit_config(run, **change)
    for args in (search_args(run),
                 ["latency", "fit", "--run", str(run), "--device", DEV],
                 ["export", "--run", str(run), "--device", DEV, "--subnet", "0", "--no-measure"],
                 ["profile", "--run", str(run), "--device", DEV, "--samples", "1"],
                 ["accuracy", "build", "--run", str(run), "--samples", "1"]):
        line = one_line(capsys, *args)
        assert f"config.yaml: {field} is " in line and f"has {said}; set {field} back to {said}" in line
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "predictors"]  # nothing written


def test_a_shipped_supernet_run_is_checked_too(capsys, tmp_path):
    from hwnas.errors import ConfigError
    from hwnas.run import open_run

    run = open_run(tmp_path / "run").run_dir
    edit_config(run, n_classes=1000)
    with pytest.raises(ConfigError, match=r"n_classes is 1000, but its supernet \(shipped\) has 10"):
        open_run(run, create=False)


def test_a_run_whose_checkpoint_is_elsewhere_still_opens(tiny_supernet, tmp_path):
    """A run folder copied without its supernet: the reading stages work, loading says what is missing."""
    from hwnas.run import open_run

    stem = tmp_path / "supernet"
    for suffix in (".json", ".safetensors"):
        shutil.copy(Path(f"{tiny_supernet}{suffix}"), Path(f"{stem}{suffix}"))
    cfg = open_run(tmp_path / "run", supernet=stem)
    Path(f"{stem}.json").unlink()
    assert open_run(cfg.run_dir, create=False) == cfg


def test_the_check_reads_no_weights_and_imports_no_torch(searchable, tmp_path):
    """Search and latency fit stay torch-free: the check reads the checkpoint's JSON only."""
    code = ("import sys; from hwnas.run import open_run; "
            f"open_run({str(searchable)!r}, create=False); open_run({str(tmp_path / 'shipped')!r}); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_shipped_checkpoint_is_named_once():
    """`hwnas.supernet.pretrained` should import `shipped_checkpoint` from checkpoint_meta; until
    then, the two must agree."""
    from hwnas.supernet.checkpoint_meta import shipped_checkpoint
    from hwnas.supernet.pretrained import shipped_checkpoint as loader_s

    assert shipped_checkpoint() == loader_s()


# -- item 12: seeds and repeated columns ---------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["profile", "--device", DEV, "--samples", "2"],
    ["search", "--device", DEV, "--latency-ms", "10"],
    ["search", "--device", DEV, "--latency-ms", "10", "--algo", "optuna-tpe"],
    ["accuracy", "build", "--samples", "2"],
    ["accuracy", "fit"],
    ["latency", "fit", "--device", DEV],
    ["finetune", "--subnet", "x"],
])
@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_seed_out_of_range_is_refused_before_anything_is_written(capsys, tmp_path, command, seed):
    run = tmp_path / "run"
    line = one_line(capsys, *command, "--run", str(run), "--seed", seed)
    assert line == f"error: --seed must be within 0..{2**32 - 1}, got {seed}"
    assert list(tmp_path.iterdir()) == []  # no run folder, no optuna.journal


@pytest.mark.parametrize("command", [["search", "--device", DEV, "--latency-ms", "10", "--algo", "optuna-tpe"],
                                     ["profile", "--device", DEV, "--samples", "2"]])
def test_a_negative_seed_through_the_real_cli(run, command):
    """Was "unexpected error: ValueError ... (a bug in hwnas)", exit 1, with an optuna.journal (or
    a new run folder) left behind."""
    before = sorted(run.rglob("*"))
    target = run if command[0] == "search" else run.parent / "new-run"
    proc = hwnas(*command, "--run", str(target), "--seed", "-1", timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: --seed must be within 0..{2**32 - 1}, got -1"], proc.stderr
    assert sorted(run.rglob("*")) == before and not (run.parent / "new-run").exists()


def test_seeds_at_the_edges_of_the_range_work(capsys, tmp_path):
    for seed in ("0", str(2**32 - 1)):
        assert cli(capsys, "space", "sample", "-n", "2", "--seed", seed, "--out",
                   str(tmp_path / f"{seed}.json"))[0] == 0


def test_a_training_config_seed_out_of_range_is_refused(capsys, tmp_path):
    line = one_line(capsys, "train", "--set", "seed=-1", "--out", str(tmp_path / "t"))
    assert "seed" in line and "greater than or equal to 0" in line


@pytest.fixture(scope="module")
def two_r_columns(tmp_path_factory) -> Path:
    """Flat rows with a second `r` column that disagrees with the first."""
    from hwnas.space import SearchSpace, archs_to_frame

    df = archs_to_frame(SearchSpace().sample(5, 0))
    lines = [",".join([*df.columns, "r"])] + [",".join([*map(str, row), "224"]) for row in df.values]
    path = tmp_path_factory.mktemp("dupes") / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_repeated_columns_are_refused_by_latency_predict_and_supernet_stats(capsys, tmp_path,
                                                                           two_r_columns):
    from hwnas.latency import AnalyticPredictor
    from hwnas.space import SearchSpace
    from hwnas.accuracy import accuracy_sample

    m = accuracy_sample(SearchSpace(), 50, seed=0)
    predictor = tmp_path / "p.json"
    AnalyticPredictor(features="stage", net=NetworkSpec("ofa-mbv3", 1.0, 1000)).fit(m, m[:, 0] / 10.0).save(predictor)
    out = tmp_path / "out.csv"
    for args in (["latency", "predict", "--predictor", str(predictor), "--table", str(two_r_columns),
                  "--out", str(out)],
                 ["supernet", "stats", "--table", str(two_r_columns), "--out", str(out)],
                 ["latency", "fit", "--table", str(two_r_columns), "--target", "r", "--out",
                  str(tmp_path / "q.json")]):
        line = one_line(capsys, *args)
        assert line == f"error: table {two_r_columns} has more than one column named r; keep one of each"
    assert not out.exists() and not (tmp_path / "q.json").exists()


def test_unnamed_columns_are_not_repeated_names(tmp_path):
    from hwnas.space import read_table_frame

    path = tmp_path / "t.csv"
    path.write_text("r,ks_0,,\n32,3,,\n")  # trailing commas: pandas names them Unnamed: 2, Unnamed: 3
    assert list(read_table_frame(path).columns[:2]) == ["r", "ks_0"]
