"""Inbound messages of a run: which are stored already, which are new, which are refused.

AG-UI clients send their whole message list with every run. The rule: a
message not stored in this chat must be a user message; anything else unknown ends the run
with ``INVALID_INPUT``. "Stored" spans the tool calls and reasonings nested in stored
messages, so an echoed assistant message, tool result or reasoning replays cleanly:

- a user message is stored when a stored message with its id has its content; a user
  message whose id is held by a message with other content (front ends that send every
  prompt as ``msg-1``) is a new message stored as ``"<id>#<n>"`` (``n`` = 2, 3, ...: the
  first free one; ``metadata["agui_id"]`` keeps the id), unless ``"<id>#<n>"`` already
  holds its content (then it is stored: a replay is a no-op); else it is new;
- a tool message is stored when its id is; else, when it answers a stored tool call
  (``toolCallId``), it is a frontend tool's result and is new; else refused;
- an assistant message is stored when its id is a stored message's, or a stored tool
  call's (clients name a tool-only message after its call), or every tool call it carries
  is stored;
- a reasoning message is stored when its id is a stored message's or reasoning's;
- any other role is stored only when its id is.

A message whose id names nothing stored (adapters such as LlamaIndex mint fresh ids for
every message of a ``MESSAGES_SNAPSHOT``, and the client echoes those) is stored when a
context message that no inbound id names has the same role, content, tool call answered
and nested records; each context message is taken once, so a prompt typed again is new,
and the input's last user message is never taken (a client sending only the new prompt
may repeat an earlier one's text).

Ids are looked up in the context window first, then in the store (older history). A
message hidden by ``Store.delete_messages`` counts as stored (its id stays taken; it is
not sent to the model): looked for before a message is refused, and for user messages
when the run's first write collides with an id no visible read finds. Lone
UTF-16 surrogates in an inbound message (its ids included) are replaced with U+FFFD first,
counted in the stored message's ``metadata["replaced_surrogates"]``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from ag_ui.core import AssistantMessage, ReasoningMessage, ToolMessage, UserMessage

from .._errors import CapabilityNotSupported
from .._models import Message
from .._store import Store
from ._state import REUSED_ID_NOTE
from ._text import SURROGATES_NOTE, held_calls, held_texts, repair_model
from ._translate import AguiMessage, agui_id_of, message_from_agui

__all__ = ["classify_inbound", "newest_ids", "same_message"]

_log = logging.getLogger("threadkeep.agui")


_SCAN_PAGE = 500


@dataclass
class _Known:
    store: Store
    chat_id: UUID | None
    messages: set[str] = field(default_factory=set)
    tool_calls: set[str] = field(default_factory=set)
    reasonings: set[str] = field(default_factory=set)
    held: dict[str, Message] = field(default_factory=dict)
    hidden_loaded: bool = False
    unclaimed: list[Message] = field(default_factory=list)
    echoes: bool = True
    looked_up: set[str] = field(default_factory=set)
    """Ids already looked up in the store (visible messages); ``fetched`` holds the hits."""
    fetched: dict[str, Message] = field(default_factory=dict)

    async def stored_message(self, agui_id: str) -> Message | None:
        """Return the chat's visible message holding ``agui_id``, looked up at most once."""
        if self.chat_id is None:
            return None
        if agui_id in self.looked_up:
            return self.fetched.get(agui_id)
        return await self.store.get_message_by_agui_id(self.chat_id, agui_id)

    def claim_same(self, inbound: Message) -> bool:
        """Take the first context message no inbound id named that is ``inbound`` re-keyed.

        Adapters that mint fresh ids for every message of a ``MESSAGES_SNAPSHOT``
        (LlamaIndex) make the client echo stored messages under ids never stored. Each
        context message is taken at most once, so a prompt typed again is still new, and
        the input's last user message (``echoes`` false) is never taken.
        """
        if not self.echoes:
            return False
        for index, stored in enumerate(self.unclaimed):
            if _echo_of(stored, inbound):
                del self.unclaimed[index]
                return True
        return False

    async def load_hidden(self) -> None:
        """Count the chat's hidden messages (``delete_messages``) as stored.

        Their ids stay taken in the store, and a client that echoes its whole list sends
        them again; they are skipped (and, hidden, never sent to the model). One scan of
        the chat, done only when an inbound message would otherwise be refused or
        collided with a message no visible read finds.
        """
        if self.hidden_loaded or self.chat_id is None:
            return
        self.hidden_loaded = True
        after = 0
        try:
            while True:
                # The one read that includes hidden messages (capability "archive").
                batch = await self.store.scan_messages(
                    self.chat_id, after_seq=after, limit=_SCAN_PAGE
                )
                for message in batch:
                    if message.deleted_at is not None:
                        self.add(message)
                if len(batch) < _SCAN_PAGE:
                    return
                after = batch[-1].seq or after
        except CapabilityNotSupported:
            return  # a driver without the primitive: hidden ids stay unknown

    def add(self, message: Message) -> None:
        if message.deleted_at is None:
            self.held.setdefault(agui_id_of(message), message)
        self.messages.add(agui_id_of(message))
        self.tool_calls.update(c.agui_id for c in message.tool_calls if c.agui_id)
        self.reasonings.update(r.agui_id for r in message.reasonings if r.agui_id)

    async def message(self, agui_id: str) -> bool:
        if agui_id in self.messages:
            return True
        return await self.stored_message(agui_id) is not None

    async def holder(self, agui_id: str) -> Message | None:
        """Return the visible message holding ``agui_id`` (context, this input, store)."""
        if agui_id in self.held:
            return self.held[agui_id]
        found = await self.stored_message(agui_id)
        if found is not None:
            self.held[agui_id] = found
        return found

    async def tool_call(self, agui_id: str) -> bool:
        if agui_id in self.tool_calls:
            return True
        if self.chat_id is None:
            return False
        return await self.store.get_tool_call_by_agui_id(self.chat_id, agui_id) is not None

    async def reasoning(self, agui_id: str) -> bool:
        if agui_id in self.reasonings:
            return True
        if self.chat_id is None:
            return False
        return await self.store.get_reasoning_by_agui_id(self.chat_id, agui_id) is not None


