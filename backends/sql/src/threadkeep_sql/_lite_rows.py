"""SQLite: turning a statement's fetched rows into Python values a column at a time.

SQLAlchemy's result processors run once per value: on a 51-row page that is 204 Python
calls (the chat id as ``UUID`` text, three timestamps as text parsed by the ``When``
type), about as much CPU as validating the page's bodies. Here a column is converted at
once, and a value seen before in the statement's result (the page's one ``chat_id``, a
``created_at`` equal to its ``updated_at``) is converted once: the processors are the
same functions, so the values are the same.

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


def _column(process: Process, values: tuple[Any, ...]) -> list[Any]:
    """``process`` of every value of a column; ``None`` stays ``None``, repeats convert once."""
    seen: dict[Any, Any] = {}
    out = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        result = seen.get(value, _MISSING)
        if result is _MISSING:
            result = seen[value] = process(value)
        out.append(result)
    return out


class RowConverter:
    """The column converters of one SQLite statement (built once per statement, kept)."""

    def __init__(self, stmt: sa.Executable, raw: RawStatement) -> None:
        self.raw = raw
        columns = getattr(stmt, "exported_columns", ())
        results = raw.results or ()
        self._converters: tuple[tuple[int, Process], ...] = tuple(
            (index, _utc(process) if isinstance(column.type, When) else process)
            for index, (column, process) in enumerate(zip(columns, results, strict=False))
            if process is not None
        )

    def rows(self, records: list[Row]) -> list[Row]:
        """Return ``records`` (tuples from ``sqlite3``) with every column converted."""
        if not self._converters or not records:
            return records
        columns: list[Any] = list(zip(*records, strict=True))
        for index, process in self._converters:
            columns[index] = _column(process, columns[index])
        return list(zip(*columns, strict=True))
