"""`hwnas search`'s and `hwnas export`'s options against their settings models: one definition per
setting (the CLI restates no library default or help text that could drift from it)."""

from __future__ import annotations

import inspect

from hwnas.search.settings import SearchSettings
from hwnas.settings import field_default, field_help

_FIELD_OF = {"objective": "objectives", "trials": "n_trials"}  # options named unlike their setting
_NOT_SETTINGS = {"run", "finetune_epochs"}  # options that are not search settings


def test_every_search_option_is_its_setting():
    from hwnas.cli.search import search_cmd

    checked = []
    for name, param in inspect.signature(search_cmd).parameters.items():
        if name in _NOT_SETTINGS:
            continue
        setting = _FIELD_OF.get(name, name)
        assert setting in SearchSettings.model_fields, f"--{name.replace('_', '-')} has no SearchSettings field"
        option = param.default
        if name not in ("seed", "devices_file"):  # shared options of every command
            assert option.help == field_help(SearchSettings, setting), name
        default = getattr(option, "default", option)
        if name == "objective":
            assert default == [] and field_default(SearchSettings, setting) is None  # none: the default objectives
            continue
        default = getattr(default, "value", default)  # enum choices (--algo)
        assert default == field_default(SearchSettings, setting), (name, default)
        checked.append(name)
    assert {"latency_margin", "latency_confidence", "top_k", "precision", "max_ram_kb", "max_flash_kb"} <= set(checked)


def test_every_setting_has_help():
    assert all(f.description for f in SearchSettings.model_fields.values())


def test_every_export_setting_is_an_option_with_its_default_and_help():
    from hwnas.cli.export import export_cmd
    from hwnas.export.settings import ExportSettings

    params = inspect.signature(export_cmd).parameters
    for name in ExportSettings.model_fields:
        option = params[name].default
        assert option.default == field_default(ExportSettings, name) and option.help == field_help(ExportSettings, name)