async def classify_inbound(
    store: Store,
    chat_id: UUID | None,
    inbound: Sequence[AguiMessage],
    context: Sequence[Message],
    *,
    run_id: str,
    accept_any: bool = False,
    include_hidden: bool = False,
    looked_up: tuple[set[str], dict[str, Message]] | None = None,
) -> tuple[list[Message], str | None]:
    """Return the inbound messages to store, or the reason the input is refused.

    Args:
        store: The store.
        chat_id: The run's chat (``None`` for a chat not created yet: nothing is stored).
        inbound: ``RunAgentInput.messages``.
        context: ``Store.context_messages`` of the chat (checked before the store).
        run_id: Stored on the new messages.
        accept_any: Store unknown messages of any role instead of refusing them (an import
            of recorded history, where the client's messages are the record).
        include_hidden: Count hidden messages as stored for every role, user messages too
            (they are otherwise looked for only before a message is refused).
        looked_up: ``(ids, found)``: ids already looked up in the store
            (``Store.run_context``) and the visible messages found for them; they are not
            looked up again.

    Returns:
        ``(new_messages, None)``, or ``([], reason)`` when a message may not be new.
    """
    known = _Known(store, chat_id)
    if looked_up is not None:
        known.looked_up, known.fetched = set(looked_up[0]), dict(looked_up[1])
    for stored_message in context:
        known.add(stored_message)
    named = {m.id for m in inbound}
    known.unclaimed = [
        m for m in context if m.agui_id not in named and m.metadata.get(REUSED_ID_NOTE) not in named
    ]
    if include_hidden:
        await known.load_hidden()
    new: list[Message] = []
    users = [i for i, m in enumerate(inbound) if isinstance(m, UserMessage)]
    for index, original in enumerate(inbound):
        # The newest prompt is never an echo: a client sending only it may repeat a text.
        known.echoes = not users or index != users[-1]
        # Lone surrogates (ids included) become U+FFFD first, so lookups and writes agree.
        message, replaced = repair_model(original, note=False)
        verdict, stored_id, built = await _verdict(known, message, run_id)
        if verdict == "refused" and not (accept_any or known.hidden_loaded):
            await known.load_hidden()  # a hidden message echoed by the client is stored
            verdict, stored_id, built = await _verdict(known, message, run_id)
        if verdict == "refused" and accept_any:
            verdict = "new"
        if verdict == "refused":
            reason = (
                f"message {message.id!r} (role {message.role!r}) is not stored in this chat; "
                "only user messages and results of stored tool calls may be new"
            )
            return [], reason
        if verdict == "new":
            stored = built if built is not None else message_from_agui(message, run_id=run_id)
            if replaced:
                stored.metadata = {**stored.metadata, SURROGATES_NOTE: replaced}
            if stored_id != message.id:
                stored.agui_id = stored_id
                stored.metadata = {**stored.metadata, REUSED_ID_NOTE: message.id}
                _log.warning(
                    "threadkeep: run %r: message id %r is stored already with other content; "
                    "the new message is stored as %r",
                    run_id,
                    message.id,
                    stored_id,
                )
            new.append(stored)
            known.add(stored)
    return new, None


