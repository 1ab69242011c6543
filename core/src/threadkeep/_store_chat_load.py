"""Bulk load of whole chats: new chats with their messages, runs and steps, many per write.

``load_messages`` is the bulk path into one existing chat. An import brings many small
chats (an OpenAI-format file: one per record; AG-UI recordings: one per run folder), and
per chat it would cost a lookup, ``create_chat``, the load and a final ``update_chat``:
four round trips for perhaps twenty messages. ``load_chats`` writes a batch of new chats
with everything in them through one call of the driver's ``load_chats`` primitive (one
transaction on SQL); ``find_chats`` is the lookup of many chats of one user in one read
that goes before it (``find_live_chats``).

Every record is checked as the single-record calls check it: the chat as ``create_chat``,
the messages as ``load_messages`` (encoding, ``max_message_bytes``, compaction rules, an
``agui_id`` repeated with another payload is ``IdempotencyConflict``), runs and steps as
``end_run`` and ``save_steps``; a bad item refuses the whole call before anything is
written. A chat whose key a live chat already holds is skipped whole and reported as
such, so a caller can take its slower path for exactly those.

A chat's ``proof`` (metadata entries such as an importer's digest of what it stored)
reaches the chat only together with all of its records: in the same atomic step on a
driver with the primitive, by an ``update_chat`` after them otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from ._boundary_rules import check_compactions, is_compaction
from ._content import PreparedMessage, validate_model
from ._driver import LoadedChat
from ._encode_bulk import collector_paused
from ._errors import CapabilityNotSupported, InvalidArgument
from ._models import Chat
from ._plugins import has_commit_observers, notify_messages_committed
from ._runs import Run, Step
from ._store_args import as_items, as_key, as_model, check_chat_keys
from ._store_core import Component
from ._store_load import LoadInput, _as_stored
from ._store_messages import _dedupe_batch

__all__ = ["MAX_FIND_CHATS", "ChatLoad", "ChatLoadOps", "ChatLoadResult"]

MAX_FIND_CHATS = 1000
"""Thread ids per read of ``find_chats`` (more are looked up in several reads)."""


@dataclass(frozen=True)
class ChatLoad:
    """One new chat for :meth:`threadkeep.Store.load_chats`, with everything in it.

    Attributes:
        user_id: Owner of the chat.
        thread_id: Its key within the user (and tenant).
        chat_id: Its id (default: a new one); ``runs``, ``steps`` and messages given as
            ``PreparedMessage`` name it as their chat.
        name: Display name.
        agent_id: The agent it belongs to.
        tenant_id: Its tenant (part of its key).
        metadata: Its metadata (JSON values).
        messages: Its messages in order (as ``load_messages`` takes them); they get seqs
            1, 2, ...; a repeat of an ``agui_id`` with the same payload is stored once.
        runs: Its run records (``threadkeep.Run`` of this chat, distinct ``run_id`` s),
            stored as given.
        steps: Its steps (``threadkeep.Step`` of this chat, distinct ``step_id`` s).
        proof: Metadata entries the chat gets only once all of its records are stored
            (see the module docstring).
    """

    user_id: str
    thread_id: str
    chat_id: UUID = field(default_factory=uuid4)
    name: str | None = None
    agent_id: str | None = None
    tenant_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    messages: Sequence[LoadInput] = ()
    runs: Sequence[Run] = ()
    steps: Sequence[Step] = ()
    proof: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatLoadResult:
    """What :meth:`threadkeep.Store.load_chats` did with one :class:`ChatLoad`.

    Attributes:
        created: Whether the chat was written (``False``: a live chat held its key, and
            nothing of it was written).
        chat_id: The item's ``chat_id``.
        messages: Messages stored (repeats of an ``agui_id`` in the item counted once).
        present: Messages not stored again (repeats within the item).
        tool_calls: Tool calls nested in the stored messages.
        tool_calls_present: Tool calls nested in the repeats not stored again.
    """

    created: bool
    chat_id: UUID
    messages: int = 0
    present: int = 0
    tool_calls: int = 0
    tool_calls_present: int = 0


@dataclass
class _Checked:
    loaded: LoadedChat
    proof: dict[str, Any]
    given: int
    given_calls: int


class ChatLoadOps(Component):
    """``load_chats`` and ``find_chats`` (see the module docstring)."""

    async def find_chats(
        self, user_id: str, thread_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Chat]:
        """Implement :meth:`threadkeep.Store.find_chats`."""
        self._ctx.require_open()
        user_id = as_key(user_id, "user_id")
        tenant = None if tenant_id is None else as_key(tenant_id, "tenant_id")
        ids = list(
            dict.fromkeys(as_key(t, "thread_ids[]") for t in as_items(thread_ids, "thread_ids"))
        )
        found: dict[str, Chat] = {}
        for start in range(0, len(ids), MAX_FIND_CHATS):
            part = ids[start : start + MAX_FIND_CHATS]
            found.update(await self._driver.find_live_chats(user_id, part, tenant))
        return found

    async def load_chats(self, chats: Sequence[ChatLoad]) -> list[ChatLoadResult]:
        """Implement :meth:`threadkeep.Store.load_chats`."""
        self._ctx.require_open()
        items = as_items(chats, "chats")
        native = "load_chats" in self._driver.native
        checked = [self._check(item, index, native=native) for index, item in enumerate(items)]
        keys = [_key(c.loaded.chat) for c in checked]
        if len(set(keys)) != len(keys):
            raise InvalidArgument("two chats of one load_chats call have the same key")
        if len({c.loaded.chat.chat_id for c in checked}) != len(checked):
            raise InvalidArgument("two chats of one load_chats call have the same chat_id")
        _check_message_ids(checked)
        if not checked:
            return []
        now = self._ctx.now()
        loaded = [c.loaded for c in checked]
        written = await self._driver.load_chats(_at(loaded, now), now)
        results = []
        for item, done in zip(checked, written, strict=True):
            chat = item.loaded.chat
            if done and item.proof and not native:
                # Written last: the proof says every record of the chat is stored.
                await self._ctx.chats.update_chat(
                    chat.chat_id, metadata={**chat.metadata, **item.proof}
                )
            results.append(_result(item, done))
            if done and item.loaded.messages and has_commit_observers():
                stored = [
                    _as_stored(m, chat.chat_id, seq, now)
                    for seq, m in enumerate(item.loaded.messages, start=1)
                ]
                notify_messages_committed(self, chat.chat_id, stored)
        return results

    def _check(self, item: object, index: int, *, native: bool) -> _Checked:
        """Check one item and prepare its records (see the module docstring).

        Raises:
            InvalidArgument / InvalidContent / PayloadTooLarge / IdempotencyConflict: As
                ``create_chat``, ``load_messages``, ``end_run`` and ``save_steps`` raise
                them, naming the item.
            CapabilityNotSupported: If it has runs or steps and the store lacks ``steps``.
        """
        if not isinstance(item, ChatLoad):
            raise InvalidArgument(f"chats[{index}] is a {type(item).__name__}, not a ChatLoad")
        where = f"chats[{index}]"
        proof = item.proof
        if not isinstance(proof, Mapping):
            raise InvalidArgument(f"{where}.proof must be a mapping, not {type(proof).__name__}")
        proof = dict(proof)
        chat = self._chat(item, proof)  # the proof checked here on every driver
        if proof and not native:  # written by update_chat after the records
            chat = self._chat(item, {})
        runs = [as_model(Run, r, f"{where}.runs[{i}]") for i, r in enumerate(item.runs)]
        steps = [as_model(Step, s, f"{where}.steps[{i}]") for i, s in enumerate(item.steps)]
        if (runs or steps) and not self._ctx.capabilities.steps:
            raise CapabilityNotSupported("runs and steps need the 'steps' capability")
        records: list[Run | Step] = [*runs, *steps]
        for record in records:
            if record.chat_id != chat.chat_id:
                raise InvalidArgument(f"{where}: its runs and steps are of chat {chat.chat_id}")
            self._ctx.records.record_body(record)
        if len({r.run_id for r in runs}) != len(runs):
            raise InvalidArgument(f"{where}: two runs have the same run_id")
        if len({s.step_id for s in steps}) != len(steps):
            raise InvalidArgument(f"{where}: two steps have the same step_id")
        prepared = self._messages(item.messages, chat.chat_id, where)
        unique = _dedupe_batch(prepared)[0]
        loaded = LoadedChat(chat=chat, messages=unique, runs=runs, steps=steps)
        calls = sum(len(p.message.tool_calls) for p in prepared)
        return _Checked(loaded=loaded, proof=proof, given=len(prepared), given_calls=calls)

    def _chat(self, item: ChatLoad, proof: dict[str, Any]) -> Chat:
        """The chat as ``create_chat`` builds it (timestamps set when it is written)."""
        metadata = item.metadata
        if not isinstance(metadata, Mapping):
            raise InvalidArgument(f"metadata must be a mapping, not {type(metadata).__name__}")
        chat: Chat = validate_model(
            self._ctx.records.chat_model,
            {
                "chat_id": item.chat_id,
                "user_id": as_key(item.user_id, "user_id"),
                "thread_id": as_key(item.thread_id, "thread_id"),
                **check_chat_keys(agent_id=item.agent_id, tenant_id=item.tenant_id, name=item.name),
                "metadata": {**metadata, **proof},
            },
        )
        self._ctx.records.record_body(chat)
        return chat

    def _messages(self, messages: object, chat_id: UUID, where: str) -> list[PreparedMessage]:
        """Check and encode a chat's messages as ``load_messages`` does, then its compactions."""
        items = as_items(messages, f"{where}.messages")
        prepared: list[PreparedMessage] = []
        with collector_paused():
            self._ctx.load._prepare_chunk(list(items), chat_id, None, prepared)
        batch = [p.message for p in prepared]
        if any(is_compaction(m) for m in batch):
            check_compactions(chat_id, batch, None, 0)  # a new chat: nothing stored before
        return prepared


