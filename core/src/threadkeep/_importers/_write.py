"""The write step of record importers: check everything, then bulk-load, with import proofs.

An importer of records (one chat per record, such as ``--format openai``) hands
:func:`import_records` a function converting one record. The file is read in two passes
(:func:`._files.iter_records`; a large JSON Lines file is streamed, so memory holds one
record at a time, not the file):

1. **check**: every record is converted (and so checked) before anything is written; one
   that a previous import stored whole (its chat holds the record's digest, see
   :func:`record_digest`) is found with one read and not converted at all;
2. **write**: each other record's chat is created if needed, its messages go in through
   ``Store.load_messages`` (``COPY`` on PostgreSQL), and only then its digest is written to
   the chat's ``metadata["source"]["digest"]``: the proof that the record is stored whole.

A small file's conversions are kept between the passes; a large file's records are read and
converted again in the second pass instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._content import PreparedMessage, validate_model
from .._errors import IdempotencyConflict, InvalidArgument
from .._models import Message
from .._records import record_body
from . import ImportReport, ProgressCallback
from ._files import STREAM_BYTES, iter_records

if TYPE_CHECKING:
    from .._models import Chat
    from .._store import Store

__all__ = ["Conversation", "import_records", "record_digest"]

LOAD_BATCH = 5000
"""Messages per batch of ``load_messages``; a longer record is loaded in several batches."""


class Conversation(Protocol):
    """One converted record: its chat's key, name and metadata, and its messages."""

    @property
    def thread_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def where(self) -> str: ...


Convert = Callable[[Any, int, int | None], Conversation]
"""``convert(record, index, line)``: the record's conversation; raises ``InvalidArgument``."""
ThreadOf = Callable[[int, Any], str]
"""``thread_of(index, record)``: the record's ``thread_id`` (cheap, no conversion)."""
CountOf = Callable[[Any], tuple[int, int]]
"""``count_of(record)``: the record's ``(messages, tool calls)`` without converting it."""