async def _verdict(
    known: _Known, message: AguiMessage, run_id: str
) -> tuple[str, str, Message | None]:
    """Return ``(verdict, id, message)`` for one inbound message.

    The verdict is ``stored``/``new``/``refused``, the id the one it is stored under, and
    the message the ``Message`` it was compared as (``None``: none was built).
    """
    if isinstance(message, UserMessage):
        return await _user_verdict(known, message, run_id)
    return await _other_verdict(known, message), message.id, None


async def _user_verdict(
    known: _Known, message: UserMessage, run_id: str
) -> tuple[str, str, Message]:
    inbound = message_from_agui(message, run_id=run_id)  # stored as it is when new
    for n in itertools.count(1):
        candidate = message.id if n == 1 else f"{message.id}#{n}"
        held = await known.holder(candidate)
        if held is None:
            # Taken by a hidden message (delete_messages) only: it counts as stored.
            if candidate in known.messages or (n == 1 and known.claim_same(inbound)):
                return "stored", candidate, inbound
            return "new", candidate, inbound
        if same_message(held, inbound):
            return "stored", candidate, inbound
    raise AssertionError("unreachable")  # pragma: no cover


async def _other_verdict(known: _Known, message: AguiMessage) -> str:
    if await known.message(message.id):
        return "stored"
    if known.claim_same(message_from_agui(message, run_id="")):
        return "stored"  # a stored message the client echoes under a snapshot's fresh id
    if isinstance(message, ToolMessage):
        answers_stored_call = await known.tool_call(message.tool_call_id)
        return "new" if answers_stored_call else "refused"
    if isinstance(message, AssistantMessage):
        stored = await _assistant_stored(known, message)
    elif isinstance(message, ReasoningMessage):
        stored = await known.reasoning(message.id)
    else:
        stored = False
    return "stored" if stored else "refused"


async def _assistant_stored(known: _Known, message: AssistantMessage) -> bool:
    if await known.tool_call(message.id):
        return True
    calls = message.tool_calls or []
    return bool(calls) and all([await known.tool_call(c.id) for c in calls])


def _echo_of(stored: Message, inbound: Message) -> bool:
    """Whether ``inbound`` is ``stored`` echoed under another id (``_Known.claim_same``).

    Role, content, parts and the tool call answered agree, and every tool call the echo
    carries is one of the stored message's (LlamaIndex's snapshot drops them). The content
    and arguments may be those a disagreeing ``MESSAGES_SNAPSHOT`` gave (``held_texts``):
    the client holds the snapshot's.
    """
    stored_calls = held_calls(stored)
    return (
        stored.role == inbound.role
        and inbound.content in held_texts(stored)
        and [p.model_dump() for p in stored.parts] == [p.model_dump() for p in inbound.parts]
        and stored.tool_call_ref == inbound.tool_call_ref
        and all((c.agui_id, c.name, c.arguments) in stored_calls for c in inbound.tool_calls)
    )


def same_message(stored: Message, inbound: Message) -> bool:
    """Whether an inbound message is the stored one sent again (its run aside).

    Compares what the client sent: role, content, parts, the tool call answered and the
    nested tool calls and reasonings (ids, names, arguments, content), not ``run_id`` or
    anything the store assigned.

    Args:
        stored: The stored message with the inbound message's ``agui_id``.
        inbound: The inbound message, as :func:`classify_inbound` would store it.

    Returns:
        ``True`` when they are the same message.
    """

    def sent(message: Message) -> tuple[object, ...]:
        return (
            message.role,
            message.content,
            [p.model_dump() for p in message.parts],
            message.tool_call_ref,
            [(c.agui_id, c.name, c.arguments) for c in message.tool_calls],
            [(r.agui_id, r.content) for r in message.reasonings],
        )

    return sent(stored) == sent(inbound)


def newest_ids(inbound: Sequence[AguiMessage]) -> list[str]:
    """Return the ids of the inbound messages from the last user message on.

    What a client added since its last run (the rest it echoes: the chat's context holds
    it), which ``StorageAgent`` looks up with the context in one read
    (``Store.run_context``); any other id is looked up when needed. Ids holding a lone
    surrogate are left out (they are looked up repaired).

    Args:
        inbound: ``RunAgentInput.messages``.

    Returns:
        The ids, in input order.
    """
    users = [i for i, m in enumerate(inbound) if m.role == "user"]
    start = users[-1] if users else max(len(inbound) - 1, 0)
    return [m.id for m in inbound[start:] if isinstance(m.id, str) and _encodable(m.id)]


def _encodable(text: str) -> bool:
    # An id with a lone surrogate is looked up repaired (``_inbound``), never as sent.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
