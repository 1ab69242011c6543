"""SQLite store URLs are checked up front: a usage error naming the part, never a raw
SQLAlchemy error, a warning, or a silent throwaway in-memory database."""

from __future__ import annotations

import pytest

from threadkeep import InvalidArgument
from threadkeep_sql import SqlStore


@pytest.mark.parametrize(
    "url", ["sqlite+aiosqlite:///", "sqlite+aiosqlite://", "sqlite:///", "sqlite+aiosqlite:///?"]
)
def test_an_empty_path_is_a_usage_error_not_an_in_memory_store(url: str) -> None:
    with pytest.raises(InvalidArgument, match="names no database file") as caught:
        SqlStore(url)
    assert "sqlite+aiosqlite:///path/to/file.db" in str(caught.value)
    assert ":memory:" in str(caught.value)


async def test_memory_is_in_memory_only_when_asked_for_by_name() -> None:
    async with SqlStore("sqlite+aiosqlite:///:memory:") as store:
        chat = await store.create_chat("u", "t")
        assert (await store.get_chat(chat.chat_id)).thread_id == "t"


@pytest.mark.parametrize(
    ("url", "needles"),
    [
        ("sqlite+aiosqlite://localhost/x.db", ["host 'localhost'", "path/to/file.db"]),
        ("sqlite+aiosqlite://user:pw@/tmp/x.db", ["user 'user'", "password '***'"]),
        ("sqlite+aiosqlite://:5/x.db", ["port 5"]),
        ("sqlite+aiosqlite:////tmp/x%00y.db", ["NUL character"]),
        ("sqlite+aiosqlite:////tmp/x.db?timeout=abc", ["'timeout'", "supported: none"]),
        ("sqlite+aiosqlite:////tmp/x.db?mode=ro&uri=true", ["parameters 'mode', 'uri'"]),
    ],
)
def test_a_malformed_sqlite_url_is_a_usage_error_naming_the_part(
    url: str, needles: list[str]
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        SqlStore(url)
    for needle in needles:
        assert needle in str(caught.value)
    assert "pw" not in str(caught.value).replace("password", "")


def test_a_malformed_sqlite_url_writes_no_warning(recwarn: pytest.WarningsRecorder) -> None:
    with pytest.raises(InvalidArgument):
        SqlStore("sqlite+aiosqlite:////tmp/x.db?mode=ro")
    assert not recwarn.list
