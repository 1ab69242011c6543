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
