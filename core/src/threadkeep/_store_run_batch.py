"""A run's two batch writes: its input at entry, its records at exit.

The ``buffered`` write policy stores a run in exactly two
writes: ``begin_run`` appends the user input and takes the run's lease, ``end_run`` writes
every message and step of the run together with its end status. Each is one call of the
``commit_run`` primitive, which a transactional driver makes one atomic step.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic_core import to_json

from ._boundary_rules import is_compaction
from ._content import MAX_NESTING_DEPTH, PreparedMessage, check_content, validate_model
from ._corrupt import collecting
from ._errors import Conflict, IdempotencyConflict, InvalidArgument
from ._models import Message
from ._plugins import notify_messages_committed
from ._runs import Run, RunStatus, Step
from ._store_args import (
    as_enum,
    as_id,
    as_items,
    as_model,
    as_positive_seconds,
    as_str,
    as_text,
)
from ._store_context import trim_orphan_tool_results
from ._store_core import Component
from ._store_messages import MessageInput, _conflict_text, _dedupe_batch

if TYPE_CHECKING:
    from ._records import Records

__all__ = ["RunBatchOps"]

_CAS_ATTEMPTS = 16
_CONTEXT_BATCH = 200  # messages per read of a run's context (``ContextOps._collect_after``)


class RunBatchOps(Component):
    """``begin_run`` and ``end_run``."""

    async def begin_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        lease_seconds: float = 60.0,
        messages: Sequence[MessageInput] = (),
    ) -> Run:
        """Implement :meth:`threadkeep.Store.begin_run`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        owner = as_text(owner, "owner")
        lease = timedelta(seconds=as_positive_seconds(lease_seconds, "lease_seconds"))
        prepared = await self._prepared_batch(chat_id, messages)
        if self._commit_checks_chat():
            # The common case first, in one write: a new run of a live, hot chat. The batch
            # writes nothing otherwise, and the loop below finds out which case it is.
            now = self._ctx.now()
            fresh = _new_run(chat_id, run_id, owner, now, lease)
            result = await self._driver.commit_run(fresh, None, prepared, [], now)
            if result is not None:
                self._committed(chat_id, prepared, result[1])
                return result[0]
        for _ in range(_CAS_ATTEMPTS):
            await self._ctx.chats._require_hot_chat(chat_id)
            now = self._ctx.now()
            current = await self._driver.get_run(chat_id, run_id)
            if current is None:
                run = _new_run(chat_id, run_id, owner, now, lease)
                expected = None
            elif current.status is RunStatus.ACTIVE and current.owner == owner:
                renewal = {"lease_expires_at": now + lease, "updated_at": now}
                run = current.model_copy(update=renewal)
                expected = current.revision
            else:
                msg = f"run {run_id!r} is {current.status} under owner {current.owner!r}"
                raise Conflict(msg + "; use claim_run to resume an ended run")
            result = await self._driver.commit_run(run, expected, prepared, [], now)
            if result is not None:
                self._committed(chat_id, prepared, result[1])
                return result[0]
        raise Conflict(f"run {run_id!r} kept changing under concurrent writers")

    async def end_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        status: RunStatus | str,
        messages: Sequence[MessageInput] = (),
        steps: Sequence[Step] = (),
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
        current: Run | None = None,
    ) -> Run:
        """Implement :meth:`threadkeep.Store.end_run`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        owner = as_text(owner, "owner")
        ending = as_enum(RunStatus, status, "status")
        if ending is RunStatus.ACTIVE:
            raise InvalidArgument("end_run needs an end status, not 'active'")
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidArgument(f"metadata must be a dict, not {type(metadata).__name__}")
        check_content(metadata, "metadata")
        if error is not None and not isinstance(error, str):
            raise InvalidArgument(f"error must be a str, not {type(error).__name__}")
        given = [as_model(Step, s, f"steps[{i}]") for i, s in enumerate(as_items(steps, "steps"))]
        if any(step.chat_id != chat_id for step in given):
            raise InvalidArgument(f"end_run writes steps of chat {chat_id} only")
        for step in given:
            _check_body(self._ctx.records, step)
        prepared = await self._prepared_batch(chat_id, messages)
        known = current if isinstance(current, Run) and current.chat_id == chat_id else None
        if known is not None and known.run_id != run_id:
            known = None
        for attempt in range(_CAS_ATTEMPTS):
            # First the run alone (one read): a driver whose _commit_run checks the chat
            # writes nothing unless it is live and hot, and then the chat is looked at.
            quick = attempt == 0 and self._commit_checks_chat()
            if quick:
                current = (
                    known if known is not None else await self._driver.get_run(chat_id, run_id)
                )
            else:
                current = None
            if current is None or current.status is not RunStatus.ACTIVE or current.owner != owner:
                await self._ctx.chats._require_hot_chat(chat_id)  # ChatNotFound first, as always
                current = await self._ctx.runs.get_run(chat_id, run_id)
            if current.status is not RunStatus.ACTIVE or current.owner != owner:
                msg = f"run {run_id!r} ({current.status}, owner {current.owner!r})"
                raise Conflict(msg + f": owner {owner!r} does not hold an active lease")
            now = self._ctx.now()
            changes = {
                "status": ending,
                "error": error,
                "lease_expires_at": None,
                "updated_at": now,
                "metadata": {**current.metadata, **(metadata or {})},
            }
            run = _ended(current, changes)
            _check_body(self._ctx.records, run)
            result = await self._driver.commit_run(run, current.revision, prepared, given, now)
            if result is not None:
                self._committed(chat_id, prepared, result[1])
                return result[0]
        raise Conflict(f"run {run_id!r} kept changing under concurrent writers")

    async def run_context(
        self, chat_id: UUID | str, *, agui_ids: Sequence[str] = ()
    ) -> tuple[list[Message], dict[str, Message]]:
        """Implement :meth:`threadkeep.Store.run_context`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        ids = list(dict.fromkeys(as_str(a, "agui_ids[]") for a in as_items(agui_ids, "agui_ids")))
        with collecting(self._ctx.corrupt_records) as skipped:
            read = await self._driver.read_run_context(chat_id, ids, _CONTEXT_BATCH)
        if read is not None and not skipped:
            boundary, batch, more, held = read
            if boundary is None or not is_compaction(boundary):
                # Nothing visible follows the last boundary but messages: the batch is the
                # start of the window (a compaction's summary window takes the full path).
                body = list(batch)
                if more and batch and batch[-1].seq is not None:
                    body += await self._ctx.context._collect_after(chat_id, batch[-1].seq)
                return trim_orphan_tool_results(body), held
        # Not hot (archived: rehydrated), a compaction, or damaged rows skipped: the calls.
        context = await self._ctx.context.context_messages(chat_id)
        found: dict[str, Message] = {}
        for agui_id in ids:
            message = await self._ctx.messages.get_message_by_agui_id(chat_id, agui_id)
            if message is not None:
                found[agui_id] = message
        return context, found

    def _commit_checks_chat(self) -> bool:
        """Whether the driver's own ``commit_run`` writes nothing unless the chat is hot.

        The primitive's contract asks it; the non-atomic core default does not check the
        chat (``Store`` looks at it first), so a driver keeping that default never gets a
        batch for a chat nobody looked at.
        """
        return "commit_run" in self._driver.native

    async def _prepared_batch(
        self, chat_id: UUID, messages: Sequence[MessageInput]
    ) -> list[PreparedMessage]:
        """``append_messages``' checks and encoding of a batch (``_prepare_batch``).

        A plain message (:func:`_coerced`) is copied rather than dumped and validated
        again; any other goes through ``_coerce_message`` as before.
        """
        coerce = self._ctx.messages._coerce_message
        prepare = self._ctx.records.prepare
        prepared = [
            prepare(_coerced(m, chat_id) or coerce(m, chat_id))
            for m in as_items(messages, "messages")
        ]
        await self._ctx.messages._check_compactions(chat_id, prepared)  # as append_messages does
        return _dedupe_batch(prepared)[0]

    def _committed(
        self,
        chat_id: UUID,
        prepared: list[PreparedMessage],
        results: list[tuple[Message, bool]],
    ) -> None:
        for item, (stored, created) in zip(prepared, results, strict=True):
            if not created and self._ctx.records.fingerprint(stored) != item.fingerprint:
                raise IdempotencyConflict(_conflict_text(stored))
        created_messages = [stored for stored, created in results if created]
        if created_messages:
            notify_messages_committed(self, chat_id, created_messages)


