"""The bulk path of ``import --format agui``: recorded runs folded in memory, many per write.

A recorded run replayed through :class:`threadkeep.agui.StorageAgent` against the store
costs its lookups, ``begin_run``, ``end_run`` and reads back: several round trips for a run
of perhaps twenty messages. For the runs of a chat that does not exist yet, the same agent
folds the same events against :class:`RecordingStore` instead: a stand-in for the store
that answers the agent's reads from what the chat's runs have "written" so far (an empty
chat, then each run's input and records, in order: a second run reads what the first
wrote) and records their writes. What it recorded (the chat, every run's input and
records, their steps, the ended runs) then goes to ``Store.load_chats`` with many other
chats in one batch. So what is stored is exactly what the agent stores, through the same
fold; only the writes are batched.

The stand-in answers what the runs of a new chat ask in the ordinary case. Anything else
(the agent asks something it does not emulate, a read while a run is open, an inbound id
repeated with another payload, a message reusing an id the chat holds with other content,
a compaction boundary, a durable step, a record the store would refuse) raises
:class:`Unsupported`, and the importer takes the ordinary path for that chat instead:
nothing was written, and the ordinary path decides as it always did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID, uuid4

from .._boundary_rules import is_compaction
from .._content import PreparedMessage, check_content, validate_model
from .._encode_bulk import encode_for_load
from .._errors import ThreadkeepError
from .._models import Chat, Message, Reasoning, ToolCall
from .._records import record_body
from .._runs import Run, RunStatus, Step
from .._store_load import _for_chat as for_chat

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["CHAT_PROOF", "NAMES", "RecordingStore", "Unsupported", "chat_proof"]

CHAT_PROOF = "agui_import"
"""Chat ``metadata`` key of the proof that an import stored all of a chat's runs:
``{"digest": ..., "counts": {"messages": n, "tool_calls": m}, "names": NAMES}``."""

NAMES = "path"
"""The proof's ``names``: the chat's recordings are named by their paths under the imported
directory. A proof without it was written by an import that named a loose file by its file
name alone (before session 25); see ``agui._keep_old_keys``."""

_MAPPING = "agui-1"
"""Part of every chat proof: change it when the fold's results change for the same stream."""


class Unsupported(Exception):
    """The recorded run needs the ordinary path (see the module docstring)."""


