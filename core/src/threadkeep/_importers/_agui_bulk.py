"""The bulk path of ``import --format agui``: recorded runs folded in memory, many per write.

A recorded run replayed through :class:`threadkeep.agui.StorageAgent` against the store
costs its lookups, ``begin_run``, ``end_run`` and reads back: several round trips for a run
of perhaps twenty messages. For a run whose chat does not exist yet, the same agent folds
the same events against :class:`RecordingStore` instead: a stand-in for the store that
answers the agent's reads from what the run has "written" so far (an empty chat, then the
run's input) and records its writes. What it recorded (the chat, the run's input and
records, its steps, the ended run) then goes to ``Store.load_chats`` with many other runs'
chats in one batch. So what is stored is exactly what the agent stores, through the same
fold; only the writes are batched.

The stand-in answers what a single run of a new chat asks in the ordinary case. Anything
else (the agent asks something it does not emulate, an inbound id repeated with another
payload, a message of the run reusing the id of its input with other content, a
compaction boundary, a durable step, a record the store would refuse) raises
:class:`Unsupported`, and the importer takes the ordinary path for that chat instead:
nothing was written, and the ordinary path decides as it always did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
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

__all__ = ["CHAT_PROOF", "RecordingStore", "Unsupported", "chat_proof"]

CHAT_PROOF = "agui_import"
"""Chat ``metadata`` key of the proof that an import stored all of a chat's runs:
``{"digest": ..., "counts": {"messages": n, "tool_calls": m}}``."""

_MAPPING = "agui-1"
"""Part of every chat proof: change it when the fold's results change for the same stream."""


class Unsupported(Exception):
    """The recorded run needs the ordinary path (see the module docstring)."""


def chat_proof(thread_key: str, run_digests: Sequence[str]) -> str:
    """Return the proof digest of chat ``thread_key`` holding these recordings' runs, in order."""
    text = json.dumps([_MAPPING, thread_key, *run_digests], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RecordingStore:
    """The store as one run of a new chat sees it, recording the run's writes.

    Args:
        store: The real store (its limits, clock and checks).
        chat: The chat the run's chat will be (not stored yet).

    Attributes:
        input: The run's input messages (``begin_run``), checked and encoded.
        records: Its records (``end_run``), checked and encoded, those its input holds
            already (same id and payload) left out.
        steps: Its steps, as ``end_run`` received them.
        run: The run record as the two writes leave it (``revision`` 1), once ended.
    """

    def __init__(self, store: Store, chat: Chat) -> None:
        self._store = store
        self._chat = chat
        self.input: list[PreparedMessage] = []
        self.records: list[PreparedMessage] = []
        self.steps: list[Step] = []
        self.run: Run | None = None
        self._begun: Run | None = None
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
        """An empty chat's context: nothing, and no message holding any id."""
        self._require_empty()
        return [], {}

    async def scan_messages(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Message]:
        """An empty chat's messages (hidden ones included): none."""
        self._require_empty()
        return []

    async def get_message_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Message | None:
        """The run's input message holding ``agui_id`` (all the chat holds while it folds)."""
        return next((p.message for p in self.input if p.message.agui_id == agui_id), None)

    async def get_tool_call_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> ToolCall | None:
        """A tool call of the run's input with ``agui_id``."""
        calls = (c for p in self.input for c in p.message.tool_calls if c.agui_id == agui_id)
        return next(calls, None)

    async def get_reasoning_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Reasoning | None:
        """A reasoning of the run's input with ``agui_id``."""
        found = (r for p in self.input for r in p.message.reasonings if r.agui_id == agui_id)
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
        if self._begun is not None:
            raise Unsupported("a second run of the chat")
        self.input = _unique(self._prepared(messages), {})
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
        held = {p.message.agui_id: p for p in self.input if p.message.agui_id is not None}
        self.records = _unique(self._prepared(messages), held)
        self.steps = list(steps)
        self.run = run
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

    def _require_empty(self) -> None:
        if self._begun is not None:
            raise Unsupported("a read of the chat after the run began")

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


def _unique(
    prepared: list[PreparedMessage], held: Mapping[str, PreparedMessage]
) -> list[PreparedMessage]:
    """Leave out repeats of stored or earlier ids with the same payload, as an append does.

    Raises:
        Unsupported: If an id repeats with another payload (the store's
            ``IdempotencyConflict``: the ordinary path then writes the run one by one).
    """
    seen = dict(held)
    unique = []
    for item in prepared:
        agui_id = item.message.agui_id
        earlier = seen.get(agui_id) if agui_id is not None else None
        if earlier is not None:
            if earlier.fingerprint != item.fingerprint:
                raise Unsupported(f"message id {agui_id!r} repeats with another payload")
            continue
        if agui_id is not None:
            seen[agui_id] = item
        unique.append(item)
    return unique


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
