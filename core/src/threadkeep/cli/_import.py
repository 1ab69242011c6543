"""``threadkeep import PATH --format F``: recorded transcripts become chats.

The format names an importer of ``threadkeep._importers.IMPORTERS``, loaded only when asked
for. Importing the same file again changes nothing (the importers' keys are deterministic).
Every record is read and checked before anything is written; Ctrl-C while writing says
how much was committed (re-running the command finishes the import).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._importers import IMPORTERS, UNITS, Importer, ImportReport, resolve_importer
from ._app import (
    EXIT_USAGE,
    CliError,
    Interrupted,
    JsonOption,
    UrlOption,
    opened_store,
    print_json,
    run,
    stderr_console,
)

__all__ = ["import_file", "register"]

DEFAULT_IMPORT_USER = "importer"
"""Owner of imported chats when ``--user`` is not given."""

_DIRECTORY_FORMATS = frozenset({"agui", "claude-code", "swe-agent", "openhands", "auto"})
"""Formats whose importer takes a directory of files as well as one file."""


class _Done:
    """How far the writing got: ``total`` is ``None`` until everything was read and checked."""

    done: int = 0
    total: int | None = None


async def _import(
    path: Path,
    importer: Importer,
    user_id: str,
    url: str | None,
    state: _Done,
    *,
    options: dict[str, Any] | None = None,
) -> ImportReport:
    console = stderr_console()
    columns = (
        TextColumn("[bold]importing[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        TimeElapsedColumn(),
    )
    async with opened_store(url) as store:
        # A progress bar only on a terminal: piped stderr stays free for the error line.
        with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
            task = progress.add_task(path.name, total=None)

            def advance(done: int, total: int) -> None:
                state.done, state.total = done, total
                progress.update(task, completed=done, total=total)

            extra = options or {}
            return await importer(store, path, user_id=user_id, progress=advance, **extra)


def import_file(
    path: Annotated[
        Path,
        typer.Argument(
            help="The transcript file (for every format but openai, also a directory).",
            show_default=False,
        ),
    ],
    format_name: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help=f"Transcript format: {', '.join(sorted(IMPORTERS))}.",
            show_default=False,
        ),
    ],
    user: Annotated[
        str, typer.Option("--user", help="User id that owns the imported chats.")
    ] = DEFAULT_IMPORT_USER,
    url: UrlOption = None,
    as_json: JsonOption = False,
    *,
    thread_scope: Annotated[
        str | None,
        typer.Option(
            "--thread-scope",
            help="agui: 'recording' (a chat per recording and thread id, the default) or "
            "'thread' (recordings of one thread id share its chat).",
            show_default=False,
        ),
    ] = None,
    keep_events: Annotated[
        bool,
        typer.Option(
            "--keep-events",
            help="agui: keep RAW, CUSTOM and other events without message content whole "
            "in each run's metadata (they are counted either way).",
        ),
    ] = False,
) -> None:
    """Import recorded conversations: OpenAI, AG-UI, Claude Code, SWE-agent, OpenHands.

    See docs/importers.md for each format's mapping; --format auto tells them apart.

    Every record is checked before anything is written: a malformed record writes nothing
    and the error names the file and the record (and line). Importing the same file again
    changes nothing. The last line reports chats, messages and tool calls, created versus
    already present.
    """
    importer = resolve_importer(format_name)
    _check_path(path, format_name)  # before the store opens: a typo creates no database
    options = _agui_options(format_name, thread_scope, keep_events)
    state = _Done()
    try:
        report = run(_import(path, importer, user, url, state, options=options))
    except Interrupted as exc:
        raise Interrupted(_interrupted(path, format_name, state)) from exc
    if as_json:
        print_json(report.as_dict())
    else:
        typer.echo(f"imported {path.name}: {report.summary()}")


def _agui_options(format_name: str, thread_scope: str | None, keep_events: bool) -> dict[str, Any]:
    """Return the agui importer's options; refuse them for another format."""
    options: dict[str, Any] = {}
    if thread_scope is not None:
        if thread_scope not in ("recording", "thread"):
            msg = f"--thread-scope is 'recording' or 'thread', not {thread_scope!r}"
            raise CliError(msg, exit_code=EXIT_USAGE)
        options["thread_scope"] = thread_scope
    if keep_events:
        options["keep_events"] = True
    if options and format_name != "agui":
        raise CliError(
            "--thread-scope and --keep-events are for --format agui", exit_code=EXIT_USAGE
        )
    return options


def _check_path(path: Path, format_name: str) -> None:
    if not path.exists():
        raise CliError(f"{path}: no such file or directory", exit_code=EXIT_USAGE)
    if path.is_dir() and format_name not in _DIRECTORY_FORMATS:
        msg = f"{path} is a directory; --format {format_name} imports one file at a time"
        raise CliError(msg, exit_code=EXIT_USAGE)
    if not path.is_dir() and not path.is_file():
        raise CliError(f"{path} is not a regular file", exit_code=EXIT_USAGE)


def _interrupted(path: Path, format_name: str, state: _Done) -> str:
    if state.total is None:
        return f"interrupted while reading {path.name}; nothing was written"
    unit = UNITS.get(format_name, "records")
    text = f"interrupted: {state.done:,} of {state.total:,} {unit} of {path.name} are imported"
    if state.done < state.total:
        text += " (the next one may be partly stored)"
    return text + "; run the same command again to finish: what is stored already is skipped"


def register(app: typer.Typer) -> None:
    """Add ``import`` to ``app``."""
    app.command("import")(import_file)
