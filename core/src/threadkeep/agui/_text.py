"""Streamed text: deltas folded into one string, and lone surrogates made storable.

A delta stream can split a UTF-16 surrogate pair across two events (each JSON string then
decodes to a lone surrogate), so repair runs on the folded text, never on single deltas:
a pair that meets again is joined, a surrogate that stays alone becomes U+FFFD (the
stream layer replaces it and notes it, so a run never dies on it; the store itself refuses
lone surrogates, which no backend keeps exactly).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

from .._models import Message

__all__ = [
    "SNAPSHOT_NOTE",
    "SURROGATES_NOTE",
    "TextBuffer",
    "held_calls",
    "held_texts",
    "repair_model",
    "repair_surrogates",
    "repair_value",
    "storable",
    "utf8_size",
]

SURROGATES_NOTE = "replaced_surrogates"
"""``metadata`` key counting lone surrogates replaced with U+FFFD (message, step or run)."""

SNAPSHOT_NOTE = "agui_snapshot"
"""``Message.metadata`` key of what a ``MESSAGES_SNAPSHOT`` said that differs from the stream."""

M = TypeVar("M", bound=BaseModel)


def held_texts(message: Message) -> tuple[str, ...]:
    """The texts a client may hold for a stored message.

    Its ``content``, and the text a ``MESSAGES_SNAPSHOT`` gave it where that disagreed with
    the stream (``metadata["agui_snapshot"]["content"]``): the stored text stays the
    streamed one, but a client replaces its list with the snapshot's, so that is the text
    it sends back (under fresh ids, with LlamaIndex and ADK) on the next run.

    Args:
        message: A stored message.

    Returns:
        One or two texts, the stored one first.
    """
    note = message.metadata.get(SNAPSHOT_NOTE)
    other = note.get("content") if isinstance(note, dict) else None
    return (message.content, other) if isinstance(other, str) else (message.content,)


def held_calls(message: Message) -> set[tuple[str | None, str, str]]:
    """The ``(id, name, arguments)`` of a stored message's calls as a client may hold them.

    Each call as stored, and with the arguments a disagreeing ``MESSAGES_SNAPSHOT`` gave it
    (``metadata["agui_snapshot"]["tool_calls"]``), for the reason :func:`held_texts` says.
    """
    note = message.metadata.get(SNAPSHOT_NOTE)
    other = note.get("tool_calls") if isinstance(note, dict) else None
    snapshot = other if isinstance(other, dict) else {}
    out = {(c.agui_id, c.name, c.arguments) for c in message.tool_calls}
    for call in message.tool_calls:
        arguments = snapshot.get(call.agui_id)
        if isinstance(arguments, str):
            out.add((call.agui_id, call.name, arguments))
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")
_REPLACEMENT = "\ufffd".encode()


def repair_surrogates(text: str) -> tuple[str, int]:
    """Join split surrogate pairs and replace lone surrogates with U+FFFD.

    Args:
        text: Any Python string (it may hold surrogate code points).

    Returns:
        ``(repaired, replaced)``: text that encodes to UTF-8, and how many lone surrogates
        were replaced (0 when the text was already clean; the common case costs one scan).
    """
    if _SURROGATE.search(text) is None:
        return text, 0
    # A UTF-16 round trip pairs what can be paired; its "replace" turns the rest into U+FFFD.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined, joined.count("\ufffd") - text.count("\ufffd")


def repair_value(value: Any) -> tuple[Any, int]:
    """Repair every string in a JSON-like value (dict keys included), as :func:`repair_surrogates`.

    Args:
        value: A string, or dicts, lists and tuples of them (other values pass unchanged).

    Returns:
        ``(repaired, replaced)``; ``repaired`` is ``value`` itself when nothing was replaced.
    """
    if isinstance(value, str):
        return repair_surrogates(value)
    if isinstance(value, dict):
        total, out = 0, {}
        for key, item in value.items():
            new_key, count_key = repair_value(key)
            new_item, count_item = repair_value(item)
            total += count_key + count_item
            out[new_key] = new_item
        return (out, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        pairs = [repair_value(item) for item in value]
        total = sum(count for _, count in pairs)
        if not total:
            return value, 0
        items = [item for item, _ in pairs]
        return (items if isinstance(value, list) else tuple(items)), total
    return value, 0


def repair_model(model: M, *, note: bool = True) -> tuple[M, int]:
    """Return ``model`` with every lone surrogate in its fields replaced with U+FFFD.

    Every string field, nested ones and ``metadata`` included, is repaired (the
    stream layer replaces them, so a write never fails on them).

    Args:
        model: A message, step or other record (a pydantic model).
        note: Add the count to the model's ``metadata[SURROGATES_NOTE]`` (if it has one).

    Returns:
        ``(repaired, replaced)``; the model itself when nothing was replaced.
    """
    if storable(model):
        return model, 0
    data, replaced = repair_value(model.model_dump())
    if not replaced:
        return model, 0
    if note and isinstance(data.get("metadata"), dict):
        metadata = data["metadata"]
        metadata[SURROGATES_NOTE] = int(metadata.get(SURROGATES_NOTE) or 0) + replaced
    return type(model).model_validate(data), replaced


def storable(model: BaseModel) -> bool:
    """Whether ``model`` surely holds no lone surrogate: a quick test, in pydantic-core.

    The model's JSON serialization (Rust) refuses a lone surrogate in a value, and spells
    one in a ``dict[str, ...]`` key as U+FFFD; so a serialization that succeeds and holds
    no U+FFFD at all proves every string of the model (what ``model_dump`` gives) clean.
    ``False`` says nothing: the caller walks the model (:func:`repair_value`), as for a
    value with no JSON form or a genuine U+FFFD.

    Args:
        model: A message, step, run or AG-UI model.

    Returns:
        ``True`` when no string of the model's dump can hold a lone surrogate.
    """
    try:
        raw = model.__pydantic_serializer__.to_json(model)
    except (ValueError, RecursionError):  # PydanticSerializationError: a surrogate, ...
        return False
    return _REPLACEMENT not in raw


def utf8_size(text: str) -> int:
    """Return the UTF-8 size of ``text`` in bytes (a lone surrogate counts 3, as encoded)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


class TextBuffer:
    """Deltas appended in order; ``text()`` joins them once and keeps the joined string.

    ``pending_bytes`` counts UTF-8 bytes appended since the last :meth:`mark_flushed`, the
    size an incremental writer compares with its flush threshold.
    """

    __slots__ = ("_parts", "flushed_bytes", "pending_bytes")

    def __init__(self, initial: str = "") -> None:
        self._parts: list[str] = [initial] if initial else []
        self.pending_bytes = 0
        self.flushed_bytes = 0

    def append(self, delta: str, size: int | None = None) -> None:
        """Add a delta (any string; empty deltas are kept out).

        Args:
            delta: The text.
            size: Its UTF-8 size in bytes when the caller measured it already
                (:func:`utf8_size`).
        """
        if delta:
            self._parts.append(delta)
            self.pending_bytes += utf8_size(delta) if size is None else size

    def extend(self, deltas: list[str], size: int) -> None:
        """Add non-empty deltas at once (what :meth:`append` of each would do).

        Args:
            deltas: The texts, in order; none of them empty.
            size: Their UTF-8 size in bytes, together.
        """
        self._parts += deltas
        self.pending_bytes += size

    def text(self) -> str:
        """Return the folded text (joined once, then cached)."""
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def mark_flushed(self) -> None:
        """Record that everything appended so far is stored."""
        self.flushed_bytes += self.pending_bytes
        self.pending_bytes = 0
