"""A ``load_messages`` whose source of messages fails keeps every batch drawn before it.

The batch in flight when the iterable raises is finished (written) before the source's
error is raised, so which batches are stored does not depend on timing, and a re-run
resumes after them (``Store.load_messages`` pipelines one batch's write with the next
batch's encoding).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from threadkeep import Message, open_store


def _messages(count: int) -> Iterator[Message]:
    for n in range(count):
        yield Message(role="user", agui_id=f"s-{n}", content=f"m{n}")


def _failing_at(count: int, at: int) -> Iterator[Message]:
    for n, message in enumerate(_messages(count)):
        if n == at:
            raise RuntimeError("the source went away")
        yield message


async def _failing_async(count: int, at: int) -> AsyncIterator[Message]:
    for message in _failing_at(count, at):
        yield message


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("source", ["sync", "async"])
async def test_batches_before_a_failing_source_are_stored(
    kind: str, source: str, tmp_path: Path
) -> None:
    url = "memory://" if kind == "memory" else f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    async with open_store(url) as store:
        chat = await store.create_chat("u", "t")
        failing = _failing_at(20, 13) if source == "sync" else _failing_async(20, 13)
        with pytest.raises(RuntimeError, match="went away"):
            await store.load_messages(chat.chat_id, failing, batch_size=4)
        page = await store.list_messages(chat.chat_id, limit=100)
        assert [m.agui_id for m in page.items] == [f"s-{n}" for n in range(12)]
        report = await store.load_messages(chat.chat_id, _messages(20), batch_size=4)
        assert (report.created, report.present) == (8, 12)
        page = await store.list_messages(chat.chat_id, limit=100)
        assert [m.agui_id for m in page.items] == [f"s-{n}" for n in range(20)]