def _check_message_ids(checked: list[_Checked]) -> None:
    """Refuse a ``message_id`` given twice in one batch (say one ``Message`` in two chats).

    A message id names one stored message: SQL's unique index would refuse the whole batch
    with a ``Conflict`` and the memory driver would store two messages under it.

    Raises:
        InvalidArgument: Naming the id and the two chats (their indexes in the call).
    """
    seen: dict[UUID, int] = {}
    for index, item in enumerate(checked):
        for prepared in item.loaded.messages:
            message_id = prepared.message.message_id
            first = seen.get(message_id)
            if first is not None:
                where = (
                    f"chats[{index}]" if first == index else f"chats[{first}] and chats[{index}]"
                )
                msg = f"{where} hold message_id {message_id} twice (give each its own Message)"
                raise InvalidArgument(msg)
            seen[message_id] = index


def _key(chat: Chat) -> tuple[str, str, str | None]:
    return chat.user_id, chat.thread_id, chat.tenant_id


def _at(loaded: list[LoadedChat], now: Any) -> list[LoadedChat]:
    """The chats with the write's timestamps (``create_chat`` sets them when it writes)."""
    stamped = {"created_at": now, "updated_at": now}
    return [
        LoadedChat(
            chat=item.chat.model_copy(update=stamped),
            messages=item.messages,
            runs=item.runs,
            steps=item.steps,
        )
        for item in loaded
    ]


def _result(item: _Checked, done: bool) -> ChatLoadResult:
    chat_id = item.loaded.chat.chat_id
    if not done:
        return ChatLoadResult(created=False, chat_id=chat_id)
    messages = item.loaded.messages
    calls = sum(len(m.message.tool_calls) for m in messages)
    return ChatLoadResult(
        created=True,
        chat_id=chat_id,
        messages=len(messages),
        present=item.given - len(messages),
        tool_calls=calls,
        tool_calls_present=item.given_calls - calls,
    )
