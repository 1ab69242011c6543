"""SQLite: turning a statement's fetched rows into Python values a column at a time.

SQLAlchemy's result processors run once per value: on a 51-row page that is 204 Python
calls (the chat id as ``UUID`` text, three timestamps as text parsed by the ``When``
type). Here a column is converted at once: a column holding only text and ``NULL`` (every
column of a row the store wrote) is converted once per distinct text (the page's one
``chat_id``, a ``created_at`` equal to its ``updated_at``) and mapped back in C
(``map(dict.__getitem__, ...)``); other values go one by one through the same function.

The conversions are those of the column types, written out for the three types the
schema has processors for (``docs/performance.md``):

- ``Uuid`` (stored as 32 hex digits on SQLite): ``uuid.UUID(value)``, which is what its
  processor calls; a value that is not a UUID (a row damaged outside threadkeep) is an
  :class:`threadkeep.Unreadable`, reported as ``CorruptRecord`` by the rebuild, where the
  processor's ``ValueError`` escaped the read;
- ``When`` (timestamps, stored as naive UTC text): ``datetime.fromisoformat`` (SQLAlchemy
  2's SQLite ``DATETIME`` processor) of the text with ``+00:00`` appended, which gives
  the aware UTC value :func:`threadkeep.as_utc` would make of the naive one, in C (on
  CPython 3.11 ``datetime.replace(tzinfo=UTC)`` costs ten times the parse), so the model
  rebuild does not convert again; text with an offset of its own, text that does not
  parse, and values of other types go through the ``When`` processor and ``as_utc``, and
  what does not parse stays its :class:`threadkeep.Unreadable`;
- ``KeyText``: :func:`~threadkeep_sql._schema.unescape_key`.

Any other processor is used as SQLAlchemy gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, SafeUUID

import sqlalchemy as sa

from threadkeep import Unreadable, as_utc

from ._runner import RawStatement
from ._schema import KeyText, When, unescape_key

__all__ = ["RowConverter"]

Row = Sequence[Any]
Process = Callable[[Any], Any]
_TEXT_OR_NULL = frozenset({str, type(None)})
_parse = datetime.fromisoformat
_new = object.__new__
_set = object.__setattr__  # UUID is immutable: its own __setattr__ refuses
_UNKNOWN = SafeUUID.unknown  # looked up once: an enum member's access runs Python code


def _when(process: Process) -> Process:
    """A ``When`` value as aware UTC; what does not parse goes to ``process``."""

    def convert(value: Any) -> Any:
        if type(value) is str:
            try:  # naive text (what the store writes) read as UTC, in C
                parsed = _parse(value + "+00:00")
                if parsed.tzinfo is UTC:
                    return parsed
            except ValueError:
                pass
        result = process(value)
        try:
            return as_utc(result) if isinstance(result, datetime) else result
        except OverflowError:  # an offset that moves it past datetime's range
            return Unreadable(value, f"is not a timestamp ({value!r:.60})")

    return convert


def _uuid(value: Any) -> Any:
    """``UUID(value)`` (what the ``Uuid`` processor calls); a damaged value is ``Unreadable``.

    32 hex digits (what the store writes) make the ``UUID`` from their integer without
    ``UUID.__init__``'s string handling (about 10x cheaper), as pydantic-core does; any
    other value takes ``UUID(value)``.
    """
    if type(value) is str and len(value) == 32:
        try:
            number = int(value, 16)
        except ValueError:
            number = -1
        if number >= 0:
            made = _new(UUID)
            _set(made, "int", number)
            _set(made, "is_safe", _UNKNOWN)
            return made
    try:
        return UUID(value)
    except (ValueError, TypeError, AttributeError):
        return Unreadable(value, f"is not a UUID ({value!r:.60})")


def _key_text(value: Any) -> Any:
    return unescape_key(value) if isinstance(value, str) else value


def _process_of(column_type: Any, process: Process) -> Process:
    """The fastest function giving what ``process`` (then ``as_utc`` for ``When``) gives."""
    if isinstance(column_type, When):
        return _when(process)
    if type(column_type) is sa.Uuid and column_type.as_uuid:
        return _uuid
    if type(column_type) is KeyText:
        return _key_text
    return process


def _column(process: Process, values: tuple[Any, ...], seen: dict[Any, Any]) -> list[Any]:
    """``process`` of every value of a column; ``None`` stays ``None``, repeated text converts once.

    ``seen`` maps ``None`` to ``None`` and text already converted (in this result, by
    columns of this type); other values (numbers, bytes: damage in these columns) are
    converted each time, so ``1`` and ``1.0`` never share.
    """
    if set(map(type, values)) <= _TEXT_OR_NULL:
        for value in set(values).difference(seen):
            seen[value] = process(value)
        return list(map(seen.__getitem__, values))
    return [None if value is None else _one(process, value, seen) for value in values]


def _one(process: Process, value: Any, seen: dict[Any, Any]) -> Any:
    if type(value) is not str:
        return process(value)
    if value not in seen:
        seen[value] = process(value)
    return seen[value]


class RowConverter:
    """The column converters of one SQLite statement (built once per statement, kept)."""

    def __init__(self, stmt: sa.Executable, raw: RawStatement) -> None:
        self.raw = raw
        columns = getattr(stmt, "exported_columns", ())
        results = raw.results or ()
        # Columns of equal types (class and arguments) share a converter, and so what it
        # has seen: a chat's id in a chat column and in a message column converts once.
        by_type: dict[tuple[type, str], Process] = {}
        converters = []
        for index, (column, process) in enumerate(zip(columns, results, strict=False)):
            if process is not None:
                key = (type(column.type), repr(column.type))
                if key not in by_type:
                    by_type[key] = _process_of(column.type, process)
                converters.append((index, by_type[key]))
        self._converters: tuple[tuple[int, Process], ...] = tuple(converters)

    def rows(self, records: list[Row]) -> list[Row]:
        """Return ``records`` (tuples from ``sqlite3``) with every column converted."""
        if not self._converters or not records:
            return records
        columns: list[Any] = list(zip(*records, strict=True))
        seen: dict[Process, dict[Any, Any]] = {}
        for index, process in self._converters:
            columns[index] = _column(
                process, columns[index], seen.setdefault(process, {None: None})
            )
        return list(zip(*columns, strict=True))
