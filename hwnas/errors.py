"""User-facing errors.

Everything a user can cause (a bad file, an unknown device, an impossible budget) raises a
`HwnasError` subclass whose message says what is wrong *and* how to fix it. The CLI prints that
one line and exits with code 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

from typing import Callable, Mapping

__all__ = [
    "HwnasError",
    "InputError",
    "SettingError",
    "TableError",
    "ConfigError",
    "CheckpointError",
    "DeviceError",
    "BudgetError",
    "AgentError",
    "MissingExtraError",
    "shown",
]


def shown(value) -> str:
    """A value for an error line as the user wrote it: numpy scalars without their type
    (``-1.0``, not ``np.float64(-1.0)``)."""
    return repr(value.item() if hasattr(value, "item") else value)


class HwnasError(Exception):
    """Base class of errors a user can cause and fix. `str(err)` is the one line the CLI prints."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


class InputError(HwnasError):
    """A value given on the command line or to a library function is not acceptable."""


class TableError(InputError):
    """A CSV/Parquet table is malformed; the message names the row and column."""


class ConfigError(InputError):
    """A YAML/JSON configuration file is missing, unreadable or invalid."""


class CheckpointError(HwnasError):
    """A checkpoint is missing, corrupt, or belongs to another network."""


class DeviceError(HwnasError):
    """A device is unknown or unavailable here."""


class BudgetError(HwnasError):
    """A latency (or other) budget no subnet of the space can meet."""


class AgentError(HwnasError):
    """A remote device agent is unreachable, refused the request, or failed."""


class MissingExtraError(HwnasError):
    """A command needs an optional part of hwnas that is not installed; the message names the
    pip extra that installs it."""


class SettingError(InputError):
    """A library setting out of its range (a search's, an accuracy table's). `template` names settings as ``{name}``; `settings`
    are the names it mentions, first the one at fault."""

    def __init__(self, template: str, *settings: str) -> None:
        self.template, self.settings = template, settings
        super().__init__(self.render())

    @property
    def setting(self) -> str:
        return self.settings[0]

    def render(self, spell: Callable[[str], str] | Mapping[str, str] | None = None) -> str:
        """The message with each setting spelled by `spell` (a mapping or function; default: as
        the library names it)."""
        if spell is None:
            names = {s: s for s in self.settings}
        elif callable(spell):
            names = {s: spell(s) for s in self.settings}
        else:
            names = {s: spell.get(s, s) for s in self.settings}
        return self.template.format(**names)
