"""``threadkeep import PATH --format F``: recorded transcripts become chats.

The format names an importer of ``threadkeep._importers.IMPORTERS``, loaded only when asked
for. Importing the same file again changes nothing (the importers' keys are deterministic).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._importers import IMPORTERS, Importer, ImportReport, resolve_importer
from ._app import CliError, JsonOption, UrlOption, opened_store, print_json, run, stderr_console

__all__ = ["import_file", "register"]

DEFAULT_IMPORT_USER = "importer"
"""Owner of imported chats when ``--user`` is not given."""


async def _import(path: Path, importer: Importer, user_id: str, url: str | None) -> ImportReport:
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
                progress.update(task, completed=done, total=total)

            return await importer(store, path, user_id=user_id, progress=advance)


def import_file(
    path: Annotated[Path, typer.Argument(help="The transcript file.", show_default=False)],
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
) -> None:
    """Import a transcript file: one chat per record, one message per entry.

    Importing the same file again changes nothing. The last line reports chats, messages
    and tool calls, created versus already present.
    """
    importer = resolve_importer(format_name)
    if not path.is_file():  # checked before the store opens: a typo creates no database
        raise CliError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
    report = run(_import(path, importer, user, url))
    if as_json:
        print_json(report.as_dict())
    else:
        typer.echo(f"imported {path.name}: {report.summary()}")


def register(app: typer.Typer) -> None:
    """Add ``import`` to ``app``."""
    app.command("import")(import_file)
