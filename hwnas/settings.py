"""The bases of hwnas's settings models and run-file records: a pydantic model is the one
definition of a setting or of a file's shape.

A field's type, default, bounds and help text are declared once (`setting`); the library validates
them on construction and a broken rule is one `SettingError` line naming the setting as the library
spells it (``top_k must be at least 1, got 0``). Front ends render the same line with their own
names (the CLI's ``--top-k``) and build their options from the same fields (`field_help`).
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hwnas.errors import SettingError

__all__ = ["Settings", "Record", "setting", "field_default", "field_help", "schema_problem"]


def setting(default: Any = ..., *, help: str = "", what: str | None = None, hint: str | None = None,
            note: str = "", **bounds: Any) -> Any:
    """A field with its bounds (pydantic's `ge`, `gt`, `lt`, `le`) and the words of its error line:
    `what` it must be (default from the bounds), a `hint` after the value (default for an optional
    setting: leave it out), a `note` after a range."""
    words = {k: v for k, v in (("what", what), ("hint", hint), ("note", note)) if v}
    return Field(default, description=help, json_schema_extra={"hwnas_error": words} if words else None, **bounds)


class Settings(BaseModel):
    """Frozen, no unknown names; validated once, when made."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise _setting_error(type(self), err) from None

    def values(self) -> dict[str, Any]:
        """{setting: value} as given (validated), for a copy with changes."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    def replace(self, **changes: Any) -> "Settings":
        """These settings with `changes` (validated again)."""
        return type(self)(**{**self.values(), **changes})


class Record(BaseModel):
    """A part of a run file or bundle file (search.json, model.json): typed where readers decide
    with it, keys a newer hwnas adds kept as they are."""

    model_config = ConfigDict(extra="allow")


def schema_problem(model: type[BaseModel], doc: Any) -> str | None:
    """None when `doc` fits `model`, else the first problem in a few words (``accuracy.top1: Field
    required``)."""
    try:
        model.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the file"
        return f"{where}: {first.get('msg', 'invalid')}"
    return None


def field_default(model: type[BaseModel], name: str) -> Any:
    """`name`'s default in `model` (``...`` when it is required)."""
    f = model.model_fields[name]
    return ... if f.is_required() else f.default


def field_help(model: type[BaseModel], name: str) -> str:
    return model.model_fields[name].description or ""


def _bounds(metadata: list[Any]) -> tuple[tuple[float, bool] | None, tuple[float, bool] | None]:
    """((low, inclusive) | None, (high, inclusive) | None) of a field's annotated bounds."""
    low = high = None
    for m in metadata:  # annotated_types' Ge, Gt, Le, Lt (pydantic's own constraint objects)
        for name, inclusive, side in (("ge", True, "low"), ("gt", False, "low"), ("le", True, "high"),
                                      ("lt", False, "high")):
            if type(m).__name__ == name.capitalize() and hasattr(m, name):
                if side == "low":
                    low = (getattr(m, name), inclusive)
                else:
                    high = (getattr(m, name), inclusive)
    return low, high


def _is_int(annotation: Any) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation is int or (len(args) == 1 and _is_int(args[0])) or (
        typing.get_origin(annotation) is typing.Annotated and _is_int(args[0]))


def _choices(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    return tuple(c for a in typing.get_args(annotation) for c in _choices(a))


def _literal(value: Any) -> str:
    return str(value).replace("{", "{{").replace("}", "}}")


def _setting_error(model: type[BaseModel], err: ValidationError) -> Exception:
    """The first broken rule as one line in the library's terms."""
    first = err.errors()[0]
    loc = first.get("loc") or ("settings",)
    name = str(loc[0])
    kind = first["type"]
    if kind == "extra_forbidden":
        return TypeError(f"{model.__name__} has no setting {name!r}")
    if kind == "missing":
        return SettingError(f"{{{name}}} is required", name)
    field = model.model_fields.get(name)
    if field is None:
        return SettingError(f"{{{name}}}: {_literal(first.get('msg', 'invalid'))}", name)
    words = (field.json_schema_extra or {}).get("hwnas_error", {}) if isinstance(field.json_schema_extra, dict) else {}
    got = _literal(repr(first.get("input")))
    hint = words.get("hint", "; leave it out for the default" if field.default is None else "")
    choices = _choices(field.annotation)
    low, high = _bounds(field.metadata)
    if choices:
        what = "one of " + ", ".join(map(str, choices))
    elif kind.startswith(("int_", "bool_")) or (kind.endswith("_type") and _is_int(field.annotation)):
        what = "a whole number"
    elif "what" in words:
        what = words["what"]
    elif low is not None and high is not None:
        what = (f"within {'[' if low[1] else '('}{low[0]:g}, {high[0]:g}{']' if high[1] else ')'}"
                f"{words.get('note', '')}")
    elif low is not None and _is_int(field.annotation):
        what = f"at least {low[0] if low[1] else low[0] + 1}"
    elif low is not None:
        what = ("a positive number" if low == (0, False) else
                f"{'at least' if low[1] else 'more than'} {low[0]:g}")
    else:
        return SettingError(f"{{{name}}}: {_literal(first.get('msg', 'invalid'))}, got {got}", name)
    return SettingError(f"{{{name}}} must be {what}, got {got}{hint}", name)
