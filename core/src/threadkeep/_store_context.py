"""Boundaries and the model's context window (SPEC section 3, "Boundaries").

"Start over" draws a boundary line in the same thread (agent-chat-storage seed): the model
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
from ._store_nested import NestedOps

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


class ContextOps(NestedOps):
    """``start_over``, ``compact`` and ``context_messages``."""

    async def start_over(self, chat_id: UUID | str) -> Message | None:
        """Draw a "start over" boundary at the end of the chat.

        Idempotent: when the newest message is already a "start over" line (or the chat
        is empty) nothing is added, and concurrent calls draw one line (the boundary's
        ``agui_id`` is derived from the seq it follows). A compaction boundary as the
        newest message does not count: its summary still reaches the model, so a line is
        drawn after it and ``context_messages`` is then empty.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The "start over" line in effect (new or existing), or ``None`` for an empty
            chat.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        page = await self.list_messages(chat_id, limit=1)
        if not page.items:
            return None
        last = page.items[-1]
        if last.kind is MessageKind.BOUNDARY and not _is_compaction(last):
            return last
        return await self._draw_line(
            chat_id, f"threadkeep:start_over:{last.seq}", Boundary(reason="start_over"), ""
        )

    async def compact(self, chat_id: UUID | str, summary: str, upto_seq: int) -> Message:
        """Append a compaction boundary whose ``content`` summarizes messages up to a seq.

        After it, ``context_messages`` gives the summary first, then the messages with
        ``seq > upto_seq``. The cut only moves forward: ``upto_seq`` may not be below the
        current cut (the ``upto_seq`` of the compaction in effect, or the seq of the last
        "start over" line). Idempotent per ``upto_seq``: the same call again returns the
        stored boundary; another summary for the same ``upto_seq`` raises
        ``IdempotencyConflict``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            summary: The text that replaces the compacted messages for the model (not
                empty or only whitespace).
            upto_seq: The last seq the summary covers: at least 1, at least the current
                cut, at most the chat's newest seq.

        Returns:
            The compaction boundary (new, or the equal one already stored).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id, ``summary`` is empty, or
                ``upto_seq`` is not an integer in the range above; nothing is written.
            IdempotencyConflict: If a compaction up to ``upto_seq`` holds another summary.
            InvalidContent / PayloadTooLarge: If the summary cannot be stored.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        summary = as_text(summary, "summary")
        if not summary.strip():
            raise InvalidArgument("summary must not be only whitespace")
        upto_seq = as_count(upto_seq, "upto_seq", minimum=1)
        page = await self.list_messages(chat_id, limit=1)
        newest = page.items[-1].seq if page.items else None
        if newest is None or upto_seq > newest:
            msg = f"upto_seq {upto_seq} is not a seq of chat {chat_id} (newest: {newest})"
            raise InvalidArgument(msg)
        with collecting(self.corrupt_records):  # "skip": a damaged boundary is left out
            last = await self._last_boundary(chat_id)
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
            boundary = self.message_model(
                role=Role.SYSTEM,
                kind=MessageKind.BOUNDARY,
                boundary=marker,
                content=content,
                agui_id=agui_id,
            )
            line = await self.append_message(chat_id, boundary)
            if line.deleted_at is None:
                return line
            agui_id = f"{agui_id}:{line.seq}"
        raise Conflict(f"chat {chat_id}: {_MAX_REDRAWS} hidden boundaries under {agui_id!r}")

    async def context_messages(
        self, chat_id: UUID | str, *, max_messages: int | None = None
    ) -> list[Message]:
        """Return what the model gets: the messages after the current cut, oldest first.

        The last boundary sets the cut. After a compaction the boundary (its ``content``
        is the summary) comes first, followed by the messages after its ``upto_seq``;
        earlier compaction markers it supersedes are left out and cut nothing, while a
        "start over" line always cuts everything before it. Boundaries are otherwise left
        out, and tool results whose call was cut off are dropped
        (:func:`trim_orphan_tool_results`).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            max_messages: Keep only the newest this many messages (a count; the summary,
                if any, stays first).

        Returns:
            The window, oldest first.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id or ``max_messages`` is not an
                integer of at least 1.
            CorruptRecord: If a message of the window is damaged (left out instead on a
                ``corrupt_records="skip"`` store).
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        if max_messages is not None:
            max_messages = as_count(max_messages, "max_messages", minimum=1)
        await self._require_hot_chat(chat_id)
        with collecting(self.corrupt_records):  # "skip": a damaged boundary is left out
            last = await self._last_boundary(chat_id)
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
            with collecting(self.corrupt_records) as skipped:  # "skip": left out
                batch = await self._messages_after(chat_id, after, _BATCH)
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
