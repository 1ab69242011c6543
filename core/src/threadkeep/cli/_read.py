"""Reading commands: ``threadkeep chats``, ``threadkeep history CHAT_ID``, ``threadkeep stats``.

``chats`` and ``history`` show one page: the first page is the
newest, items run oldest to newest, and ``--cursor`` takes the ``next_cursor`` a previous
page printed to walk to older items. ``--json`` prints
``{"items": [...], "next_cursor": ..., "has_more": ...}`` with items as the models' JSON.
"""

from __future__ import annotations

import contextlib
import shlex
from typing import Annotated, Any
from uuid import UUID

import typer
from rich.table import Table
from rich.text import Text

from .._archive import ArchiveRef
from .._errors import ArchiveError, ArchiveIntegrityError, ChatNotFound
from .._models import Chat, ChatStatus, MessageKind
from .._paging import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, ChatFilter, MessageFilter, Page
from .._registry import mask_url
from .._store import Store
from ._app import (
    CursorOption,
    JsonOption,
    LimitOption,
    UrlOption,
    UserOption,
    opened_store,
    print_json,
    resolve_url,
    run,
    stdout_console,
)
from ._render import chats_table, message_panel

__all__ = [
    "chat_or_none",
    "chats",
    "count_store",
    "damaged_archive",
    "history",
    "missing_chat",
    "more_hint",
    "register",
    "stats",
]

_ONLY_MESSAGES = MessageFilter(kinds=frozenset({MessageKind.MESSAGE}))


def _page_json(page: Page[Any]) -> dict[str, Any]:
    return {
        "items": [item.model_dump(mode="json") for item in page.items],
        "next_cursor": page.next_cursor,
        "has_more": page.has_more,
    }


def more_hint(command: list[str], page: Page[Any], *, url: str | None, limit: int) -> Text:
    """Return the line under a page: the command for the next (older) page, ready to paste.

    Args:
        command: The command's words after ``threadkeep``, with the options its cursor is
            bound to (``["chats", "--user", "u"]``).
        page: The page just shown.
        url: The ``--url`` given, or ``None`` (then the resolved URL is shown).
        limit: The ``--limit`` used, in items.

    Returns:
        ``older: threadkeep ... --url URL --limit N --cursor C`` (shell-quoted; a password in
        the URL shown as ``***``, with a note), or ``(no older items)`` on the last page.

    Raises:
        InvalidArgument: If the settings (for the resolved URL) are invalid.
    """
    if not page.has_more or page.next_cursor is None:
        return Text("(no older items)", style="dim")
    store_url = resolve_url(url)
    shown = mask_url(store_url)
    words = ["threadkeep", *command, "--url", shown, "--limit", str(limit)]
    line = f"older: {shlex.join([*words, '--cursor', page.next_cursor])}"
    if shown != store_url:
        line += "  (password hidden: put it back in place of ***)"
    return Text(line, style="dim")


async def chat_or_none(store: Store, chat_id: UUID) -> Chat | None:
    """Return the chat, soft-deleted or not (never rehydrated), or ``None`` if there is none.

    An operator's read (``Store.get_chat(include_deleted=True)``) for the hints below.
    """
    try:
        return await store.get_chat(chat_id, include_deleted=True)
    except ChatNotFound:
        return None


async def missing_chat(store: Store, chat_id: UUID, exc: ChatNotFound) -> ChatNotFound:
    """Return ``exc`` with what to do: restore a soft-deleted chat; a purged one is gone.

    Args:
        store: The open store that raised ``exc``.
        chat_id: The chat asked for.
        exc: The ``ChatNotFound`` the store raised.

    Returns:
        A ``ChatNotFound`` (chained to ``exc``) whose message says whether the chat is
        soft-deleted (and the command that restores it) or unknown here (or purged).
    """
    chat = await chat_or_none(store, chat_id)  # deleted chats included
    if chat is not None and chat.deleted_at is not None:
        when = chat.deleted_at.isoformat(timespec="seconds")
        msg = (
            f"chat {chat_id} was deleted at {when}; delete is soft (the chat and its "
            f"messages are kept, hidden, until a purge removes them for good): bring it "
            f"back with: threadkeep restore {chat_id}"
        )
    else:
        msg = (
            f"no chat {chat_id} in this store (never created here, or purged: a purge "
            "removes deleted chats for good); list chats with: threadkeep chats (add "
            "--deleted for deleted ones)"
        )
    return ChatNotFound(msg)


