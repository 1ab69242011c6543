"""SQLite rows converted a column at a time give what SQLAlchemy's processors give.

``threadkeep_sql._lite_rows.RowConverter`` replaces one result-processor call per value
on the one-hop SQLite paths: every value must come back as the column type's processor
makes it (timestamps then through ``as_utc``), ``None`` as ``None``, unparseable text as
``Unreadable``, and a repeated value converted once.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import dialect as sqlite_dialect

from threadkeep import Unreadable, as_utc
from threadkeep_sql._lite_rows import RowConverter
from threadkeep_sql._runner import Compiled
from threadkeep_sql._schema import messages

_m = messages.c
STMT = sa.select(_m.chat_id, _m.seq, _m.created_at, _m.updated_at, _m.deleted_at, _m.body)
DIALECT = sqlite_dialect()


def _converter() -> RowConverter:
    return RowConverter(STMT, Compiled(DIALECT).get(STMT))


def _one_by_one(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """What the statement's result processors give per value, timestamps through ``as_utc``."""
    raw = Compiled(DIALECT).get(STMT)
    return [
        tuple(as_utc(value) if isinstance(value, datetime) else value for value in record)
        for record in raw.rows(records)
    ]


def test_columns_convert_as_the_processors_do() -> None:
    chat = uuid.uuid4()
    other = uuid.uuid4()
    records: list[tuple[Any, ...]] = [
        (chat.hex, 3, "2026-12-02 07:41:26.123456", "2026-12-02 07:41:26.123456", None, "{}"),
        (chat.hex, 2, "2026-12-01 00:00:00.000000", "2026-12-02 09:00:00.500000", None, "{}"),
        (other.hex, 1, "2026-01-01T10:00:00+02:00", "2026-01-01 10:00:00", None, "{}"),
    ]
    rows = _converter().rows(records)
    assert rows == _one_by_one(records)
    assert rows[0][0] == chat
    assert rows[2][0] == other
    assert rows[0][2] == datetime(2026, 12, 2, 7, 41, 26, 123456, tzinfo=UTC)
    assert rows[2][2] == datetime(2026, 1, 1, 10, tzinfo=timezone(timedelta(hours=2)))
    for row in rows:  # every timestamp aware and in UTC: the rebuild does not convert again
        assert all(value.tzinfo is UTC for value in row[2:4])
        assert row[4] is None


def test_repeated_values_convert_once() -> None:
    chat = uuid.uuid4()
    stamp = "2026-12-02 07:41:26.123456"
    records = [(chat.hex, seq, stamp, stamp, None, "{}") for seq in range(5)]
    rows = _converter().rows(records)
    assert len({id(row[0]) for row in rows}) == 1
    assert len({id(value) for row in rows for value in row[2:4]}) == 1
    assert rows == _one_by_one(records)


def test_unparseable_timestamps_read_as_unreadable() -> None:
    chat = uuid.uuid4()
    records: list[tuple[Any, ...]] = [
        (chat.hex, 1, "not-a-date", "2026-12-02 07:41:26.123456", None, "{}"),
        (chat.hex, 2, "2026-12-02 07:41:26.123456", "not-a-date", "13/13/2026", "{}"),
    ]
    rows = _converter().rows(records)
    assert isinstance(rows[0][2], Unreadable)
    assert isinstance(rows[1][3], Unreadable)
    assert isinstance(rows[1][4], Unreadable)
    assert rows[0][3] == datetime(2026, 12, 2, 7, 41, 26, 123456, tzinfo=UTC)
    assert [row[1] for row in rows] == [1, 2]


def test_no_rows_and_no_processors() -> None:
    assert _converter().rows([]) == []
    plain = sa.select(_m.seq, _m.body)
    records = [(1, "{}"), (2, "{}")]
    assert RowConverter(plain, Compiled(DIALECT).get(plain)).rows(records) is records


def test_uuids_are_what_uuid_makes_and_damage_is_unreadable() -> None:
    ids = [uuid.uuid4() for _ in range(3)] + [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1)]
    stamp = "2026-12-02 07:41:26.123456"
    records: list[tuple[Any, ...]] = [(i.hex, 1, stamp, stamp, None, "{}") for i in ids]
    rows = _converter().rows(records)
    for made, wanted in zip((row[0] for row in rows), ids, strict=True):
        assert type(made) is uuid.UUID
        assert made == wanted
        assert hash(made) == hash(wanted)
        assert str(made) == str(wanted)
        assert made.is_safe is wanted.is_safe
    damaged: list[tuple[Any, ...]] = [
        ("not-a-uuid", 1, stamp, stamp, None, "{}"),
        ("-" + "f" * 31, 2, stamp, stamp, None, "{}"),
        ("0x" + "a" * 30, 3, stamp, stamp, None, "{}"),
        (12345, 4, stamp, stamp, None, "{}"),
        (b"\x00" * 16, 5, stamp, stamp, None, "{}"),
    ]
    rows = _converter().rows(damaged)
    assert isinstance(rows[0][0], Unreadable)
    assert isinstance(rows[1][0], Unreadable)
    assert rows[2][0] == uuid.UUID("0x" + "a" * 30)  # what UUID() itself accepts
    assert isinstance(rows[3][0], Unreadable)
    assert isinstance(rows[4][0], Unreadable)


def test_timestamp_forms_convert_as_as_utc_of_the_parse() -> None:
    chat = uuid.uuid4().hex
    forms = [
        "2026-12-02 07:41:26.123456",
        "2026-12-02 07:41:26",
        "2026-12-02T07:41:26",
        "2026-12-02",
        "2026-12-02 07",
        "2026-12-02 07:41:26.123+05:00",
        "2026-12-02 07:41:26Z",
        "2026-12-02 07:41:26.123456-01:00",
        "0001-01-01 00:00:00+01:00",  # as UTC: before year 1
        "9999-12-31 23:59:59.999999",
    ]
    records = [(chat, n, form, form, None, "{}") for n, form in enumerate(forms)]
    rows = _converter().rows(records)
    for form, row in zip(forms, rows, strict=True):
        try:
            wanted: Any = as_utc(datetime.fromisoformat(form))
        except OverflowError:
            wanted = None
        if wanted is None:
            assert isinstance(row[2], Unreadable)
        else:
            assert row[2] == wanted
            assert row[2].tzinfo is UTC
