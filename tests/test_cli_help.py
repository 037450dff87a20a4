"""Help on every option of every command, and one name per concept across commands (issue 30):
renamed options keep their old names as hidden aliases that still work."""

from __future__ import annotations

import json

import pytest
import typer

from cli_calls import cli
from hwnas.cli import app


def _commands(cmd, path=("hwnas",)):
    """(command path, click command) of every command, groups walked."""
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_the_walk_finds_every_command():
    names = {path for path, _ in COMMANDS}
    assert {"hwnas search", "hwnas devices list", "hwnas space info", "hwnas agent serve"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path, command", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_option_of_every_command_has_help(path, command):
    assert (command.help or "").strip(), f"{path} has no help"
    missing = [p.opts for p in command.params if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{path}: no help for {missing}"


def test_family_means_the_same_everywhere():
    """--family: no default of its own (ofa-mbv3 unless a run or a config says otherwise), and its
    help names the families."""
    seen = 0
    for path, command in COMMANDS:
        for p in command.params:
            if "--family" in p.opts:
                seen += 1
                assert p.default is None, path
                assert "ofa-mbv3" in p.help and "ofa-resnet50" in p.help, path
    assert seen >= 7


def test_one_name_per_concept():
    opts = {path: {o for p in command.params if not getattr(p, "hidden", False) for o in p.opts}
            for path, command in COMMANDS}
    assert "--supernet" in opts["hwnas supernet eval"] and "--checkpoint" not in opts["hwnas supernet eval"]
    assert "--samples" in opts["hwnas space sample"] and "-n" not in opts["hwnas space sample"]
    assert not any("--json" in o for o in opts.values())  # --format table|json|csv instead


def test_space_help_names_the_families(capsys):
    code, text = cli(capsys, "space", "--help")
    assert code == 0 and "ProxylessNAS" in text and "ResNet50" in text


def test_old_names_still_work(capsys):
    new = cli(capsys, "space", "sample", "--samples", "3", "--seed", "1")
    assert new[0] == 0 and len(json.loads(new[1])) == 3
    for old in ("-n", "--num"):
        assert cli(capsys, "space", "sample", old, "3", "--seed", "1") == new
    code, text = cli(capsys, "space", "sample", "--samples", "3", "-n", "3")
    assert code == 2 and "old name of --samples" in text and len(text.strip().splitlines()) == 1
    assert json.loads(cli(capsys, "space", "info", "--json")[1]) == json.loads(
        cli(capsys, "space", "info", "--format", "json")[1])
    code, text = cli(capsys, "space", "info", "--family", "ofa-resnet50")
    assert code == 0 and "OFA-ResNet50" in text
