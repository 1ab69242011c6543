"""Through PgBouncer in transaction mode (``pooler="transaction"``), under concurrency.

Needs ``THREADKEEP_TEST_PGBOUNCER_URL`` (``bash .ci/services/pgbouncer.sh start``: a real
PgBouncer, ``pool_mode = transaction``, 8 server connections per database). 24 concurrent
clients on 8 server connections make PgBouncer hand each transaction whichever server
connection is free, so any statement state kept between transactions would break.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from threadkeep import Message
from threadkeep_contract_tests import require_service
from threadkeep_sql import SqlStore

from .conftest import asyncpg_dsn, postgres_url

PGBOUNCER_ENV = "THREADKEEP_TEST_PGBOUNCER_URL"


@pytest.fixture
async def pooled_url() -> AsyncIterator[str]:
    """A store URL through PgBouncer to a database of this test's own (default search_path)."""
    pooler = require_service(PGBOUNCER_ENV, "PgBouncer (bash .ci/services/pgbouncer.sh start)")
    primary = postgres_url()
    name = f"tk_pooler_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(asyncpg_dsn(primary))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield make_url(pooler).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def test_concurrent_clients_through_a_transaction_pooler(pooled_url: str) -> None:
    async with SqlStore(pooled_url, pooler="transaction", pool_size=12) as store:
        chats = [await store.create_chat("u", f"t{i}") for i in range(6)]

        async def client(n: int) -> None:
            chat = chats[n % len(chats)]
            for i in range(15):
                message = Message(role="user", content=f"{n}-{i}", agui_id=f"{n}-{i}")
                stored = await store.append_message(chat.chat_id, message)
                again = await store.get_message_by_agui_id(chat.chat_id, f"{n}-{i}")
                assert again.message_id == stored.message_id
                await store.list_messages(chat.chat_id, limit=5)

        await asyncio.gather(*(client(n) for n in range(24)))
        total = 0
        for chat in chats:
            page = await store.list_messages(chat.chat_id, limit=500)
            seqs = [m.seq for m in page.items]
            assert seqs == list(range(1, len(seqs) + 1))  # no gaps, no duplicates
            total += len(seqs)
        assert total == 24 * 15