def chat_proof(thread_key: str, run_digests: Sequence[str]) -> str:
    """Return the proof digest of chat ``thread_key`` holding these recordings' runs, in order."""
    text = json.dumps([_MAPPING, thread_key, *run_digests], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RecordingStore:
    """The store as the runs of one new chat see it, recording their writes.

    Args:
        store: The real store (its limits, clock and checks).
        chat: The chat the runs' chat will be (not stored yet).

    Attributes:
        messages: Every message the runs wrote (inputs and records, checked and encoded),
            in the order the store would give them ``seq``; a repeat of a held id with the
            same payload is left out, as an append leaves it out.
        steps: The runs' steps, as ``end_run`` received them.
        runs: The run records as the two writes of each leave them (``revision`` 1).
    """

    def __init__(self, store: Store, chat: Chat) -> None:
        self._store = store
        self._chat = chat
        self.messages: list[PreparedMessage] = []
        self.steps: list[Step] = []
        self.runs: list[Run] = []
        self._begun: Run | None = None
        self._by_id: dict[str, int] = {}  # agui_id -> position in ``messages``
        self._views: list[Message] = []
        self.unsupported: str | None = None

    def as_store(self) -> Store:
        """This object typed as the store the agent takes (it implements what it calls)."""
        return cast("Store", self)

    def __getattr__(self, name: str) -> Any:
        self.unsupported = name
        raise Unsupported(f"the bulk import does not emulate Store.{name}")

    # -- what the agent reads ---------------------------------------------------------------

    @property
    def max_message_bytes(self) -> int:
        """The real store's limit."""
        return self._store.max_message_bytes

    async def find_chat(
        self, user_id: str, thread_id: str, *, tenant_id: str | None = None
    ) -> Chat | None:
        """The new chat (the importer creates it before the ordinary path's agent runs)."""
        chat = self._chat
        return chat if (user_id, thread_id, tenant_id) == _key(chat) else None

    async def run_context(
        self, chat_id: UUID | str, *, agui_ids: Sequence[str] = ()
    ) -> tuple[list[Message], dict[str, Message]]:
        """The chat's context (every message so far) and the messages holding ``agui_ids``."""
        self._require_idle()
        views = self._messages_as_read()
        held = {i: views[self._by_id[i]] for i in agui_ids if i in self._by_id}
        return list(views), held

    async def scan_messages(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Message]:
        """The chat's messages after ``after_seq`` (none is hidden), oldest first."""
        self._require_idle()
        return [m for m in self._messages_as_read() if (m.seq or 0) > after_seq][:limit]

    async def get_message_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Message | None:
        """The message of the chat holding ``agui_id``, if any."""
        position = self._by_id.get(agui_id)
        return None if position is None else self._messages_as_read()[position]

    async def get_tool_call_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> ToolCall | None:
        """A tool call of the chat's messages with ``agui_id``."""
        calls = (c for p in self.messages for c in p.message.tool_calls if c.agui_id == agui_id)
        return next(calls, None)

    async def get_reasoning_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Reasoning | None:
        """A reasoning of the chat's messages with ``agui_id``."""
        found = (r for p in self.messages for r in p.message.reasonings if r.agui_id == agui_id)
        return next(found, None)

    # -- what the agent writes --------------------------------------------------------------

    async def begin_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        lease_seconds: float = 60.0,
        messages: Sequence[Message] = (),
    ) -> Run:
        """Record the run's input; return the run as ``begin_run`` stores it (active)."""
        self._require_idle()
        if any(run.run_id == run_id for run in self.runs):
            raise Unsupported("a run id the chat has ended already")
        self._append(self._prepared(messages))
        now = self._store.now()
        self._begun = Run(
            chat_id=self._chat.chat_id,
            run_id=run_id,
            owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            created_at=now,
            updated_at=now,
        )
        return self._begun

    async def end_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        status: RunStatus | str,
        messages: Sequence[Message] = (),
        steps: Sequence[Step] = (),
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
        current: Run | None = None,
    ) -> Run:
        """Record the run's records and steps; return the run as ``end_run`` leaves it.

        Checked as ``Store.end_run`` checks them; what it would refuse is
        :class:`Unsupported` (the ordinary path then reports it as it always did).
        """
        begun = self._begun
        if begun is None or run_id != begun.run_id or owner != begun.owner:
            raise Unsupported("end_run of a run this stand-in did not begin")
        try:
            ending = RunStatus(status)
            check_content(metadata, "metadata")
            for step in steps:
                record_body(step)
            changes = {
                "status": ending,
                "error": error,
                "lease_expires_at": None,
                "updated_at": self._store.now(),
                "metadata": {**begun.metadata, **(metadata or {})},
                "revision": 1,  # inserted by begin_run, replaced once by end_run
            }
            run = validate_model(Run, {**begun.model_dump(), **changes})
            record_body(run)
        except (ThreadkeepError, ValueError) as exc:
            raise Unsupported(f"end_run would refuse the run: {exc}") from exc
        if ending is RunStatus.ACTIVE or any(s.chat_id != self._chat.chat_id for s in steps):
            raise Unsupported("end_run would refuse the run")
        self._append(self._prepared(messages))
        self.steps += steps
        self.runs.append(run)
        self._begun = None
        return run

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """A step stored before the run's end (a completed tool): the ordinary path's."""
        self.unsupported = "save_steps"
        raise Unsupported("a durable step")

    async def heartbeat_run(self, chat_id: UUID | str, run_id: str, **_: Any) -> Run:
        """A lease renewal (a fold longer than a third of the lease): the ordinary path's."""
        self.unsupported = "heartbeat_run"  # raised where the agent may catch it: noted too
        raise Unsupported("a heartbeat")

    # -- helpers ---------------------------------------------------------------------------

    def holds(self, agui_id: str) -> Message | None:
        """The message holding ``agui_id`` (for the importer's counts), if any."""
        position = self._by_id.get(agui_id)
        return None if position is None else self.messages[position].message

    def _require_idle(self) -> None:
        if self._begun is not None:
            raise Unsupported("a read of the chat while a run is open")

    def _messages_as_read(self) -> list[Message]:
        """The messages as a read returns them: with the ``seq`` the load gives them."""
        views = self._views
        for seq in range(len(views) + 1, len(self.messages) + 1):
            views.append(self.messages[seq - 1].message.model_copy(update={"seq": seq}))
        return views

    def _append(self, prepared: list[PreparedMessage]) -> None:
        """Append as the store appends: a held id with the same payload is left out.

        Raises:
            Unsupported: If an id repeats with another payload (the store's
                ``IdempotencyConflict``: the ordinary path then writes the run one by one).
        """
        for item in prepared:
            agui_id = item.message.agui_id
            position = self._by_id.get(agui_id) if agui_id is not None else None
            if position is not None:
                if self.messages[position].fingerprint != item.fingerprint:
                    raise Unsupported(f"message id {agui_id!r} repeats with another payload")
                continue
            if agui_id is not None:
                self._by_id[agui_id] = len(self.messages)
            self.messages.append(item)

    def _prepared(self, messages: Sequence[Message]) -> list[PreparedMessage]:
        """The messages checked and encoded as the store would (``Store.prepare``)."""
        prepared = []
        for message in messages:
            if not isinstance(message, Message) or is_compaction(message):
                raise Unsupported("a compaction boundary or a message of another kind")
            try:  # what Store.prepare gives, with less work (the bulk load's encoder)
                fresh = for_chat(message, self._chat.chat_id)
                prepared.append(encode_for_load(fresh, self._store.max_message_bytes))
            except ThreadkeepError as exc:
                raise Unsupported(f"the store would refuse a message: {exc}") from exc
        return prepared


def _key(chat: Chat) -> tuple[str, str, str | None]:
    return chat.user_id, chat.thread_id, chat.tenant_id


def new_chat(store: Store, user_id: str, thread_id: str, name: str) -> Chat:
    """The chat ``create_chat(user_id, thread_id, name=name)`` would create (not stored)."""
    now = store.now()
    return validate_model(
        store.chat_model,
        {
            "chat_id": uuid4(),
            "user_id": user_id,
            "thread_id": thread_id,
            "name": name,
            "created_at": now,
            "updated_at": now,
        },
    )
