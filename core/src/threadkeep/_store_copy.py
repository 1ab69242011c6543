"""Copying records between stores exactly as stored: ids, seqs and timestamps kept.

The public write path ``threadkeep copy`` needs (issue 17): every other write assigns
store-owned fields (``chat_id``, ``seq``, ``created_at``...) itself. These methods read and
write records whole, on the driver primitives the cold archive already uses (a driver with
the ``archive`` capability, plus ``steps`` for steps and runs), and are idempotent by id, so
an interrupted copy can simply run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ._errors import CapabilityNotSupported, ChatNotFound, Conflict, InvalidArgument
from ._models import Chat, ChatStatus, Message
from ._runs import Run, Step
from ._store_args import as_id
from ._store_core import Component

__all__ = ["CopyOps"]

_MAX_BATCH = 1000


class CopyOps(Component):
    """Whole records in and out, for copying one store into another.

    ``scan_messages`` and ``scan_steps`` read; ``copy_chat``, ``copy_messages``,
    ``copy_steps`` and ``copy_run`` write.
    """

    def _require(self, capability: str) -> None:
        if not getattr(self._ctx.capabilities, capability):
            msg = f"{type(self).__name__} lacks the {capability!r} capability copying needs"
            raise CapabilityNotSupported(msg)

    async def scan_messages(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Message]:
        """Implement :meth:`threadkeep.Store.scan_messages`."""
        self._ctx.require_open()
        self._require("archive")
        return await self._driver.scan_messages(
            as_id(chat_id, "chat_id"), _seq(after_seq), _batch(limit)
        )

    async def scan_steps(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Step]:
        """Implement :meth:`threadkeep.Store.scan_steps`."""
        self._ctx.require_open()
        self._require("steps")
        return await self._driver.scan_steps(
            as_id(chat_id, "chat_id"), _seq(after_seq), _batch(limit)
        )

    async def copy_chat(self, chat: Chat) -> bool:
        """Implement :meth:`threadkeep.Store.copy_chat`."""
        self._ctx.require_open()
        if not isinstance(chat, Chat):
            raise InvalidArgument(f"copy_chat takes a Chat, not {type(chat).__name__}")
        if await self._driver.get_chat(chat.chat_id) is not None:
            return False
        record = self._ctx.records.chat_model.model_validate(chat.model_dump())
        self._ctx.records.record_body(record)
        # Inserted live (the primitive's contract), then deleted as it was: a deleted chat
        # must not hold its key.
        stored = await self._driver.insert_chat(record.model_copy(update={"deleted_at": None}))
        if stored.chat_id != chat.chat_id:
            msg = (
                f"chat {chat.chat_id}: the live chat {stored.chat_id} already holds user "
                f"{chat.user_id!r}, thread {chat.thread_id!r} here"
            )
            raise Conflict(msg)
        if record.deleted_at is not None:
            await self._driver.update_chat(record, None)
        return True

    async def copy_deletion(self, chat: Chat) -> bool:
        """Implement :meth:`threadkeep.Store.copy_deletion`."""
        self._ctx.require_open()
        if not isinstance(chat, Chat):
            raise InvalidArgument(f"copy_deletion takes a Chat, not {type(chat).__name__}")
        stored = await self._driver.get_chat(chat.chat_id)
        if stored is None:
            raise ChatNotFound(f"no chat {chat.chat_id} here; copy_chat it first")
        if chat.deleted_at is None or stored.deleted_at is not None:
            return False
        record = self._ctx.records.chat_model.model_validate(chat.model_dump())
        self._ctx.records.record_body(record)
        await self._driver.update_chat(record, None)
        return True

    async def copy_messages(self, chat_id: UUID | str, messages: Sequence[Message]) -> int:
        """Implement :meth:`threadkeep.Store.copy_messages`."""
        self._ctx.require_open()
        self._require("archive")
        chat_id = as_id(chat_id, "chat_id")
        for message in messages:
            if message.seq is None or message.chat_id not in (None, chat_id):
                raise InvalidArgument(
                    f"message {message.message_id} is no stored message of {chat_id}"
                )
        await self._require_copy_target(chat_id)
        return await self._driver.restore_messages(chat_id, list(messages)) if messages else 0

    async def copy_steps(self, chat_id: UUID | str, steps: Sequence[Step]) -> int:
        """Implement :meth:`threadkeep.Store.copy_steps`."""
        self._ctx.require_open()
        self._require("steps")
        self._require("archive")
        chat_id = as_id(chat_id, "chat_id")
        if any(step.chat_id != chat_id for step in steps):
            raise InvalidArgument(f"every step copied into chat {chat_id} must be of it")
        await self._require_copy_target(chat_id)
        return await self._driver.restore_steps(chat_id, list(steps)) if steps else 0

    async def copy_run(self, run: Run) -> bool:
        """Implement :meth:`threadkeep.Store.copy_run`."""
        self._ctx.require_open()
        self._require("steps")
        if not isinstance(run, Run):
            raise InvalidArgument(f"copy_run takes a Run, not {type(run).__name__}")
        await self._require_copy_target(run.chat_id, archived_ok=True)
        if await self._driver.get_run(run.chat_id, run.run_id) is not None:
            return False
        await self._driver.insert_run(run)
        return True

    async def _require_copy_target(self, chat_id: UUID, *, archived_ok: bool = False) -> None:
        chat = await self._driver.get_chat(chat_id)
        if chat is None:
            raise ChatNotFound(f"no chat {chat_id} here; copy_chat it first")
        if chat.status is ChatStatus.ARCHIVED and not archived_ok:
            raise Conflict(f"chat {chat_id} is archived here: its records are in its bundle")


def _seq(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"after_seq must be an integer >= 0, not {value!r}")
    return value


def _batch(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_BATCH:
        raise InvalidArgument(f"limit must be an integer from 1 to {_MAX_BATCH}, not {value!r}")
    return value
