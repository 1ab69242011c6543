"""Archive commands: ``threadkeep archive --older-than 30d``, ``threadkeep restore CHAT_ID``.

``archive`` moves every live, active chat idle longer than ``--older-than`` to the cold
archive (``--archive-url``, else ``THREADKEEP_ARCHIVE_URL``, else the settings file's
``archive_url``), with a progress bar on stderr. Reading an archived chat later needs no
flag: its ``archive_ref`` names the bundle (docs/archive.md).
"""

from __future__ import annotations

import errno
import re
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._archive import ArchiveResult, open_archiver
from .._errors import ArchiveIntegrityError, BackendUnavailable, ChatNotFound
from .._models import Chat, ChatStatus
from .._settings import load_settings
from ._app import (
    EXIT_USAGE,
    CliError,
    JsonOption,
    UrlOption,
    opened_store,
    print_json,
    run,
    stderr_console,
    stdout_console,
)
from ._read import chat_or_none, damaged_archive, missing_chat

__all__ = ["archive", "parse_duration", "register", "restore"]

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")

ArchiveUrlOption = Annotated[
    str | None,
    typer.Option(
        "--archive-url",
        help=(
            "Archive URL, file:///path or s3://bucket/prefix. Default: "
            "$THREADKEEP_ARCHIVE_URL, then archive_url in the settings file."
        ),
        show_default=False,
    ),
]


def parse_duration(text: str) -> timedelta:
    """Parse ``30d``, ``12h``, ``90m``, ``45s`` or ``2w`` into a ``timedelta``.

    Raises:
        typer.BadParameter: If ``text`` is not a number followed by one of s, m, h, d, w,
            or reaches back before the year 1.
    """
    match = _DURATION.match(text)
    if match is None:
        msg = f"{text!r} is not a duration like 30d, 12h, 90m, 45s or 2w"
        raise typer.BadParameter(msg)
    try:
        duration = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        datetime.now(UTC) - duration  # the cut-off must be a representable time
    except OverflowError as exc:
        longest = (datetime.now(UTC) - datetime.min.replace(tzinfo=UTC)).days
        msg = f"{text!r} is too long a duration; at most {longest:,}d (back to year 1)"
        raise typer.BadParameter(msg) from exc
    return duration


def archive(
    older_than: Annotated[
        str,
        typer.Option("--older-than", help="Archive chats idle longer than this (30d, 12h, 0d)."),
    ],
    archive_url: ArchiveUrlOption = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Archive at most this many chats.", show_default=False),
    ] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move idle chats to the cold archive (one verified bundle per chat)."""
    idle = parse_duration(older_than)
    if not (archive_url or load_settings().archive_url):  # before the store opens
        msg = (
            "no archive URL: give --archive-url file:///absolute/folder or "
            "s3://bucket/prefix, or set THREADKEEP_ARCHIVE_URL (or archive_url in the "
            "settings file)"
        )
        raise CliError(msg, exit_code=EXIT_USAGE)
    results = run(_archive_idle(url, archive_url, idle, limit))
    if as_json:
        print_json({"archived": [r.model_dump(mode="json") for r in results]})
        return
    messages = sum(r.messages for r in results)
    size = sum(r.size for r in results)
    stdout_console().print(
        f"archived {len(results)} chat(s): {messages} message(s), {size} bytes compressed"
    )


async def _archive_idle(
    url: str | None, archive_url: str | None, idle: timedelta, limit: int | None
) -> list[ArchiveResult]:
    async with opened_store(url) as store, AsyncExitStack() as stack:
        try:
            archiver = await stack.enter_async_context(open_archiver(store, archive_url))
        except BackendUnavailable as exc:
            usage = _unusable_archive_root(exc)
            if usage is None:
                raise
            raise usage from exc
        total = await archiver.count_idle(idle)
        if limit is not None:
            total = min(total, limit)
        console = stderr_console()
        columns: list[Any] = [
            TextColumn("archiving"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        ]
        with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
            task = progress.add_task("archive", total=total)
            return await archiver.archive_idle(
                idle, limit=limit, progress=lambda _: progress.advance(task)
            )


_CONFIGURATION_ERRNOS = frozenset(
    {errno.ENOENT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR}
)
"""File-system refusals that do not pass with time: the archive URL has to change."""


def _unusable_archive_root(exc: BackendUnavailable) -> CliError | None:
    """Return a usage error when opening a ``file://`` archive failed for good, else ``None``.

    The file archive maps a directory it cannot create (``file:///proc/x``, a read-only
    file system) to ``BackendUnavailable`` ("retry later"); retrying does not help, the
    archive URL is wrong.
    """
    cause = exc.__cause__
    if not isinstance(cause, OSError) or cause.errno not in _CONFIGURATION_ERRNOS:
        return None
    where = cause.filename if cause.filename is not None else "the archive root"
    msg = (
        f"the archive directory {where} cannot be created or written: {cause.strerror}; "
        "this is a configuration error, not a passing fault: give an archive URL of a "
        "directory that exists or can be created (--archive-url, THREADKEEP_ARCHIVE_URL or "
        "archive_url in the settings file)"
    )
    return CliError(msg, exit_code=EXIT_USAGE)


def restore(
    chat_id: Annotated[UUID, typer.Argument(help="The chat's id.", show_default=False)],
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Undelete a chat and bring it back from the archive into the hot store.

    Delete is soft: a deleted chat keeps its messages, hidden, until a purge removes it
    for good; after a purge there is nothing to restore. ``threadkeep chats --deleted``
    lists the chats this command can bring back.
    """

    async def go() -> tuple[Chat | None, Chat]:
        async with opened_store(url) as store:
            before = await chat_or_none(store, chat_id)  # deleted included
            try:
                return before, await store.restore_chat(chat_id)
            except ChatNotFound as exc:
                raise await missing_chat(store, chat_id, exc) from exc
            except ArchiveIntegrityError as exc:
                raise await damaged_archive(store, chat_id, exc) from exc

    before, chat = run(go())
    if as_json:
        print_json(chat.model_dump(mode="json"))
        return
    stdout_console().print(_restored(before, chat))


def _restored(before: Chat | None, chat: Chat) -> str:
    was = []
    if before is not None and before.deleted_at is not None:
        was.append("deleted")
    if before is not None and before.status is ChatStatus.ARCHIVED:
        was.append("archived")
    if not was:
        return f"chat {chat.chat_id} is already {chat.status.value}; nothing to restore"
    return f"restored chat {chat.chat_id} (was {' and '.join(was)}): now {chat.status.value}"


def register(app: typer.Typer) -> None:
    """Add ``archive`` and ``restore`` to ``app``."""
    app.command("archive")(archive)
    app.command("restore")(restore)