def _check_body(records: Records, record: Run | Step) -> None:
    """Refuse a run or step its driver could not encode, before anything is written.

    Exactly what ``records.record_body`` refuses (``InvalidContent`` naming the field),
    which a driver that is not atomic would only meet half-way through its batch. A plain
    ``Run`` or ``Step`` whose every string encodes, holding no non-finite float and nested
    far less than ``MAX_NESTING_DEPTH``, is told apart in pydantic-core (its dump encoded
    once, non-finite floats spelled as JSON cannot: ``NaN``, ``Infinity``, or as keys
    ``"nan"``, ``"inf"``); anything else, or anything in doubt (a genuine U+FFFD, the
    text ``NaN``), takes ``record_body``.
    """
    if type(record) in _PLAIN_RECORDS:
        try:
            raw = to_json(record.model_dump(), inf_nan_mode="constants")
        except (ValueError, TypeError, RecursionError):
            raw = None
        if (
            raw is not None
            and not any(mark in raw for mark in _DOUBTS)
            and (raw.count(b"{") + raw.count(b"[") < MAX_NESTING_DEPTH)
        ):
            return
    records.record_body(record)


_PLAIN_RECORDS = frozenset({Run, Step})
_DOUBTS = (b"NaN", b"Infinity", b'"nan"', b'"inf"', b'"-inf"', "\ufffd".encode())
"""What a non-finite float (a value; a key), or a lone surrogate in a key, encodes to."""


