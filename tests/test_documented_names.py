"""Documented names are an API: every `from hwnas... import ...` in the README and docs/ imports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_IMPORT = re.compile(r"^\s*from (hwnas[\w.]*) import ([\w, ]+?)\s*(?:#.*)?$", re.M)


def _documented() -> list[tuple[str, str, str]]:
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for module, names in _IMPORT.findall(doc.read_text()):
            found += [(doc.name, module, name.strip()) for name in names.split(",") if name.strip()]
    return found


def test_the_docs_import_something():
    assert len(_documented()) >= 3


@pytest.mark.parametrize("doc, module, name", _documented())
def test_documented_import_works(doc, module, name):
    assert hasattr(importlib.import_module(module), name), f"{doc}: from {module} import {name}"


@pytest.mark.parametrize("path", ["hwnas.supernet.load_supernet", "hwnas.supernet.pretrained.load_supernet",
                                  "hwnas.space.Arch.from_ofa_dict", "hwnas.supernet.finetune_subnet"])
def test_names_promised_in_issues_stay(path):
    module, _, rest = path.partition(".")
    obj = importlib.import_module(module)
    for part in path.split(".")[1:]:
        obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(f"{obj.__name__}.{part}")
    assert obj is not None


_LINK = re.compile(r"\]\((?!https?:|#)([^)#\s]+)")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
                         ids=lambda p: p.name)
def test_relative_links_and_pictures_exist(doc):
    missing = [link for link in _LINK.findall(doc.read_text()) if not (doc.parent / link).exists()]
    assert not missing, f"{doc.name} links to missing files: {missing}"


def test_the_readme_is_a_landing_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200 and "![" in text
    assert text.index(".venv/bin/hwnas quickstart") < text.index("python -m pytest")  # the two commands first
