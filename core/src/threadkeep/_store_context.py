"""Boundaries and the model's context window.

"Start over" draws a boundary line in the same thread: the model
gets nothing from before it, the person keeps every message. Compaction is the same marker
carrying a summary of what it replaces. History pages show everything, markers included.
"""

from __future__ import annotations

from uuid import UUID

from ._boundary_rules import boundary_cut
from ._boundary_rules import is_compaction as _is_compaction
from ._corrupt import collecting
from ._errors import Conflict, InvalidArgument
from ._models import Boundary, Message, MessageKind, Role
from ._store_args import as_count, as_id, as_text
from ._store_core import Component

__all__ = ["ContextOps", "boundary_cut", "trim_orphan_tool_results"]

_BATCH = 200
_MAX_REDRAWS = 64


def trim_orphan_tool_results(messages: list[Message]) -> list[Message]:
    """Drop tool results whose call is not in an earlier message of the window.

    A context window must never start with (or contain) a tool result whose call was cut
    off: model APIs reject a ``tool`` message that answers no visible call.
    """
    seen_calls: set[str] = set()
    kept: list[Message] = []
    for message in messages:
        if message.role is Role.TOOL and message.tool_call_ref not in seen_calls:
            continue
        for call in message.tool_calls:
            if call.agui_id:
                seen_calls.add(call.agui_id)
        kept.append(message)
    return kept


class ContextOps(Component):
    """``start_over``, ``compact`` and ``context_messages``."""

    async def start_over(self, chat_id: UUID | str) -> Message | None:
        """Implement :meth:`threadkeep.Store.start_over`."""
        chat_id = as_id(chat_id, "chat_id")
        page = await self._ctx.messages.list_messages(chat_id, limit=1)
        if not page.items:
            return None
        last = page.items[-1]
        if last.kind is MessageKind.BOUNDARY and not _is_compaction(last):
            return last
        return await self._draw_line(
            chat_id, f"threadkeep:start_over:{last.seq}", Boundary(reason="start_over"), ""
        )

    async def compact(self, chat_id: UUID | str, summary: str, upto_seq: int) -> Message:
        """Implement :meth:`threadkeep.Store.compact`."""
        chat_id = as_id(chat_id, "chat_id")
        summary = as_text(summary, "summary")
        if not summary.strip():
            raise InvalidArgument("summary must not be only whitespace")
        upto_seq = as_count(upto_seq, "upto_seq", minimum=1)
        page = await self._ctx.messages.list_messages(chat_id, limit=1)
        newest = page.items[-1].seq if page.items else None
        if newest is None or upto_seq > newest:
            msg = f"upto_seq {upto_seq} is not a seq of chat {chat_id} (newest: {newest})"
            raise InvalidArgument(msg)
        with collecting(self._ctx.corrupt_records):  # "skip": a damaged boundary is left out
            last = await self._driver.last_boundary(chat_id)
        cut = 0 if last is None else boundary_cut(last)
        if upto_seq < cut:
            msg = (
                f"upto_seq {upto_seq} is below the current cut of chat {chat_id} (seq {cut}); "
                "a compaction only moves the cut forward: summarize up to a seq >= the cut"
            )
            raise InvalidArgument(msg)
        return await self._draw_line(
            chat_id,
            f"threadkeep:compaction:{upto_seq}",
            Boundary(reason="compaction", upto_seq=upto_seq),
            summary,
        )

    async def _draw_line(
        self, chat_id: UUID, agui_id: str, marker: Boundary, content: str
    ) -> Message:
        """Append a boundary idempotently under ``agui_id``; return the one in effect.

        A stored boundary with that id that was hidden since (``delete_messages``, an
        "undo") is passed over: the next id in the chain (``agui_id:seq``) is tried, so
        the line is drawn again instead of the hidden one being returned. Concurrent
        callers walk the same chain and meet on one boundary.

        Raises:
            Conflict: If the chain is implausibly long (a driver returning hidden rows).
        """
        for _ in range(_MAX_REDRAWS):
            boundary = self._ctx.records.message_model(
                role=Role.SYSTEM,
                kind=MessageKind.BOUNDARY,
                boundary=marker,
                content=content,
                agui_id=agui_id,
            )
            line = await self._ctx.messages.append_message(chat_id, boundary)
            if line.deleted_at is None:
                return line
            agui_id = f"{agui_id}:{line.seq}"
        raise Conflict(f"chat {chat_id}: {_MAX_REDRAWS} hidden boundaries under {agui_id!r}")

    async def context_messages(
        self, chat_id: UUID | str, *, max_messages: int | None = None
    ) -> list[Message]:
        """Implement :meth:`threadkeep.Store.context_messages`."""
        chat_id = as_id(chat_id, "chat_id")
        if max_messages is not None:
            max_messages = as_count(max_messages, "max_messages", minimum=1)
        await self._ctx.chats._require_hot_chat(chat_id)
        with collecting(self._ctx.corrupt_records):  # "skip": a damaged boundary is left out
            last = await self._driver.last_boundary(chat_id)
        head: list[Message] = []
        after = 0
        if last is not None:
            after = boundary_cut(last)
            if _is_compaction(last):
                head = [last]
        body = await self._collect_after(chat_id, after)
        if max_messages is not None:
            body = body[-max_messages:]
        return head + trim_orphan_tool_results(body)

    async def _collect_after(self, chat_id: UUID, after: int) -> list[Message]:
        """Return the visible plain messages after ``after`` that no "start over" cuts."""
        collected: list[Message] = []
        while True:
            with collecting(self._ctx.corrupt_records) as skipped:  # "skip": left out
                batch = await self._driver.messages_after(chat_id, after, _BATCH)
            if not batch and not skipped:
                break
            for message in batch:
                if message.kind is MessageKind.BOUNDARY:
                    if not _is_compaction(message):
                        collected = []  # a later "start over" line cuts what came before it
                    continue
                collected.append(message)
            seqs = [m.seq for m in batch] + [e.seq for e in skipped if type(e.seq) is int]
            moved = max([after, *(seq for seq in seqs if seq is not None)])
            if moved == after:  # only damaged rows with no readable seq: nothing follows
                break
            after = moved
        return collected
