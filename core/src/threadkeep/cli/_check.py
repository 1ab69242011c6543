"""``threadkeep check``: list every damaged stored row, changing nothing (issue 12).

The store is opened with ``corrupt_records="skip"``, so every page read goes past damaged
rows and reports them (``Page.corrupt``). The scan walks every chat (deleted ones included)
and the visible messages of each hot chat, one page at a time, then (on drivers with the
``steps`` capability) each hot chat's steps: a damaged step stops its ``scan_steps`` page
with ``CorruptRecord`` naming its seq, so the scan records it and goes on after it. Runs
have no scan in the public API and are not read. Archived chats are not
read (reading one would bring it back into hot storage); their bundles are checked by the
SHA-256 the archive keeps (``ArchiveIntegrityError`` on read).

Exit statuses: 0 nothing damaged; 1 damaged rows were found (each listed) or the scan
failed; 2 bad arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import typer

from .._corrupt import CorruptRow
from .._errors import CorruptRecord
from .._models import Chat, ChatStatus
from .._paging import MAX_PAGE_LIMIT, ChatFilter
from .._store import Store
from ._app import EXIT_ERROR, JsonOption, UrlOption, opened_store, print_json, run, stdout_console
from ._render import visible

__all__ = ["CheckReport", "check", "check_store", "register"]


@dataclass
class CheckReport:
    """What a scan found.

    Attributes:
        chats: Chats scanned (rows read, damaged ones included).
        messages: Messages read without damage, in the chats scanned.
        steps: Steps read without damage, in the chats scanned.
        archived: Archived chats whose messages were not read (they live in bundles).
        damaged: Every damaged row, chats first, then messages chat by chat.
    """

    chats: int = 0
    messages: int = 0
    steps: int = 0
    archived: int = 0
    damaged: list[CorruptRow] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Return the report as JSON data (``damaged`` as ``CorruptRow`` dumps)."""
        return {
            "chats": self.chats,
            "messages": self.messages,
            "steps": self.steps,
            "archived_not_read": self.archived,
            "damaged": [row.model_dump(mode="json") for row in self.damaged],
        }


async def _scan_messages(store: Store, chat: Chat, report: CheckReport) -> None:
    cursor = None
    while True:
        page = await store.list_messages(chat.chat_id, limit=MAX_PAGE_LIMIT, cursor=cursor)
        report.messages += len(page.items)
        report.damaged += page.corrupt
        if not page.has_more:
            return
        cursor = page.next_cursor


async def _scan_steps(store: Store, chat: Chat, report: CheckReport) -> None:
    """Scan a chat's steps, recording damaged ones in ``report``.

    A damaged step fails its whole ``scan_steps`` page, so that page is re-read one step at
    a time up to the damaged seq, which is recorded and stepped over.
    """
    after, limit, until = 0, MAX_PAGE_LIMIT, 0
    while True:
        try:
            steps = await store.scan_steps(chat.chat_id, after_seq=after, limit=limit)
        except CorruptRecord as exc:
            seq = exc.seq if type(exc.seq) is int else None
            if limit > 1 and seq is not None and seq > after + 1:
                limit, until = 1, seq  # the steps before it read fine: count them
                continue
            report.damaged.append(CorruptRow.of(exc))
            if seq is None or seq <= after:
                return  # no position to go on from: the rest of this chat's steps is unread
            after, limit = seq, MAX_PAGE_LIMIT
            continue
        report.steps += len(steps)
        if len(steps) < limit:
            return
        after = steps[-1].seq or after
        if after + 1 >= until:
            limit = MAX_PAGE_LIMIT


async def check_store(store: Store) -> CheckReport:
    """Scan ``store`` for damaged rows; the store must be open with ``corrupt_records="skip"``.

    Args:
        store: An open store whose ``corrupt_records`` is ``"skip"``.

    Returns:
        The report: counts and every damaged row found.

    Raises:
        ValueError: If the store does not skip damaged rows (a scan would stop at the first).
        BackendUnavailable: If the backend fails.
    """
    if store.corrupt_records != "skip":
        raise ValueError("check_store needs a store opened with corrupt_records='skip'")
    report = CheckReport()
    chats_filter = ChatFilter(deleted="include")
    hot: list[Chat] = []
    cursor = None
    while True:
        page = await store.list_chats(chats_filter, limit=MAX_PAGE_LIMIT, cursor=cursor)
        report.chats += len(page.items) + len(page.corrupt)
        report.damaged += page.corrupt
        for chat in page.items:
            if chat.status is ChatStatus.ARCHIVED:
                report.archived += 1
            elif chat.deleted_at is None:
                hot.append(chat)
        if not page.has_more:
            break
        cursor = page.next_cursor
    for chat in hot:
        await _scan_messages(store, chat, report)
    if store.capabilities.steps:
        for chat in hot:
            await _scan_steps(store, chat, report)
    return report


async def _check(url: str | None, as_json: bool) -> CheckReport:
    async with opened_store(url, corrupt_records="skip") as store:
        report = await check_store(store)
    if as_json:
        print_json(report.as_json())
        return report
    console = stdout_console()
    for row in report.damaged:
        console.print(
            visible(
                f"damaged {row.kind} chat={row.chat_id} seq={row.seq} column={row.column}: "
                f"{row.detail}"
            ),
            markup=False,
        )
    console.print(
        f"{report.chats} chats, {report.messages} messages and {report.steps} steps read, "
        f"{len(report.damaged)} damaged rows"
        + (f", {report.archived} archived chats not read" if report.archived else ""),
        markup=False,
    )
    return report


def check(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """List every damaged stored row (a body or timestamp changed outside threadkeep).

    Reads every chat, and the messages and steps of every hot chat; writes nothing.
    Exits 1 when anything is damaged, so scripts can alert on it.
    """
    report = run(_check(url, as_json))
    if report.damaged:
        raise typer.Exit(EXIT_ERROR)


def register(app: typer.Typer) -> None:
    """Add ``check`` to ``app``."""
    app.command("check")(check)
