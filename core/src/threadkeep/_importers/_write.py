"""The write step of record importers: check everything, then bulk-load, with import proofs.

An importer of records (one chat per record, such as ``--format openai``) hands
:func:`import_records` a function converting one record. The file is read in two passes
(:func:`._files.iter_records`; a large JSON Lines file is streamed, so memory holds one
record at a time, not the file):

1. **check**: every record is converted (and so checked) before anything is written; one
   that a previous import stored whole (its chat holds the record's digest, see
   :func:`record_digest`) is found and not converted at all. The chats are looked up
   :data:`._bulk.LOOKUP_BATCH` records per read (``Store.find_chats``);
2. **write**: records whose chat does not exist go in batches of about
   :data:`._bulk.WRITE_MESSAGES` messages through ``Store.load_chats`` (one transaction per
   batch on SQL: the chats, their messages and their digests together); a record whose chat
   exists, or with more messages than a batch, gets its chat created if needed, its
   messages through ``Store.load_messages`` (``COPY`` on PostgreSQL), and only then its
   digest in the chat's ``metadata["source"]["digest"]``. Either way the digest is the
   proof that the record is stored whole.

A small file's conversions are kept between the passes; a large file's records are read and
converted again in the second pass instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._content import PreparedMessage, validate_model
from .._errors import IdempotencyConflict, InvalidArgument
from .._models import Message
from .._records import record_body
from .._store_args import as_key
from . import ImportReport, ProgressCallback
from ._bulk import LOOKUP_BATCH, WRITE_MESSAGES, ChatBatch, Conversation, proof_of
from ._files import STREAM_BYTES, iter_records

if TYPE_CHECKING:
    from .._models import Chat
    from .._store import Store

__all__ = ["Conversation", "import_records", "record_digest"]

LOAD_BATCH = 5000
"""Messages per batch of ``load_messages``; a longer record is loaded in several batches."""

_WINDOW_BYTES = 16 * 1024 * 1024
"""Characters of record JSON the check pass holds while their chats are looked up."""


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
    return _digest_and_size(record, mapping)[0]


def _digest_and_size(record: Any, mapping: str) -> tuple[str, int]:
    """:func:`record_digest` and the length of the record's JSON text (characters)."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    data = f"{mapping}\0{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest(), len(text)


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
    check = _Check(
        store,
        user_id,
        keep=_size(source) <= STREAM_BYTES,
        mapping=mapping,
        convert=convert,
        thread_of=thread_of,
        count_of=count_of,
    )
    for index, (record, line) in enumerate(iter_records(source)):
        await check.add(index, record, line)
    await check.finish()
    if check.refused is not None:
        raise check.refused
    return await _write(store, source, user_id=user_id, progress=progress, check=check)


@dataclass
class _Check:
    """The check pass: digests, proof reads in batches (``find_chats``), conversions."""

    store: Store
    user_id: str
    keep: bool
    mapping: str
    convert: Convert
    thread_of: ThreadOf
    count_of: CountOf
    digests: list[str] = field(default_factory=list)
    present: dict[int, ImportReport] = field(default_factory=dict)
    existing: set[int] = field(default_factory=set)
    """Records whose chat exists without their proof: the one-record path writes them."""
    kept: dict[int, Conversation] = field(default_factory=dict)
    first_at: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    refused: InvalidArgument | None = None
    window: list[tuple[int, Any, int | None, str | None]] = field(default_factory=list)
    window_bytes: int = 0

    async def add(self, index: int, record: Any, line: int | None) -> None:
        """Take the next record; records are looked up and converted a window at a time."""
        digest, size = _digest_and_size(record, self.mapping)
        self.digests.append(digest)
        thread = self.thread_of(index, record) if isinstance(record, dict | list) else None
        self.window.append((index, record, line, thread))
        self.window_bytes += size
        if len(self.window) >= LOOKUP_BATCH or self.window_bytes >= _WINDOW_BYTES:
            await self.finish()

    async def finish(self) -> None:
        """Look up the window's chats in one read, then check each of its records."""
        window, self.window, self.window_bytes = self.window, [], 0
        wanted = [t for _, _, _, t in window if t is not None and t not in self.first_at]
        found = await self.store.find_chats(self.user_id, [t for t in wanted if _lookable(t)])
        for index, record, line, thread in window:
            if thread is not None and thread not in self.first_at:
                self.first_at[thread] = (index, line)
                chat = found.get(thread)
                proven = _proven(chat, self.digests[index], self.count_of, record)
                if proven is not None:
                    self.present[index] = proven
                    continue
                if chat is not None:
                    self.existing.add(index)
            conversation = self.convert(record, index, line)
            if self.refused is None:
                self.refused = _chat_problem(
                    self.store, self.user_id, conversation, first_at=self.first_at, index=index
                )
            if self.keep:
                self.kept[index] = conversation


async def _write(
    store: Store,
    source: Path,
    *,
    user_id: str,
    progress: ProgressCallback | None,
    check: _Check,
) -> ImportReport:
    total, present, kept = len(check.digests), check.present, check.kept
    report = ImportReport()
    for found in present.values():
        report.merge(found)
    if progress is not None:
        progress(0, total)  # checked: writing starts
        if present:
            progress(len(present), total)
    done = len(present)
    batch = ChatBatch(store, user_id)
    waiting = 0  # records in the batch, reported once it is written

    async def flush() -> None:
        nonlocal done, waiting
        written, taken = await batch.flush()
        report.merge(written)
        for conversation in taken:  # created meanwhile by someone else: checked one by one
            digest = _digest_of(conversation, check)
            report.merge(await store_conversation(store, user_id, conversation, digest))
        for _ in range(waiting):  # each record of the batch is stored now
            done += 1
            if progress is not None:
                progress(done, total)
        waiting = 0

    records = iter_records(source) if len(kept) < total - len(present) else None
    for index in range(total):
        record, line = next(records) if records is not None else (None, None)
        if index in present:
            continue
        conversation = kept.pop(index, None) or check.convert(record, index, line)
        messages = _loadable(conversation)
        if index in check.existing or len(messages) > WRITE_MESSAGES:
            part = await store_conversation(store, user_id, conversation, check.digests[index])
            report.merge(part)
            done += 1
            if progress is not None:
                progress(done, total)
            continue
        batch.add(conversation, check.digests[index], messages)
        waiting += 1
        if batch.full():
            await flush()
    await flush()
    return report


def _digest_of(conversation: Conversation, check: _Check) -> str:
    """The digest of the record a conversation came from (its chat's first record)."""
    index, _ = check.first_at[conversation.thread_id]
    return check.digests[index]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_records names the problem


def _lookable(thread: str) -> bool:
    """Whether a thread id can be looked up; any other is refused by the conversion."""
    try:
        thread.encode("utf-8")  # a lone surrogate in the id
        as_key(thread, "thread_id")
    except (UnicodeEncodeError, InvalidArgument):
        return False
    return True


def _proven(chat: Chat | None, digest: str, count_of: CountOf, record: Any) -> ImportReport | None:
    """The counts of a record its chat proves stored whole by an earlier import, or ``None``."""
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
    await store.update_chat(
        chat.chat_id, metadata={**chat.metadata, **proof_of(conversation, digest)}
    )
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