def record_digest(record: Any, mapping: str) -> str:
    """Return the SHA-256 (hex) of a record's JSON and the mapping's version (its proof).

    Args:
        record: The record as read from the file.
        mapping: The importer's mapping version: a new version makes every record new.
    """
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(f"{mapping}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


async def import_records(
    store: Store,
    source: Path,
    *,
    user_id: str,
    progress: ProgressCallback | None,
    mapping: str,
    convert: Convert,
    thread_of: ThreadOf,
    count_of: CountOf,
) -> ImportReport:
    """Import a file of records in the two passes of the module docstring.

    Raises:
        InvalidArgument: If the file or a record is malformed, a chat could not be stored,
            or two records share a ``thread_id``; raised in the check pass, nothing written.
        IdempotencyConflict: If a record was imported before with other content.
        ThreadkeepError: Any error of the store; records before stay imported.
    """
    keep = _size(source) <= STREAM_BYTES
    digests: list[str] = []
    present: dict[int, ImportReport] = {}
    kept: dict[int, Conversation] = {}
    first_at: dict[str, tuple[int, int | None]] = {}
    refused: InvalidArgument | None = None
    for index, (record, line) in enumerate(iter_records(source)):
        digests.append(record_digest(record, mapping))
        thread = thread_of(index, record) if isinstance(record, dict | list) else None
        if thread is not None and thread not in first_at:
            first_at[thread] = (index, line)
            found = await _proven(
                store, user_id, thread, digest=digests[index], count_of=count_of, record=record
            )
            if found is not None:
                present[index] = found
                continue
        conversation = convert(record, index, line)
        if refused is None:
            refused = _chat_problem(store, user_id, conversation, first_at=first_at, index=index)
        if keep:
            kept[index] = conversation
    if refused is not None:
        raise refused
    return await _write(
        store,
        source,
        user_id=user_id,
        progress=progress,
        digests=digests,
        present=present,
        kept=kept,
        convert=convert,
    )


async def _write(
    store: Store,
    source: Path,
    *,
    user_id: str,
    progress: ProgressCallback | None,
    digests: Sequence[str],
    present: dict[int, ImportReport],
    kept: dict[int, Conversation],
    convert: Convert,
) -> ImportReport:
    total = len(digests)
    report = ImportReport()
    for found in present.values():
        report.merge(found)
    if progress is not None:
        progress(0, total)  # checked: writing starts
        if present:
            progress(len(present), total)
    done = len(present)
    records = iter_records(source) if len(kept) < total - len(present) else None
    for index in range(total):
        record, line = next(records) if records is not None else (None, None)
        if index in present:
            continue
        conversation = kept.pop(index, None) or convert(record, index, line)
        report.merge(await store_conversation(store, user_id, conversation, digests[index]))
        done += 1
        if progress is not None:
            progress(done, total)
    return report


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_records names the problem


async def _proven(
    store: Store, user_id: str, thread: str, *, digest: str, count_of: CountOf, record: Any
) -> ImportReport | None:
    """The counts of a record stored whole by an earlier import (one read), or ``None``."""
    try:
        thread.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate in the id: refused by the conversion
    chat = await store.find_chat(user_id, thread)
    source = chat.metadata.get("source") if chat is not None else None
    if not isinstance(source, dict) or source.get("digest") != digest:
        return None
    counts = source.get("counts")
    messages, calls = (
        (counts.get("messages"), counts.get("tool_calls"))
        if isinstance(counts, dict)
        else (None, None)
    )
    if type(messages) is not int or type(calls) is not int:
        # The counts written with the proof are the converted ones; count_of is the fallback
        # for proofs written before the counts were.
        messages, calls = count_of(record)
    return ImportReport(chats_present=1, messages_present=messages, tool_calls_present=calls)


def _chat_problem(
    store: Store,
    user_id: str,
    conversation: Conversation,
    *,
    first_at: dict[str, tuple[int, int | None]],
    index: int,
) -> InvalidArgument | None:
    """What the store would refuse about the record's chat, or a repeated id; or ``None``."""
    chat: Chat = validate_model(
        store.chat_model,
        {
            "user_id": user_id,
            "thread_id": conversation.thread_id,
            "name": conversation.name,
            "metadata": conversation.metadata,
        },
    )
    try:
        record_body(chat)
    except InvalidArgument as exc:
        return type(exc)(f"{conversation.where}: {exc}")
    earlier, line = first_at.setdefault(conversation.thread_id, (index, None))
    if earlier != index:
        shown = f"record {earlier}" + (f" (line {line})" if line is not None else "")
        return InvalidArgument(
            f"{conversation.where} has the same id as {shown}; ids within a file must be "
            'unique (5 and "5" are the same id)'
        )
    return None


async def store_conversation(
    store: Store, user_id: str, conversation: Conversation, digest: str | None = None
) -> ImportReport:
    """Store one record's chat and messages (``Store.load_messages``), then its digest.

    With ``digest`` (see :func:`record_digest`), the chat's ``metadata["source"]`` gets it
    and the record's converted ``counts`` (messages, tool calls), the proof a re-import
    reads; without it (an importer that converts whole files, see ``_native``), no proof is
    written.

    Raises:
        IdempotencyConflict: If the chat holds a message of the record with other content.
        ThreadkeepError: Any error of the store.
    """
    report = ImportReport()
    chat = await store.find_chat(user_id, conversation.thread_id)
    if chat is None:
        chat = await store.create_chat(
            user_id,
            conversation.thread_id,
            name=conversation.name,
            metadata=conversation.metadata,
        )
        report.chats_created += 1
    else:
        report.chats_present += 1
    try:
        loaded = await store.load_messages(
            chat.chat_id, _loadable(conversation), batch_size=LOAD_BATCH
        )
    except IdempotencyConflict as exc:
        msg = (
            f"{conversation.where} was imported before with different content (chat "
            f"{chat.chat_id}); import it under another --user, or delete that chat first"
        )
        raise IdempotencyConflict(msg) from exc
    report.messages_created += loaded.created
    report.messages_present += loaded.present
    report.tool_calls_created += loaded.tool_calls_created
    report.tool_calls_present += loaded.tool_calls_present
    if digest is None:
        return report
    # Written last: a digest in the chat proves every message of the record is stored.
    counts = {
        "messages": len(conversation.messages),
        "tool_calls": sum(len(m.tool_calls) for m in conversation.messages),
    }
    source = {**conversation.metadata.get("source", {}), "digest": digest, "counts": counts}
    await store.update_chat(chat.chat_id, metadata={**chat.metadata, "source": source})
    return report


def _loadable(conversation: Conversation) -> Sequence[Message | PreparedMessage]:
    """The conversation's messages as prepared by its check, else the messages themselves.

    A conversation may carry ``prepared``: what the check pass made of each message (its
    body and fingerprint), so ``load_messages`` does not encode them again. It is used
    only when it holds exactly the conversation's message objects, in order.
    """
    prepared: Sequence[PreparedMessage] = getattr(conversation, "prepared", ())
    messages = conversation.messages
    if len(prepared) == len(messages) and all(
        item.message is message for item, message in zip(prepared, messages, strict=True)
    ):
        return prepared
    return messages
