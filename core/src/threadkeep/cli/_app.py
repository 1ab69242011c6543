"""The typer application, the options commands share, and how a command reaches its store.

A command module (listed in ``threadkeep.cli.COMMAND_MODULES``) defines ``register(app)``
and uses what is here: the shared options (``UrlOption``, ``LimitOption``, ``CursorOption``,
``JsonOption``, ``UserOption``), :func:`opened_store` to open the store a ``--url`` names,
:func:`run` to drive a coroutine, and :func:`print_json`. It never handles errors itself:
:class:`OneLineErrors` turns a ``ThreadkeepError``, a :class:`CliError` or a usage error into
one line on stderr and a non-zero exit status.

Exit statuses: 0 success; 1 the operation failed (the store or backend, a missing chat, a
conflict, or an unexpected error, shown as one line unless ``THREADKEEP_DEBUG=1``); 2 bad
arguments or configuration (usage errors, ``InvalidArgument`` such as a malformed URL,
cursor, setting or input file, an unknown URL scheme); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperGroup

from .._errors import InvalidArgument, ThreadkeepError, UnknownDriver
from .._open import open_store
from .._settings import load_settings
from .._store import Store
from ._render import visible

__all__ = [
    "DEBUG_ENV",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CliError",
    "CursorOption",
    "Interrupted",
    "JsonOption",
    "LimitOption",
    "OneLineErrors",
    "UrlOption",
    "UserOption",
    "create_app",
    "error_line",
    "opened_store",
    "print_json",
    "resolve_url",
    "run",
    "stderr_console",
    "stdout_console",
]

EXIT_ERROR = 1
"""Exit status when the operation failed (the store, the backend, or an unexpected error)."""

EXIT_USAGE = 2
"""Exit status for bad arguments or configuration (click's convention for usage errors)."""

EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT)."""

DEBUG_ENV = "THREADKEEP_DEBUG"
"""Set this environment variable to ``1`` to see the traceback of an unexpected error."""

_USAGE_ERRORS = (InvalidArgument, UnknownDriver)
_PROG = "threadkeep"

T = TypeVar("T")

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help=(
            "Store URL, for example memory://demo or postgresql+asyncpg://... Default: "
            "$THREADKEEP_URL, then the settings file (threadkeep.toml), then the embedded "
            "SQLite file sqlite+aiosqlite:///./threadkeep.db."
        ),
        show_default=False,
    ),
]
LimitOption = Annotated[
    int,
    typer.Option("--limit", help="Items per page: at least 1; above 200 means 200."),
]
CursorOption = Annotated[
    str | None,
    typer.Option("--cursor", help="The next_cursor of the previous page.", show_default=False),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print JSON instead of a table."),
]
UserOption = Annotated[
    str | None,
    typer.Option("--user", help="Only chats of this user id.", show_default=False),
]


class CliError(Exception):
    """A failure the command line reports as one line, without a traceback.

    Args:
        message: The line to print (after ``threadkeep: error:``).
        exit_code: The exit status; :data:`EXIT_ERROR` unless the user's input is at fault
            (:data:`EXIT_USAGE`).
    """

    def __init__(self, message: str, *, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(CliError):
    """Ctrl-C stopped a command; the message says what was already done (exit status 130)."""

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message, exit_code=EXIT_INTERRUPTED)


def error_line(exc: BaseException) -> str:
    """Return an exception's message as one line (whitespace runs collapsed)."""
    text = exc.format_message() if isinstance(exc, typer.TyperException) else str(exc)
    return " ".join(text.split()) or type(exc).__name__


class OneLineErrors(TyperGroup):
    """The root command group: every failure becomes ONE line on stderr.

    Usage errors and ``InvalidArgument`` / ``UnknownDriver`` exit with status 2, any other
    ``ThreadkeepError`` and :class:`CliError` with 1, Ctrl-C with 130. Anything else is
    unexpected: one line naming the exception type and status 1, or the full traceback when
    ``THREADKEEP_DEBUG=1``.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; see the class docstring for exit statuses."""
        handler = _LogLines()
        library_log = logging.getLogger("threadkeep")
        library_log.addHandler(handler)
        try:
            result = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except (ThreadkeepError, CliError, typer.TyperException, typer.Abort) as exc:
            if not standalone_mode:
                raise
            _fail(exc, _exit_status(exc), expected=True)
        except (KeyboardInterrupt, Exception) as exc:  # the last resort: no raw tracebacks
            if not standalone_mode:
                raise
            code = EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else EXIT_ERROR
            _fail(exc, code, expected=isinstance(exc, KeyboardInterrupt))
        finally:
            library_log.removeHandler(handler)
        if not standalone_mode:
            return result
        # Outside standalone mode click returns the status of an explicit Exit (or None);
        # typer turns Ctrl-C into a silent Exit(130).
        if result == EXIT_INTERRUPTED:
            _fail(KeyboardInterrupt(), EXIT_INTERRUPTED, expected=True)
        sys.exit(result if isinstance(result, int) else 0)


