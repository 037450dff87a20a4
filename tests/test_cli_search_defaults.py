"""`hwnas search`'s options against `SearchSettings`: one default per setting (the CLI restates no
library default that could drift from it)."""

from __future__ import annotations

import dataclasses
import inspect

from hwnas.search.settings import SearchSettings

_FIELD_OF = {"objective": "objectives", "trials": "n_trials"}  # options named unlike their setting
_NOT_SETTINGS = {"run", "finetune_epochs"}  # options that are not search settings


def test_every_search_option_defaults_to_its_setting():
    from hwnas.cli.search import search_cmd

    fields = {f.name: f for f in dataclasses.fields(SearchSettings) if f.init}
    checked = []
    for name, param in inspect.signature(search_cmd).parameters.items():
        if name in _NOT_SETTINGS:
            continue
        field = fields.get(_FIELD_OF.get(name, name))
        assert field is not None, f"--{name.replace('_', '-')} has no SearchSettings field"
        default = getattr(param.default, "default", param.default)
        if default is ... or field.default is dataclasses.MISSING:
            continue  # required on both sides
        if name == "objective":
            assert default == [] and field.default is None  # none given: the settings' default objectives
            continue
        default = getattr(default, "value", default)  # enum choices (--algo)
        assert default == field.default, (name, default, field.default)
        checked.append(name)
    assert {"latency_margin", "latency_confidence", "top_k", "precision", "max_ram_kb", "max_flash_kb"} <= set(checked)
