"""Checking and writing converted conversations, shared by the native importers.

The native importers are claude-code, swe-agent and openhands.

Every importer converts its whole input first; :func:`check_conversations` then refuses
what the store would refuse (a chat that does not validate, two records with one key, a
message too large or holding a lone surrogate) before anything is written, and
:func:`store_conversations` writes them through the OpenAI importer's write step
(:func:`._write.store_conversation`: the one write helper of the importers, the bulk path
``Store.load_messages``, so every format is written the same way).

Compaction boundaries need the ``seq`` of the last message they cover, which exists only
once that message is stored: a conversation holding one is written in segments, each
boundary with ``upto_seq`` set to the stored seq of the message before it (read back by
its deterministic ``agui_id``, so a re-import computes the same boundary).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._boundary_rules import is_compaction
from .._content import dump_json, validate_model
from .._encode_bulk import encode_for_load
from .._errors import InvalidArgument
from .._models import Boundary, Message
from .._records import record_body
from . import ImportReport, ProgressCallback
from ._files import find_files
from ._shape import shape_checked
from ._write import store_conversation
from .openai import _Conversation

if TYPE_CHECKING:
    from .._store import Store

__all__ = [
    "Conversation",
    "bounded_fields",
    "check_conversations",
    "check_message",
    "import_conversations",
    "import_files",
    "store_conversations",
]

Conversation = _Conversation
"""One chat to import: ``thread_id``, ``name``, ``metadata``, ``messages`` and ``where``
(the file and record, for error messages)."""


def check_message(message: Message, where: str, max_message_bytes: int) -> Message:
    """Refuse a message the store would refuse, naming where it came from.

    Args:
        message: The converted message.
        where: The file, line and field it came from (``"s.jsonl: line 4"``).
        max_message_bytes: The store's payload limit (``store.max_message_bytes``).

    Returns:
        ``message`` itself.

    Raises:
        InvalidContent: If it holds a lone surrogate or a NaN/infinite float.
        PayloadTooLarge: If it is over the store's limits.
    """
    try:
        encode_for_load(message, max_message_bytes)
    except InvalidArgument as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    return message


def check_conversations(
    store: Store,
    user_id: str,
    conversations: Sequence[Conversation],
    source: str,
    *,
    first_with: dict[str, str] | None = None,
) -> None:
    """Refuse, before any write, chats the store would refuse and keys used twice.

    Args:
        store: The store the import writes to (its chat model validates each chat).
        user_id: The owner of the chats.
        conversations: Everything the import will write.
        source: The file or folder name, cut from the second ``where`` in the message.
        first_with: The ``where`` of each thread id checked before, for an import that
            checks its conversations in parts (updated here); ``None``: this call's alone.

    Raises:
        InvalidArgument: If a chat does not validate, its fields cannot be stored, or two
            conversations have the same ``thread_id``; naming the conversation(s).
    """
    first_with = {} if first_with is None else first_with
    for conversation in conversations:
        chat = validate_model(
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
            raise type(exc)(f"{conversation.where}: {exc}") from exc
        _refuse_reused_ids(conversation, store.max_message_bytes)
        earlier = first_with.setdefault(conversation.thread_id, conversation.where)
        if earlier is not conversation.where:
            msg = (
                f"{conversation.where} has the same chat key ({conversation.thread_id!r}) as "
                f"{earlier.removeprefix(source + ': ')}; keys within an import must be unique"
            )
            raise InvalidArgument(msg)


def _refuse_reused_ids(conversation: Conversation, max_message_bytes: int) -> None:
    """Refuse two messages of one conversation holding one ``agui_id`` with other content.

    The store dedups a batch by ``agui_id`` and refuses such a pair only once the chat
    exists (``IdempotencyConflict``, read as "imported before"); a source that repeats an
    id (two OpenHands events with one ``id``) is malformed, and is refused here, before
    anything is written. The same message repeated (the store's payload fingerprint is
    equal, as its batch check compares them) is harmless and passes.
    """
    seen: dict[str, Message] = {}
    for message in conversation.messages:
        if message.agui_id is None:
            continue
        earlier = seen.setdefault(message.agui_id, message)
        if earlier is not message and _fingerprint(earlier, max_message_bytes) != _fingerprint(
            message, max_message_bytes
        ):
            msg = (
                f"{conversation.where}: two messages have the id {message.agui_id!r} with "
                "different content; ids must be unique within a conversation"
            )
            raise InvalidArgument(msg)


def _fingerprint(message: Message, max_message_bytes: int) -> str:
    return encode_for_load(message, max_message_bytes).fingerprint


async def store_conversations(
    store: Store,
    user_id: str,
    conversations: Sequence[Conversation],
    progress: ProgressCallback | None,
) -> ImportReport:
    """Write checked conversations in order, calling ``progress`` after each.

    Args:
        store: An open store.
        user_id: The owner of the chats.
        conversations: Conversations already passed through :func:`check_conversations`.
        progress: Called as ``progress(0, total)`` first, then ``progress(done, total)``.

    Returns:
        The counts of chats, messages and tool calls created and already present.

    Raises:
        IdempotencyConflict: If a chat was imported before with other content.
        ThreadkeepError: Any error of the store; earlier conversations stay written.
    """
    report = ImportReport()
    if progress is not None:
        progress(0, len(conversations))
    for index, conversation in enumerate(conversations):
        report.merge(await _store_segments(store, user_id, conversation))
        if progress is not None:
            progress(index + 1, len(conversations))
    return report


async def _store_segments(store: Store, user_id: str, conversation: Conversation) -> ImportReport:
    report = ImportReport()
    for number, messages in enumerate(_segments(conversation.messages)):
        segment = messages
        if number and is_compaction(messages[0]):
            segment = [await _resolved(store, user_id, conversation, messages[0]), *messages[1:]]
        part = await store_conversation(store, user_id, replace(conversation, messages=segment))
        if number:  # the chat was counted with the first segment
            part.chats_created = part.chats_present = 0
        report.merge(part)
    return report


def _segments(messages: list[Message]) -> list[list[Message]]:
    """Cut before every compaction boundary that still lacks its ``upto_seq``."""
    segments: list[list[Message]] = [[]]
    for message in messages:
        unresolved = is_compaction(message) and message.boundary and not message.boundary.upto_seq
        if unresolved and segments[-1]:
            segments.append([])
        segments[-1].append(message)
    return segments


async def _resolved(
    store: Store, user_id: str, conversation: Conversation, boundary: Message
) -> Message:
    """Return ``boundary`` covering up to the stored seq of the message before it."""
    position = next(i for i, m in enumerate(conversation.messages) if m is boundary)
    before = conversation.messages[position - 1]
    chat = await store.find_chat(user_id, conversation.thread_id)
    stored = None
    if chat is not None and before.agui_id is not None:
        stored = await store.get_message_by_agui_id(chat.chat_id, before.agui_id)
    if stored is None or stored.seq is None:
        msg = f"{conversation.where}: the message before a compaction boundary was not stored"
        raise InvalidArgument(msg)
    marker = Boundary(reason="compaction", upto_seq=stored.seq)
    return boundary.model_copy(update={"boundary": marker})


def bounded_fields(fields: dict[str, Any], limit: int = 16 * 1024) -> dict[str, Any]:
    """Return ``fields`` with each value whose JSON is over ``limit`` bytes replaced by a note.

    Chat and message metadata is kept outside the payload and has a 1 MiB budget; a
    recorder's bookkeeping (a patch, a tool list, a raw model response) can exceed it, so
    such values are noted as ``{"omitted_bytes": N}`` instead (the conversation itself is
    always kept in the messages).

    Args:
        fields: A JSON-ready mapping.
        limit: The largest value kept whole, in UTF-8 bytes of compact JSON.
    """
    kept: dict[str, Any] = {}
    for key, value in fields.items():
        size = len(dump_json(value).encode("utf-8"))
        kept[key] = value if size <= limit else {"omitted_bytes": size}
    return kept


async def import_conversations(
    store: Store,
    user_id: str,
    conversations: Sequence[Conversation],
    source: str,
    progress: ProgressCallback | None,
) -> ImportReport:
    """Check every conversation (:func:`check_conversations`), then write them all.

    Args:
        store: An open store.
        user_id: The owner of the chats.
        conversations: Every chat of the import, messages already checked with
            :func:`check_message`.
        source: The file or folder name (error messages).
        progress: See :func:`store_conversations`.

    Returns:
        The counts of what was created and what was present.

    Raises:
        InvalidArgument: See :func:`check_conversations` (nothing is written then).
        IdempotencyConflict, ThreadkeepError: See :func:`store_conversations`.
    """
    check_conversations(store, user_id, conversations, source)
    return await store_conversations(store, user_id, conversations, progress)


Convert = Callable[[Path, str, int], list[Conversation]]
"""``convert(file, label, max_message_bytes)``: the conversations of one file, checked."""


async def import_files(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None,
    suffixes: frozenset[str],
    convert: Convert,
) -> ImportReport:
    """Convert a file, or every file with one of ``suffixes`` under a folder, then import.

    Args:
        store: An open store.
        path: A file (whatever its name) or a folder (searched recursively).
        user_id: The owner of the chats.
        progress: See :func:`store_conversations`.
        suffixes: The suffixes of a folder's files to read (``{".traj"}``).
        convert: Turns one file into its conversations (see :data:`Convert`); its label
            is the file name, or the path inside the folder (:func:`find_files`).

    Returns:
        The counts of what was created and what was present.

    Raises:
        InvalidArgument: If nothing is found, or ``convert`` or the checks refuse a file
            (nothing is written then).
        IdempotencyConflict, ThreadkeepError: See :func:`store_conversations`.
    """
    root = Path(path)
    conversations: list[Conversation] = []
    for file, label in find_files(root, suffixes):
        with shape_checked(label):
            conversations += convert(file, label, store.max_message_bytes)
    return await import_conversations(store, user_id, conversations, root.name, progress)