async def damaged_archive(
    store: Store, chat_id: UUID, exc: ArchiveIntegrityError
) -> ArchiveIntegrityError:
    """Return ``exc`` naming the chat, its archive object and what to do about it.

    Args:
        store: The open store that raised ``exc``.
        chat_id: The archived chat whose bundle could not be read back.
        exc: The ``ArchiveIntegrityError`` reading the bundle raised.

    Returns:
        An ``ArchiveIntegrityError`` whose message names the chat and the object, says the
        chat stays archived and unreadable, and that the object must be restored from a
        backup (its SHA-256 is checked) before reading the chat again.
    """
    chat = await chat_or_none(store, chat_id)  # get_chat never rehydrates
    where = "its archive bundle"
    if chat is not None and chat.archive_ref:
        with contextlib.suppress(ArchiveError):  # unparsable: the chat is named all the same
            where += f" {ArchiveRef.parse(chat.archive_ref).object_url}"
    msg = (
        f"chat {chat_id}: {where} cannot be read back ({exc}); the chat stays archived "
        "and its messages unreadable: restore that object from a backup (the original "
        "bytes: its SHA-256 is checked), then run the command again"
    )
    return ArchiveIntegrityError(msg)


def chats(
    *,
    user: UserOption = None,
    deleted: Annotated[
        bool,
        typer.Option(
            "--deleted", help="List soft-deleted chats instead (threadkeep restore undeletes)."
        ),
    ] = False,
    limit: LimitOption = DEFAULT_PAGE_LIMIT,
    cursor: CursorOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List chats, newest first, one page at a time, with their status."""
    chat_filter = ChatFilter(user_id=user, deleted="only" if deleted else "exclude")

    async def read() -> Page[Any]:
        async with opened_store(url) as store:
            return await store.list_chats(chat_filter, limit=limit, cursor=cursor)

    page = run(read())
    if as_json:
        print_json(_page_json(page))
        return
    console = stdout_console()
    shown = chats_table(page.items, console.width)
    # Two lines a chat: soft wrap, so rich never folds an id (the terminal wraps the line).
    console.print(shown, soft_wrap=not isinstance(shown, Table))
    command = ["chats", *(["--user", user] if user is not None else [])]
    command += ["--deleted"] if deleted else []
    # soft_wrap: the command must stay copyable
    console.print(more_hint(command, page, url=url, limit=limit), soft_wrap=True)


def history(
    chat_id: Annotated[UUID, typer.Argument(help="The chat's id.", show_default=False)],
    limit: LimitOption = DEFAULT_PAGE_LIMIT,
    cursor: CursorOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one page of a chat's messages (the newest first; --cursor walks older)."""

    async def read() -> Page[Any]:
        async with opened_store(url) as store:
            try:
                return await store.list_messages(chat_id, limit=limit, cursor=cursor)
            except ChatNotFound as exc:
                raise await missing_chat(store, chat_id, exc) from exc
            except ArchiveIntegrityError as exc:
                raise await damaged_archive(store, chat_id, exc) from exc

    page = run(read())
    if as_json:
        print_json(_page_json(page))
        return
    console = stdout_console()
    for message in page.items:
        console.print(message_panel(message))
    hint = more_hint(["history", str(chat_id)], page, url=url, limit=limit)
    console.print(hint, soft_wrap=True)  # soft_wrap: the command must stay copyable


async def count_store(store: Store, chat_filter: ChatFilter | None = None) -> dict[str, int]:
    """Count chats, messages (boundary markers left out) and tool calls, page by page.

    Reads pages of 200, never a whole table or chat at once, so memory stays flat. Archived
    chats are counted as chats but their messages are not read: reading them would bring
    them back from the archive.

    Returns:
        ``{"chats": N, "messages": N, "tool_calls": N}``, plus ``"archived_chats": N`` when
        some chats are archived.
    """
    counts = {"chats": 0, "messages": 0, "tool_calls": 0}
    archived = 0
    chat_cursor: str | None = None
    while True:
        chat_page = await store.list_chats(chat_filter, limit=MAX_PAGE_LIMIT, cursor=chat_cursor)
        for chat in chat_page.items:
            counts["chats"] += 1
            if chat.status is ChatStatus.ARCHIVED:
                archived += 1
                continue
            cursor: str | None = None
            while True:
                page = await store.list_messages(
                    chat.chat_id, limit=MAX_PAGE_LIMIT, cursor=cursor, message_filter=_ONLY_MESSAGES
                )
                counts["messages"] += len(page.items)
                counts["tool_calls"] += sum(len(m.tool_calls) for m in page.items)
                if not page.has_more:
                    break
                cursor = page.next_cursor
        if not chat_page.has_more:
            return counts | ({"archived_chats": archived} if archived else {})
        chat_cursor = chat_page.next_cursor


def stats(
    user: UserOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Count live chats, their messages and tool calls (walks every page).

    Archived chats are counted, their messages are not (reading would restore them).
    """

    async def read() -> dict[str, int]:
        async with opened_store(url) as store:
            return await count_store(store, ChatFilter(user_id=user))

    counts = run(read())
    if as_json:
        print_json(counts)
        return
    line = (
        f"{counts['chats']:,} chats, {counts['messages']:,} messages, "
        f"{counts['tool_calls']:,} tool calls"
    )
    if counts.get("archived_chats"):
        line += f" ({counts['archived_chats']:,} archived chats: their messages not counted)"
    typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add ``chats``, ``history`` and ``stats`` to ``app``."""
    app.command("chats")(chats)
    app.command("history")(history)
    app.command("stats")(stats)
