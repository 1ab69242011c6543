"""The typer application, the options commands share, and how a command reaches its store.

A command module (listed in ``threadkeep.cli.COMMAND_MODULES``) defines ``register(app)``
and uses what is here: the shared options (``UrlOption``, ``LimitOption``, ``CursorOption``,
``JsonOption``, ``UserOption``), :func:`opened_store` to open the store a ``--url`` names,
:func:`run` to drive a coroutine, and :func:`print_json`. It never handles errors itself:
:class:`OneLineErrors` turns a ``ThreadkeepError``, a :class:`CliError` or a usage error into
one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from typer.core import TyperGroup

from .._errors import ThreadkeepError
from .._registry import open_store
from .._settings import load_settings
from .._store import Store

__all__ = [
    "EXIT_ERROR",
    "EXIT_USAGE",
    "CliError",
    "CursorOption",
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
"""Exit status when the command failed (a ``ThreadkeepError`` or a ``CliError``)."""

EXIT_USAGE = 2
"""Exit status for bad arguments (click's convention)."""

_EXIT_INTERRUPTED = 130
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
    """A failure the command line reports as one line (exit status 1), without a traceback."""


def error_line(exc: BaseException) -> str:
    """Return an exception's message as one line (whitespace runs collapsed)."""
    text = exc.format_message() if isinstance(exc, typer.TyperException) else str(exc)
    return " ".join(text.split()) or type(exc).__name__


class OneLineErrors(TyperGroup):
    """The root command group: every expected failure becomes ONE line on stderr.

    ``ThreadkeepError`` and :class:`CliError` exit with status 1, usage errors (bad
    options, a malformed argument) with 2, Ctrl-C with 130. Anything else is a bug and keeps
    its traceback.
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
            code = _exit_status(exc)
            hint = _usage_hint(exc) if code == EXIT_USAGE else ""
            typer.echo(f"{_PROG}: error: {error_line(exc)}{hint}", err=True)
            sys.exit(code)
        if not standalone_mode:
            return result
        # Outside standalone mode click returns the status of an explicit Exit (or None).
        sys.exit(result if isinstance(result, int) else 0)


def _exit_status(exc: BaseException) -> int:
    if isinstance(exc, typer.Abort):
        return _EXIT_INTERRUPTED
    if isinstance(exc, typer.TyperException):
        return EXIT_USAGE if exc.exit_code == EXIT_USAGE else exc.exit_code or EXIT_ERROR
    return EXIT_ERROR


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
        add_completion=False,
        no_args_is_help=False,
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

    Precedence (``threadkeep.load_settings``, SPEC section 4): ``url`` (the ``--url``
    option), else ``THREADKEEP_URL``, else the settings file, else the embedded SQLite file.

    Raises:
        CliError: If the settings file cannot be read or does not validate.
    """
    try:
        return load_settings(url=url).url
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "settings"
        raise CliError(f"invalid settings ({where}): {first['msg']}") from exc
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the settings file: {exc}") from exc


@asynccontextmanager
async def opened_store(url: str | None) -> AsyncIterator[Store]:
    """Open the store ``url`` names (see :func:`resolve_url`) and close it afterwards.

    Raises:
        UnknownDriver: If no installed driver serves the URL's scheme.
        BackendUnavailable: If the backend cannot be reached.
        CliError: If the settings are unreadable.
    """
    async with open_store(resolve_url(url)) as store:
        yield store


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on a fresh event loop and return its result."""
    return asyncio.run(coroutine)


def print_json(data: Any) -> None:
    """Print ``data`` as one line of JSON on stdout (non-ASCII text kept as is)."""
    typer.echo(json.dumps(data, ensure_ascii=False))


def stdout_console() -> Console:
    """Return a rich console on the current stdout (looked up per call, so tests capture it)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    """Return a rich console on the current stderr, for progress bars and notes."""
    return Console(file=sys.stderr, highlight=False)
