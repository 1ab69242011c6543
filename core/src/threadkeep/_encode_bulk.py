"""The bulk load's encoding: :func:`~threadkeep._encode.encode_message`'s result, cheaper.

``Store.load_messages`` encodes every message of a large history; the per-message work of
``encode_message`` (a walk of the whole model for surrogates, NaN and depth, then a walk of
the parsed body to sort it for the fingerprint) is most of a bulk load's time. For a message
made only of threadkeep's own record classes (the common case) both walks can be cut to the
parts of the message where something could be wrong, with the same outcome:

- **the content checks**: the body is serialized with ``warnings="error"``, so every typed
  field holds its declared type (a value put there past validation, by ``model_construct``
  or an in-place list edit, fails the serialization), and the serializer refuses a lone
  surrogate in any string or key. What is left for ``check_content`` to find (NaN and
  infinite floats, too deep nesting) can only sit in the free-form values: ``metadata``,
  extra fields, ``ActionPart.payload``, ``CustomPart.value``. Only those are walked, each at
  its own depth in the message, with ``check_content``'s own walk.
- **the serialization**: with every nested record of its declared class, the message's
  own serializer gives the body ``serialize_as_any`` gives (which costs more than the rest
  of the serialization: it looks up each nested value's class).
- **the fingerprint**: a message of typed fields only (no metadata, parts, boundary or
  extra fields: most of a bulk load) gives its canonical data straight from its field
  values, in sorted order, without parsing its body back. Otherwise the message's keys are
  sorted without a call for each empty list or dict, and the rest is ``_encode``'s
  canonical walk; pydantic-core's encoder writes the canonical text, as in
  ``encode_message``.

Anything else (a subclass, a failed serialization, a floating-point number, a problem
found) goes through ``encode_message``, so results and error messages are exactly its
results; ``core/tests/test_encode_bulk.py`` checks the equality over generated messages.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

from ._content import (
    ENVELOPE_ALLOWANCE_BYTES,
    STORE_ASSIGNED_MESSAGE_FIELDS,
    PreparedMessage,
    _content_problem,
    _is_clean,
    check_payload_size,
    envelope_problem,
    message_fingerprint,
)
from ._encode import _canonical, _HasFloat, encode_message
from ._encode_lean import lean_json
from ._encode_plain import encode_plain
from ._models import (
    ActionPart,
    Boundary,
    CustomPart,
    ErrorPart,
    FilePart,
    ImagePart,
    Message,
    Reasoning,
    ToolCall,
)

__all__ = ["collector_paused", "encode_for_load", "payload_bytes"]

_EXCLUDE = set(STORE_ASSIGNED_MESSAGE_FIELDS)
_SERIALIZE = Message.__pydantic_serializer__.to_json
_PART_TYPES = frozenset({ImagePart, FilePart, ErrorPart})
_ID_FIELDS = frozenset({"message_id", "tool_call_id", "reasoning_id"})
_MESSAGE_KEYS = sorted(set(Message.model_fields) - _EXCLUDE - _ID_FIELDS)
_TOOL_CALL_KEYS = sorted(set(ToolCall.model_fields) - _ID_FIELDS)
_REASONING_KEYS = sorted(set(Reasoning.model_fields) - _ID_FIELDS)
_ENUM_KEYS = ("kind", "role", "status")


def encode_for_load(message: Message, max_message_bytes: int) -> PreparedMessage:
    """Check and encode a message: ``encode_message(message, max_message_bytes)``, faster.

    Args:
        message: The message to write (any ``Message`` subclass; subclasses take
            ``encode_message`` itself).
        max_message_bytes: The store's limit on the payload (UTF-8 bytes).

    Returns:
        The prepared message, equal to what ``encode_message`` returns (the same body
        text and fingerprint; ``message`` is the argument itself).

    Raises:
        InvalidContent / PayloadTooLarge: Exactly as ``encode_message`` raises them (it
            is the one that raises: a message with a problem is handed to it).
    """
    if type(message) is not Message:
        return encode_message(message, max_message_bytes)
    return encode_plain(message, max_message_bytes) or _encode_typed(message, max_message_bytes)


def _encode_typed(message: Message, max_message_bytes: int) -> PreparedMessage:
    """:func:`encode_for_load` of a message of the base class that is not plain."""
    if not _free_values_clean(message):
        return encode_message(message, max_message_bytes)
    if payload_bytes(message) > max_message_bytes:
        check_payload_size(message, max_message_bytes)  # raises, naming the sizes
    try:
        raw = _SERIALIZE(message, exclude=_EXCLUDE, warnings="error")
        data = from_json(raw) if len(raw) * 2 > ENVELOPE_ALLOWANCE_BYTES else None
    except (PydanticSerializationError, ValueError, RecursionError):
        return encode_message(message, max_message_bytes)
    if data is not None:  # the envelope is at most the body (twice: floats may shrink)
        if type(data) is not dict:
            return encode_message(message, max_message_bytes)
        envelope_problem(data)
    fingerprint = _typed_fingerprint(message)
    if fingerprint is None:
        try:
            data = from_json(raw) if data is None else data
        except (ValueError, RecursionError):
            return encode_message(message, max_message_bytes)
        if type(data) is not dict:
            return encode_message(message, max_message_bytes)
        fingerprint = _fingerprint(data)
    # Every nested record is of its declared class: the lean body without serialize_as_any.
    body = lean_json(message, as_any=False)
    return PreparedMessage(message=message, body=body, fingerprint=fingerprint)


def payload_bytes(message: Message) -> int:
    """:func:`~threadkeep._content.message_payload_bytes`, without encoding ASCII text.

    Args:
        message: Any message.

    Returns:
        The UTF-8 bytes of its content, tool-call arguments and results, and reasoning
        texts (an ASCII text's length is its size in UTF-8).
    """
    size = _text_bytes(message.content)
    for call in message.tool_calls:
        size += _text_bytes(call.arguments) + _text_bytes(call.content or "")
    for reasoning in message.reasonings:
        size += _text_bytes(reasoning.content) + _text_bytes(reasoning.encrypted_value or "")
    return size


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a synchronous stretch of bulk work.

    Encoding a batch allocates many short-lived objects while the batch before it is still
    held: each allocation count past the collector's threshold starts a collection, and the
    survivors soon make it traverse the whole heap, which costs a bulk load about as much
    CPU as the encoding itself. Reference counting still frees every object meanwhile; the
    collector runs again (and collects any cycle) as soon as the stretch ends. Use it only
    around code that does not await: no other task of the loop runs with it paused. It
    leaves a collector that was disabled already as it was, and restores it on error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _clean(value: Any, depth: int) -> bool:
    """Whether ``check_content`` finds nothing in ``value`` at ``depth`` in the message."""
    return _is_clean(value) or _content_problem(value, depth) is None


def _extras_clean(record: Any, depth: int) -> bool:
    """Whether ``check_content`` finds nothing in a record's extra fields (at ``depth``)."""
    extra = record.__pydantic_extra__
    return not extra or all(_clean(value, depth) for value in extra.values())


def _free_values_clean(message: Message) -> bool:
    """Whether the free-form values of a message of the base classes are clean.

    Depths are those of ``check_content``'s walk: the message is 0, its fields 1, the
    items of its lists 2, their fields 3. ``False`` also when a nested record is of a
    subclass (its declared fields are not known here).
    """
    if (message.metadata and not _clean(message.metadata, 1)) or not _extras_clean(message, 1):
        return False
    for call in message.tool_calls:
        if type(call) is not ToolCall or not _extras_clean(call, 3):
            return False
    for reasoning in message.reasonings:
        if type(reasoning) is not Reasoning or not _extras_clean(reasoning, 3):
            return False
    for part in message.parts:
        kind = type(part)
        if kind is ActionPart:
            free = part.payload  # type: ignore[union-attr]
        elif kind is CustomPart:
            free = part.value  # type: ignore[union-attr]
        elif kind in _PART_TYPES:
            free = None
        else:
            return False
        if not _clean(free, 3) or not _extras_clean(part, 3):
            return False
    boundary = message.boundary
    return boundary is None or (type(boundary) is Boundary and _extras_clean(boundary, 2))


def _typed_fingerprint(message: Message) -> str | None:
    """The fingerprint of a message made of typed fields only, or ``None``.

    Without metadata, parts, a boundary or extra fields anywhere, the canonical data is
    the message's own field values, in sorted order, without ids and store fields (what
    the body parsed back would give: the serializer wrote each typed value as its JSON
    form, which ``to_json`` writes again here); the body need not be parsed.
    """
    fields = message.__dict__
    if fields["metadata"] or fields["parts"] or fields["boundary"] is not None:
        return None
    if message.__pydantic_extra__:
        return None
    canonical = {key: fields[key] for key in _MESSAGE_KEYS}
    for key in _ENUM_KEYS:  # the value itself: the encoder would read Enum.value per member
        canonical[key] = canonical[key]._value_
    for name, keys in (("tool_calls", _TOOL_CALL_KEYS), ("reasonings", _REASONING_KEYS)):
        items = fields[name]
        if items:
            if any(item.__pydantic_extra__ for item in items):
                return None
            canonical[name] = [_item_data(item, keys) for item in items]
    return hashlib.sha256(to_json(canonical)).hexdigest()


def _item_data(item: ToolCall | Reasoning, keys: list[str]) -> dict[str, Any]:
    """The canonical data of a nested tool call or reasoning of the base class."""
    fields = item.__dict__
    data = {key: fields[key] for key in keys}
    data["status"] = data["status"]._value_
    return data


def _fingerprint(data: dict[str, Any]) -> str:
    """:func:`~threadkeep._content.message_fingerprint` of a body's data (see the module).

    The message's own keys are sorted here, without a call for each empty list or dict;
    what is not empty is canonicalized by ``_encode``'s walk, which drops generated ids
    wherever they are and hands a body holding a float to ``json.dumps``.
    """
    canonical: dict[str, Any] = {}
    try:
        for key in sorted(data):
            value = data[key]
            kind = type(value)
            if key in _ID_FIELDS:
                continue
            if kind is float:
                raise _HasFloat
            if (kind is list or kind is dict) and value:
                value = _canonical(value)
            canonical[key] = value
    except _HasFloat:
        return message_fingerprint(data)
    return hashlib.sha256(to_json(canonical)).hexdigest()