class _LogLines(logging.Handler):
    """Library warnings and errors as ``threadkeep: warning: ...`` lines on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        level = "error" if record.levelno >= logging.ERROR else "warning"
        text = " ".join(visible(record.getMessage().removeprefix(f"{_PROG}: ")).split())
        typer.echo(f"{_PROG}: {level}: {text}", err=True)
        if record.exc_info and record.exc_info[1] is not None and _debug():
            traceback.print_exception(record.exc_info[1], file=sys.stderr)


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _fail(exc: BaseException, code: int, *, expected: bool) -> None:
    """Print ``exc`` as one line on stderr (or its traceback in debug mode) and exit."""
    if _debug() and not isinstance(exc, typer.TyperException | typer.Abort):
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, typer.Abort | KeyboardInterrupt):
        line = "interrupted"
    elif expected:
        line = error_line(exc)
    else:
        line = f"unexpected {type(exc).__name__}: {error_line(exc)}"
        if not _debug():
            line += f" (this is a bug; run again with {DEBUG_ENV}=1 for the traceback)"
    usage = isinstance(exc, typer.TyperException) and code == EXIT_USAGE
    hint = _usage_hint(exc) if usage else ""
    typer.echo(f"{_PROG}: error: {visible(line)}{hint}", err=True)
    sys.exit(code)


def _exit_status(exc: BaseException) -> int:
    if isinstance(exc, typer.Abort):
        return EXIT_INTERRUPTED
    if isinstance(exc, typer.TyperException):
        return EXIT_USAGE if exc.exit_code == EXIT_USAGE else exc.exit_code or EXIT_ERROR
    if isinstance(exc, CliError):
        return exc.exit_code
    return EXIT_USAGE if isinstance(exc, _USAGE_ERRORS) else EXIT_ERROR


def _usage_hint(exc: BaseException) -> str:
    context = getattr(exc, "ctx", None)
    command_path = getattr(context, "command_path", None) or _PROG
    return f" (see '{command_path} --help')"


def create_app() -> typer.Typer:
    """Return the root ``threadkeep`` app with no commands yet (``register`` adds them)."""
    app = typer.Typer(
        cls=OneLineErrors,
        name=_PROG,
        help="Durable chat history for AI agents: store, import and page conversations.",
        add_completion=True,  # --install-completion / --show-completion (docs/cli.md)
        no_args_is_help=False,
        rich_markup_mode="markdown",  # help paragraphs rewrap (docstrings break lines at 100)
    )
    app.callback(invoke_without_command=True)(_root)
    return app


def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print the threadkeep version and exit.")
    ] = False,
) -> None:
    """Durable chat history for AI agents: store, import and page conversations."""
    if version:
        from .. import __version__

        typer.echo(f"threadkeep {__version__}")
        raise typer.Exit
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit


def resolve_url(url: str | None) -> str:
    """Return the store URL a command uses.

    Precedence (``threadkeep.load_settings``): ``url`` (the ``--url``
    option), else ``THREADKEEP_URL``, else the settings file, else the embedded SQLite file.

    Args:
        url: The ``--url`` option's value, or ``None``.

    Returns:
        The store URL.

    Raises:
        InvalidArgument: If the settings file is missing (when named by
            ``THREADKEEP_CONFIG``), malformed, or holds an unknown key or a bad value.
    """
    return load_settings(url=url).url


@asynccontextmanager
async def opened_store(url: str | None, **options: Any) -> AsyncIterator[Store]:
    """Open the store ``url`` names (see :func:`resolve_url`) and close it afterwards.

    ``options`` are passed to ``open_store`` (``corrupt_records="skip"`` for ``check``).

    Raises:
        UnknownDriver: If no installed driver serves the URL's scheme.
        BackendUnavailable: If the backend cannot be reached.
        InvalidArgument: If the URL or the settings are invalid.
    """
    async with open_store(resolve_url(url), **options) as store:
        yield store


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on a fresh event loop and return its result.

    Raises:
        Interrupted: On Ctrl-C (the coroutine was cancelled first).
    """
    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt as exc:
        raise Interrupted() from exc


_RAW_IN_JSON = re.compile("[\x7f-\x9f]")
"""DEL and C1 controls: JSON leaves them raw, a terminal may act on them (CSI is U+009B)."""


def print_json(data: Any) -> None:
    """Print ``data`` as one line of JSON on stdout (non-ASCII text kept as is).

    Control characters are written as JSON escapes (the same value), so stored escape
    sequences never reach the terminal raw.
    """
    text = json.dumps(data, ensure_ascii=False)
    typer.echo(_RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def stdout_console() -> Console:
    """Return a rich console on the current stdout (looked up per call, so tests capture it)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    """Return a rich console on the current stderr, for progress bars and notes."""
    return Console(file=sys.stderr, highlight=False)
