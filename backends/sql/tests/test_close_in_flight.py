"""``close()`` while writes and reads are still running: nothing half-written, nothing leaked.

``Store.close`` does not wait for the operations it interrupts; SQL writes run to their end
(shielded) and gave their connections back after the pool was closed, where they stayed
open, unowned: collected later with SQLAlchemy's "non-checked-in connection" warning or
aiosqlite's "deleted before being closed" (a live thread per connection), which
``filterwarnings = error`` turns into a failure of whatever test runs then.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

from sqlalchemy import exc as sa_exc

from threadkeep import BackendUnavailable, Message
from threadkeep_sql import SqlStore


async def test_close_during_writes_and_reads_leaves_batches_whole_and_no_connection(
    engine_url: tuple[str, dict[str, Any]],
) -> None:
    url, options = engine_url
    gc.collect()  # earlier tests' garbage, so that what is collected below is this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = SqlStore(url, **options)
        await store.open()
        chat = await store.create_chat("u", "t")
        writes = [
            asyncio.create_task(
                store.append_messages(
                    chat.chat_id, [Message(role="user", content=f"{i}-{j}") for j in range(3)]
                )
            )
            for i in range(20)
        ]
        reads = [asyncio.create_task(store.list_messages(chat.chat_id)) for _ in range(5)]
        await asyncio.sleep(0)  # every task has started
        await store.close()
        outcomes = await asyncio.gather(*writes, *reads, return_exceptions=True)
        for outcome in outcomes:  # done, or refused with a typed error
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, BackendUnavailable), repr(outcome)
        db = store.driver.db  # nothing is left open: neither kept nor checked out
        assert (db._held, db._lite_held) == ([], [])
        assert db.engine.pool.checkedout() == 0
        del store, db, writes, reads, outcomes
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, (ResourceWarning, sa_exc.SAWarning))]
    assert not leaks, [str(w.message) for w in leaks]
    async with SqlStore(url, **options) as again:
        stored = (await again.list_messages(chat.chat_id, limit=200)).items
    batches: dict[str, list[int]] = {}
    for message in stored:
        batch, index = message.content.split("-")
        batches.setdefault(batch, []).append(int(index))
    assert all(indexes == [0, 1, 2] for indexes in batches.values()), batches  # whole, in order
    seqs = [message.seq for message in stored]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, none twice
