"""The entry point: user and usage errors become one line on stderr and an exit code."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from hwnas.cli.app import Interrupted, app, err_console, setting_flag, state
from hwnas.errors import HwnasError, SettingError


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: user errors and usage errors become one line on stderr and exit code 2."""
    # Torch's intra-op pool on every core collapses when another process holds one (measured here:
    # 30x slower evaluation on 2 busy cores), so default to half the cores; OMP_NUM_THREADS wins.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    try:
        result = app(args=argv, standalone_mode=False)
    except HwnasError as err:
        if state["debug"]:
            raise
        # a library setting's error names it as the library does; here, as the flag that sets it
        _fail(err.render(setting_flag) if isinstance(err, SettingError) else str(err), err.exit_code)
    except typer.Abort:
        _fail("aborted", 130)
    except (KeyboardInterrupt, Interrupted):
        if state["debug"]:
            raise
        _fail("interrupted; what was written so far is kept, and the same command resumes", 130,
              at_once=argv is None)
    except OSError as err:  # a path the user gave: a file for a folder, no permission, disk full
        if state["debug"]:
            raise
        if (text := _path_problem(err)) is None:
            _unexpected(err)
        _fail(text, 2)
    except typer.TyperException as exc:  # Typer's own usage errors (bad option, unknown command)
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            sys.exit(0)
        ctx = getattr(exc, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _fail(exc.format_message().splitlines()[0] + where, getattr(exc, "exit_code", 2))
    except Exception as err:  # a bug: one line and the way to the traceback, not a traceback
        if state["debug"]:
            raise
        _unexpected(err)
    else:
        sys.exit(result if isinstance(result, int) else 0)


_PATH_ERRNOS = {"ENOENT": "it does not exist", "EACCES": "permission denied",
                "EPERM": "permission denied", "EROFS": "the file system is read-only",
                "ENOTDIR": "a file is in the way where a folder is needed",
                "EISDIR": "it is a folder, a file is needed", "EEXIST": "something is in the way",
                "ENOSPC": "no space left on the device", "EDQUOT": "disk quota exceeded",
                "ENAMETOOLONG": "the name is too long", "ELOOP": "too many symbolic links",
                "ETXTBSY": "the file is busy"}


def _path_problem(err: OSError) -> str | None:
    """One line for an OSError about a path the user controls, or None for anything else."""
    import errno

    name = errno.errorcode.get(err.errno or -1, "")
    if name not in _PATH_ERRNOS:
        return None
    where = err.filename if err.filename is not None else "a file"
    fix = {"EACCES": "make it writable (or readable) or choose another path",
           "EPERM": "make it writable (or readable) or choose another path",
           "EROFS": "choose a path on a writable file system",
           "ENOSPC": "free some space", "EDQUOT": "free some space"}.get(name, "check the path")
    return f"cannot use {where}: {_PATH_ERRNOS[name]}; {fix}"


def _unexpected(err: BaseException) -> None:
    text = " ".join(str(err).split())[:300]
    _fail(f"unexpected error: {type(err).__name__}{': ' + text if text else ''} (a bug in hwnas; "
          "rerun with `hwnas --debug ...` for the traceback and report it)", 1)


def _fail(message: str, code: int, at_once: bool = False) -> None:
    """One line and the exit code. `at_once` (Ctrl-C in the `hwnas` process itself): every writer
    is atomic and the stack has unwound, so exit without waiting for library threads (ONNX
    Runtime's, torch's) to wind down."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
