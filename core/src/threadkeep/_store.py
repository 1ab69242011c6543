"""``Store``: the public API every driver shares, built on the driver primitives."""

from __future__ import annotations

from ._previews import PreviewOps
from ._store_copy import CopyOps
from ._store_load import LoadOps
from ._store_run_batch import RunBatchOps

__all__ = ["Store"]


class Store(CopyOps, LoadOps, RunBatchOps, PreviewOps):
    """Durable chat history on one backend; subclass it to write a driver.

    A store is opened and closed around use::

        async with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
            chat = await store.create_chat("user-1", "thread-1")
            await store.append_message(chat.chat_id, Message(role="user", content="hi"))
            page = await store.list_messages(chat.chat_id)

    The public methods (chats, messages, nested tool calls and reasonings, boundaries and
    context, steps and runs) implement SPEC section 3 once for every driver: argument and
    content checks, signed cursors, idempotency checks, compare-and-set retries. A driver
    subclasses ``Store``, sets :attr:`schemes` and :attr:`capabilities`, and implements the
    primitives of :class:`threadkeep.DriverPrimitives` (the underscore methods), then
    proves itself with ``threadkeep-contract-tests`` (see ``docs/writing-a-driver.md``).

    Args:
        url: The store URL.
        cursor_secret: Secret that signs cursors (at least 16 bytes). Without one the store
            keeps a generated secret, so processes sharing the store accept each other's
            cursors.
        clock: Source of timestamps (tz-aware); timestamps are informational, ``seq`` orders.
        max_message_bytes: Limit on a message's payload in UTF-8 bytes (default 16 MiB).
        message_model: The ``Message`` subclass messages are read back as.
        chat_model: The ``Chat`` subclass chats are read back as.
        auto_migrate: ``False``: ``open()`` never changes the schema; a store whose schema
            is older than the code raises ``SchemaOutdated`` naming ``threadkeep migrate``
            (for an application user that may not run DDL). Default ``True``; also the
            ``auto_migrate`` setting (``THREADKEEP_AUTO_MIGRATE``).
    """
