"""``chat_lanes``: several chats written at once fail as one sequential import would."""

from __future__ import annotations

import asyncio

import pytest

from threadkeep import IdempotencyConflict
from threadkeep._importers._lanes import chat_lanes


async def test_the_first_failure_is_raised_itself_and_cancels_the_rest() -> None:
    cancelled: list[int] = []

    async def slow(n: int) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    async def failing() -> None:
        await asyncio.sleep(0)
        raise IdempotencyConflict("record 3 was imported before with different content")

    async def import_four() -> None:
        async with chat_lanes() as group:
            for n in range(3):
                group.create_task(slow(n))
            group.create_task(failing())

    with pytest.raises(IdempotencyConflict, match="record 3"):
        await import_four()
    assert sorted(cancelled) == [0, 1, 2]


async def test_without_a_failure_every_task_completes() -> None:
    done: list[int] = []

    async def write(n: int) -> None:
        await asyncio.sleep(0)
        done.append(n)

    async with chat_lanes() as group:
        for n in range(5):
            group.create_task(write(n))
    assert sorted(done) == [0, 1, 2, 3, 4]
