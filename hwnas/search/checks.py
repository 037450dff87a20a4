"""The rules a search setting must meet, each spelled once, in the library's terms.

A broken rule is a `SettingError`: one line that names the setting as the library spells it
(``population must be at least 1``). Its text is a template over the settings it names, so a
front end that spells them otherwise (the CLI's ``--population``) renders the same sentence with
its own names (`SettingError.render`) instead of keeping a second copy of the rule.
"""

from __future__ import annotations

import math
from typing import Any

from hwnas.errors import SettingError

__all__ = ["SettingError", "literal", "whole_number", "positive_number", "within"]


def literal(value: Any) -> str:
    """`value`'s text for a `SettingError` template (its braces kept as they are)."""
    return str(value).replace("{", "{{").replace("}", "}}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def whole_number(name: str, value: Any, least: int = 1, *, optional: bool = False) -> None:
    """`value` is an int >= `least` (or None when `optional`: the default applies)."""
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        what = f"at least {least}" if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
        hint = "; leave it out for the default" if optional else ""
        raise SettingError(f"{{{name}}} must be {what}, got {literal(repr(value))}{hint}", name)


def positive_number(name: str, value: Any, what: str = "a positive number", *, optional: bool = False,
                    hint: str = "") -> None:
    """`value` is a finite number > 0 (or None when `optional`)."""
    if value is None and optional:
        return
    if not (_is_number(value) and value > 0 and math.isfinite(value)):
        raise SettingError(f"{{{name}}} must be {what}, got {literal(repr(value))}{hint}", name)


def within(name: str, value: Any, low: float, high: float, note: str = "") -> None:
    """`value` is a number in [low, high)."""
    if not (_is_number(value) and low <= value < high):
        raise SettingError(f"{{{name}}} must be within [{low:g}, {high:g}){note}, got {literal(repr(value))}", name)
