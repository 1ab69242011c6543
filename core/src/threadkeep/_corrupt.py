"""Damaged stored rows: detecting them, naming them, and optionally reading past them.

A row changed outside threadkeep (a body that is not JSON or not an object, a timestamp
that does not parse, a document field of the wrong BSON type) must not make a whole chat
unreadable with a raw ``JSONDecodeError`` or ``TypeError`` (issue 12). Every rebuild of a
stored row goes through :func:`rebuilt`, which turns any decoding failure into
:class:`~threadkeep.CorruptRecord` naming the chat, the seq and the column.

Rule: by default a read that meets a damaged row
raises ``CorruptRecord``. A store opened with ``corrupt_records="skip"`` reads pages past
damaged rows instead: the page leaves them out of ``items`` and lists them in
``Page.corrupt`` (its ``has_more`` and ``next_cursor`` still count them, so a walk makes
progress however many rows are damaged). Single-record reads (``get_message``...) raise
in both modes: there is nothing to return.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, ValidationError

from ._errors import CorruptRecord, InvalidArgument

__all__ = [
    "CorruptRecordsPolicy",
    "CorruptRow",
    "Unreadable",
    "check_policy",
    "collecting",
    "rebuilt",
    "rebuilt_each",
    "skip_damaged",
    "window",
]

T = TypeVar("T")
S = TypeVar("S")

CorruptRecordsPolicy = Literal["raise", "skip"]
"""What a page read does on a damaged row: raise ``CorruptRecord`` or leave it out."""

_DECODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, RecursionError)
"""What decoding a damaged row raises (``JSONDecodeError`` and ``ValidationError`` are
``ValueError`` subclasses; ``dict(42)`` is a ``TypeError``; a missing field a
``KeyError``)."""

_collector: ContextVar[list[CorruptRecord] | None] = ContextVar(
    "threadkeep_corrupt_rows", default=None
)


class Unreadable:
    """A column value a driver could not decode; the rebuild reports it as corrupt.

    Drivers put one in place of a column they failed to convert (an unparsable SQLite
    timestamp, a MongoDB ``created_us`` that is a string), so the failure is reported by
    :func:`rebuilt` with the row's chat, seq and column rather than escaping raw.

    Attributes:
        raw: The stored value as the backend returned it.
        reason: Why it does not decode.
    """

    __slots__ = ("raw", "reason")

    def __init__(self, raw: object, reason: str) -> None:
        self.raw = raw
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unreadable({self.raw!r})"


class CorruptRow(BaseModel):
    """A damaged row a ``corrupt_records="skip"`` page left out (see ``CorruptRecord``).

    Attributes:
        kind: ``"message"``, ``"chat"``, ``"step"`` or ``"run"``.
        chat_id: Its chat, when readable.
        seq: Its seq, when readable.
        column: The column that does not read (``"body"``, ``"created_at"``...).
        detail: What is wrong with it.
    """

    kind: str
    chat_id: UUID | None = None
    seq: int | None = None
    column: str
    detail: str

    @classmethod
    def of(cls, error: CorruptRecord) -> CorruptRow:
        """Return the row an error names (ids and seqs kept only when they are well-formed)."""
        chat_id = error.chat_id if isinstance(error.chat_id, UUID) else None
        seq = error.seq if type(error.seq) is int else None
        return cls(
            kind=error.kind, chat_id=chat_id, seq=seq, column=error.column, detail=error.detail
        )


def check_policy(value: object) -> CorruptRecordsPolicy:
    """Return ``value`` if it is a valid ``corrupt_records`` option.

    Raises:
        InvalidArgument: Unless it is ``"raise"`` or ``"skip"``.
    """
    if value in ("raise", "skip"):
        return value
    raise InvalidArgument(f"corrupt_records must be 'raise' or 'skip', not {value!r}")


def _unreadable_column(columns: dict[str, Any]) -> tuple[str, str] | None:
    for name, value in columns.items():
        if isinstance(value, Unreadable):
            return name, value.reason
        if name.endswith("_at") and value is not None and not isinstance(value, datetime):
            return name, f"is not a timestamp ({type(value).__name__} {value!r:.60})"
        if name in ("seq", "revision") and not (value is None or isinstance(value, int)):
            return name, f"is not an integer ({value!r:.60})"
        if name == "chat_id" and not (isinstance(value, UUID) or _is_uuid_text(value)):
            return name, f"is not a UUID ({value!r:.60})"
    return None


def _is_uuid_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        UUID(value)
    except ValueError:
        return False
    return True


def _detail(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "is nested too deeply to decode"
    if isinstance(exc, json.JSONDecodeError):
        return f"is not JSON ({exc})"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        return f"does not validate ({where}: {first['msg']}, {exc.error_count()} error(s))"
    if isinstance(exc, InvalidArgument) and isinstance(exc.__cause__, ValidationError):
        return _detail(exc.__cause__)
    return f"does not decode ({type(exc).__name__}: {exc})"


def rebuilt(
    kind: str,
    columns: dict[str, Any],
    build: Callable[[], T],
    *,
    chat_id: object = None,
    seq: object = None,
) -> T:
    """Return ``build()``, or raise ``CorruptRecord`` if the row does not decode.

    Args:
        kind: The record kind, for the error (``"message"``...).
        columns: The row's column values; an :class:`Unreadable`, a non-datetime in a
            ``*_at`` column, a non-integer ``seq``/``revision`` or a non-UUID ``chat_id``
            is reported before the body is decoded.
        build: Decodes the body and builds the record.
        chat_id: The row's chat for the error, if not in ``columns``.
        seq: The row's seq for the error, if not in ``columns``.

    Raises:
        CorruptRecord: Naming the chat, seq and column that does not decode.
    """
    chat_id = columns.get("chat_id", chat_id)
    seq = columns.get("seq", seq)
    bad = _unreadable_column(columns)
    if bad is not None:
        raise CorruptRecord(kind, chat_id=chat_id, seq=seq, column=bad[0], detail=bad[1])
    try:
        return build()
    except _DECODE_ERRORS as exc:
        error = CorruptRecord(kind, chat_id=chat_id, seq=seq, column="body", detail=_detail(exc))
        raise error from exc


def rebuilt_each(items: Iterable[S], build: Callable[[S], T]) -> list[T]:
    """Return ``[build(item) for item in items]``, leaving damaged rows out when skipping.

    Drivers rebuild the rows of a page read (messages, chats) with this. Inside a page
    read of a ``corrupt_records="skip"`` store, a ``CorruptRecord`` from ``build`` is
    recorded for the page's ``corrupt`` list and the row left out; otherwise it propagates.

    Raises:
        CorruptRecord: If a row is damaged and the read is not skipping.
    """
    out: list[T] = []
    for item in items:
        record = skip_damaged(build, item)
        if record is not None:
            out.append(record)
    return out


def skip_damaged(build: Callable[[S], T], item: S) -> T | None:
    """Return ``build(item)``, or ``None`` for a damaged row a skipping page read leaves out.

    For drivers that rebuild rows one at a time while scanning (filters, limits): a
    ``None`` means "not a row of the page" (the page's ``corrupt`` list reports it).

    Raises:
        CorruptRecord: If the row is damaged and the read is not skipping.
    """
    try:
        return build(item)
    except CorruptRecord as exc:
        skipped = _collector.get()
        if skipped is None:
            raise
        skipped.append(exc)
        return None


@contextlib.contextmanager
def collecting(policy: CorruptRecordsPolicy) -> Iterator[list[CorruptRecord]]:
    """Collect the damaged rows a page read leaves out (nothing is collected on "raise").

    Yields:
        The list :func:`rebuilt_each` appends to while the block runs (under ``"skip"``).
    """
    skipped: list[CorruptRecord] = []
    token = _collector.set(skipped if policy == "skip" else None)
    try:
        yield skipped
    finally:
        _collector.reset(token)


def window(
    rows: list[T], skipped: list[CorruptRecord], size: int, seq_of: Callable[[T], int | None]
) -> tuple[list[T], list[CorruptRow], bool, int | None]:
    """Cut one page from a keyset read that may have left damaged rows out.

    Args:
        rows: What the driver returned, newest first (up to ``size + 1`` rows asked).
        skipped: The damaged rows left out of ``rows`` by :func:`rebuilt_each`.
        size: The page size.
        seq_of: The keyset position of a row.

    Returns:
        ``(items, corrupt, has_more, last_seq)``: the page's rows (newest first), the
        damaged rows inside the page, whether anything follows, and the position the next
        cursor starts before (the oldest row in the page, damaged or not).

    The driver's rows keep the order it returned them in: only the damaged rows are
    placed among them by seq. A driver that returns a page out of seq order is wrong,
    and the contract suite must see it (sorting here once hid it).
    """
    if not skipped:  # the common case, without a tuple per row
        page = rows[:size]
        return page, [], len(rows) > size, (seq_of(page[-1]) or 0) if page else None
    entries = _merged(rows, skipped, seq_of)
    kept = entries[:size]
    items = [row for _, row, _ in kept if row is not None]
    corrupt = [CorruptRow.of(error) for _, _, error in kept if error is not None]
    last = next((seq for seq, _, _ in reversed(kept) if seq >= 0), None)
    return items, corrupt, len(entries) > size, last


def _merged(
    rows: list[T], skipped: list[CorruptRecord], seq_of: Callable[[T], int | None]
) -> list[tuple[int, T | None, CorruptRecord | None]]:
    """Place each damaged row before the first driver row with a lower seq.

    A damaged row whose seq is unknown (the seq column itself is damaged, such as text in
    SQLite's integer column) goes first: the driver returned it in this read, and a page
    cut before it would lose it for good, since the next cursor starts below the page.

    Returns:
        ``(seq, row, None)`` for the driver's rows, in the driver's order, and ``(seq, None,
        error)`` for the damaged ones (seq ``-1`` when it is unknown).
    """
    damaged = sorted(
        ((e.seq if type(e.seq) is int else _UNKNOWN_SEQ, e) for e in skipped),
        key=lambda entry: entry[0],
        reverse=True,
    )
    merged: list[tuple[int, T | None, CorruptRecord | None]] = []
    index = 0
    for row in rows:
        seq = seq_of(row) or 0
        while index < len(damaged) and damaged[index][0] > seq:
            merged.append((_known(damaged[index][0]), None, damaged[index][1]))
            index += 1
        merged.append((seq, row, None))
    merged += [(_known(seq), None, error) for seq, error in damaged[index:]]
    return merged


_UNKNOWN_SEQ = 2**63
"""Where a damaged row of unknown seq sorts: above every seq (first in a page)."""


def _known(seq: int) -> int:
    return -1 if seq == _UNKNOWN_SEQ else seq
