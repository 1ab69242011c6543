"""SQLite: turning a statement's fetched rows into Python values a column at a time.

SQLAlchemy's result processors run once per value: on a 51-row page that is 204 Python
calls (the chat id as ``UUID`` text, three timestamps as text parsed by the ``When``
type). Here a column is converted at once, and a text seen before in the statement's
result (the page's one ``chat_id``, a ``created_at`` equal to its ``updated_at``) is
converted once: the processors are the same functions, so the values are the same
(``list_messages`` on SQLite: about 1.5 ms of CPU per page before, 1.1 ms after, on a
loaded 2-core machine; ``docs/performance.md``).

Timestamps (``When`` columns) come back as aware UTC datetimes, :func:`threadkeep.as_utc`
of what the processor returns (SQLite keeps UTC as naive text), so the model rebuild
does not convert them again; a value the processor cannot parse stays its
:class:`threadkeep.Unreadable`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from threadkeep import as_utc

from ._runner import RawStatement
from ._schema import When

__all__ = ["RowConverter"]

Row = Sequence[Any]
Process = Callable[[Any], Any]
_MISSING = object()


def _utc(process: Process) -> Process:
    """``process``, then ``as_utc`` of a datetime it returns (``Unreadable`` stays as it is)."""

    def convert(value: Any) -> Any:
        result = process(value)
        return as_utc(result) if isinstance(result, datetime) else result

    return convert


def _column(process: Process, values: tuple[Any, ...], seen: dict[str, Any]) -> list[Any]:
    """``process`` of every value of a column; ``None`` stays ``None``, repeated text converts once.

    ``seen`` maps text already converted (in this result, by columns of this type); other
    values (numbers, bytes) are converted each time, so ``1`` and ``1.0`` never share.
    """
    out: list[Any] = []
    for value in values:
        if value is None:
            out.append(None)
        elif type(value) is str:
            result = seen.get(value, _MISSING)
            if result is _MISSING:
                result = seen[value] = process(value)
            out.append(result)
        else:
            out.append(process(value))
    return out


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
                    by_type[key] = _utc(process) if isinstance(column.type, When) else process
                converters.append((index, by_type[key]))
        self._converters: tuple[tuple[int, Process], ...] = tuple(converters)

    def rows(self, records: list[Row]) -> list[Row]:
        """Return ``records`` (tuples from ``sqlite3``) with every column converted."""
        if not self._converters or not records:
            return records
        columns: list[Any] = list(zip(*records, strict=True))
        seen: dict[Process, dict[str, Any]] = {}
        for index, process in self._converters:
            columns[index] = _column(process, columns[index], seen.setdefault(process, {}))
        return list(zip(*columns, strict=True))