def _ended(current: Run, changes: dict[str, Any]) -> Run:
    """Return ``current`` with ``changes`` (``end_run``'s), validated as the model would.

    Every change is already a value of its field's type (``end_run`` checked them), so a
    copy is the validated record, without a dump and a validation of the whole run; only
    metadata keys that are not strings take the validation (which refuses them).
    """
    if all(isinstance(key, str) for key in changes["metadata"]):
        return current.model_copy(update=changes)
    return validate_model(type(current), {**current.model_dump(), **changes})


def _coerced(message: object, chat_id: UUID) -> Message | None:
    """``_coerce_message`` of a plain message, as a copy; ``None`` for anything else.

    ``_coerce_message`` dumps a message and validates the dump with ``chat_id`` set and
    the store's fields reset. For a ``Message`` (not a subclass: its validators would run
    again) without parts, tool calls, reasonings, boundary or extra fields, whose metadata
    is plain JSON data, that gives back a copy of the message: every field already holds
    a value of its type (``validate_assignment``), and the only nested container,
    metadata, is copied (nothing is shared with the caller's message, as with the dump).
    """
    if (
        type(message) is not Message
        or message.parts
        or message.tool_calls
        or message.reasonings
        or message.boundary is not None
        or message.__pydantic_extra__
    ):
        return None
    metadata = plain_copy(message.metadata) if message.metadata else {}
    if metadata is NOT_PLAIN:
        return None
    copy = message.model_copy(update={**_RESET, "chat_id": chat_id, "metadata": metadata})
    copy.__pydantic_fields_set__ = set(_COERCED_FIELDS)  # as validating the dump sets them
    return copy


_RESET = {"seq": None, "updated_at": None, "deleted_at": None, "revision": 0}
_COERCED_FIELDS = frozenset(Message.model_fields) - {"seq", "updated_at", "deleted_at"}
NOT_PLAIN: Any = object()
"""What :func:`plain_copy` returns for a value a JSON round trip would not give back."""
_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain_copy(value: Any) -> Any:
    """A copy of ``value`` if it is plain JSON data, else :data:`NOT_PLAIN`.

    Plain JSON data: dicts with string keys, lists, strings, ints, floats, booleans and
    ``None`` (what a JSON round trip gives back equal, non-finite floats aside).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return NOT_PLAIN
            copied = plain_copy(item)
            if copied is NOT_PLAIN:
                return NOT_PLAIN
            out[key] = copied
        return out
    if kind is list:
        items = [plain_copy(item) for item in value]
        return NOT_PLAIN if any(item is NOT_PLAIN for item in items) else items
    return NOT_PLAIN


def _new_run(chat_id: UUID, run_id: str, owner: str, now: datetime, lease: timedelta) -> Run:
    """Return a new active run of ``owner`` holding a lease of ``lease`` from ``now``."""
    return Run(
        chat_id=chat_id,
        run_id=run_id,
        owner=owner,
        lease_expires_at=now + lease,
        created_at=now,
        updated_at=now,
    )
