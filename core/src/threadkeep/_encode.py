"""One pass over a message on write: its stored body and fingerprint from the same JSON bytes.

The body is the message's own pydantic-core serialization (``to_json``, in Rust) rather than
``model_dump(mode="json")`` followed by ``json.dumps``; the fingerprint is computed from
that body, parsed once by pydantic-core, with keys sorted and generated ids left out, and
encoded by pydantic-core again. The fingerprint's text is byte for byte what
:func:`threadkeep._content.message_fingerprint` (the original algorithm, kept as the
reference) gives for the same message: pydantic-core escapes strings exactly as
``json.dumps(ensure_ascii=False)`` does, and a body holding a float is canonicalized by
``json.dumps`` itself (no assumption about how two encoders spell a float).
``core/tests/test_encode.py`` checks the equality over generated messages.

The stored body is then made lean (:mod:`threadkeep._encode_lean`: top-level fields at
their default left out); the fingerprint stays that of the full body.

Anything unusual (a value with no JSON form, a lone surrogate, a serializer that does not
give a JSON object) takes the original path, so errors and their messages are unchanged.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

from ._content import (
    ENVELOPE_ALLOWANCE_BYTES,
    STORE_ASSIGNED_MESSAGE_FIELDS,
    PreparedMessage,
    check_content,
    check_payload_size,
    dump_json,
    envelope_problem,
    json_data,
    message_fingerprint,
)
from ._encode_lean import lean_data, lean_json
from ._models import Message

__all__ = ["encode_message", "fingerprint_of", "message_body_of", "prepare_message"]

_EXCLUDE = set(STORE_ASSIGNED_MESSAGE_FIELDS)  # never mutated; pydantic-core wants a set
_ID_FIELDS = frozenset({"message_id", "tool_call_id", "reasoning_id"})
_SCALARS = frozenset({str, int, bool, type(None)})


class _HasFloat(Exception):
    """A float in the body: the canonical text is left to ``json.dumps`` (see the module)."""


def _serialized(message: Message) -> tuple[bytes, dict[str, Any]] | None:
    """The body bytes and their parsed data, or ``None`` when the original path must decide."""
    try:
        raw = message.__pydantic_serializer__.to_json(
            message, exclude=_EXCLUDE, serialize_as_any=True
        )
        data = from_json(raw)  # ValueError: an integer too long for its parser, for one
    except (PydanticSerializationError, ValueError, RecursionError):
        return None
    return (raw, data) if type(data) is dict else None


def _canonical(value: Any) -> Any:
    """``value`` with dict keys sorted and generated ids dropped; raises ``_HasFloat``."""
    kind = type(value)
    if kind is dict:
        return {
            key: item if type(item) in _SCALARS else _canonical(item)
            for key, item in sorted(value.items())
            if key not in _ID_FIELDS
        }
    if kind is list:
        return [item if type(item) in _SCALARS else _canonical(item) for item in value]
    if kind is float:
        raise _HasFloat
    return value


def _fingerprint(data: dict[str, Any]) -> str:
    """:func:`~threadkeep._content.message_fingerprint` of JSON data parsed from a body."""
    try:
        text = to_json(_canonical(data))
    except _HasFloat:
        return message_fingerprint(data)
    return hashlib.sha256(text).hexdigest()


def encode_message(message: Message, max_message_bytes: int) -> PreparedMessage:
    """Check a message and encode its body and fingerprint in one pass.

    The checks are those of the original ``prepare_message`` in the same order: the payload
    size, the content (:func:`~threadkeep._content.check_content`: surrogates, NaN and
    infinity, nesting depth), a JSON form for every value, then the envelope size.

    Args:
        message: The message to write (any ``Message`` subclass; nested subclass instances
            keep their own fields).
        max_message_bytes: The store's limit on ``message_payload_bytes`` (UTF-8 bytes).

    Returns:
        The prepared message: the message itself, its body (compact JSON text without the
        store-assigned fields, and without the top-level fields at their default:
        :func:`~threadkeep._encode_lean.lean_exclude`) and its fingerprint (SHA-256 hex, as
        ``message_fingerprint`` of the full body's data).

    Raises:
        InvalidContent: If a string or key holds a lone surrogate, a float is NaN or
            infinite, content is nested deeper than ``MAX_NESTING_DEPTH``, or a value has
            no JSON form (the message names the field).
        PayloadTooLarge: If the payload exceeds ``max_message_bytes``, or the rest of the
            message exceeds ``ENVELOPE_ALLOWANCE_BYTES``.
    """
    check_payload_size(message, max_message_bytes)
    check_content(message, "message")
    serialized = _serialized(message)
    if serialized is None:
        return _encode_slowly(message)
    raw, data = serialized
    # The envelope is at most the body (with a margin in case an encoder spells floats shorter).
    if len(raw) * 2 > ENVELOPE_ALLOWANCE_BYTES:
        envelope_problem(data)
    # The fingerprint is of the full body's data; the stored body is the lean one.
    body = lean_json(message, as_any=True)
    return PreparedMessage(message=message, body=body, fingerprint=_fingerprint(data))


def _encode_slowly(message: Message) -> PreparedMessage:
    """The original encoding (``model_dump`` then ``json.dumps``): its errors name the field."""
    data = json_data(message, "message", exclude=set(_EXCLUDE), serialize_as_any=True)
    body = dump_json(data)
    if len(body) * 4 > ENVELOPE_ALLOWANCE_BYTES:
        envelope_problem(data)
    fingerprint = message_fingerprint(data)
    body = dump_json(lean_data(data, type(message)))
    return PreparedMessage(message=message, body=body, fingerprint=fingerprint)


def message_body_of(message: Message) -> str:
    """Return a message's JSON body without store-assigned fields (``Store.message_body``).

    Args:
        message: A message (nested subclass fields included).

    Returns:
        Compact JSON text, lean (top-level fields at their default left out, as
        :func:`~threadkeep._encode_lean.lean_exclude`); no content checks beyond what the
        encoding itself refuses.

    Raises:
        InvalidContent: If a string holds a lone surrogate (through ``dump_json``).
    """
    if _serialized(message) is not None:
        return lean_json(message, as_any=True)
    data = message.model_dump(mode="json", exclude=set(_EXCLUDE), serialize_as_any=True)
    return dump_json(lean_data(data, type(message)))


def fingerprint_of(message: Message) -> str:
    """Return the idempotency fingerprint of a stored or new message (``Store.fingerprint``).

    Args:
        message: The message; store-assigned fields and generated ids do not count.

    Returns:
        The SHA-256 hex digest, equal to ``message_fingerprint`` of its JSON data.

    Raises:
        pydantic_core.PydanticSerializationError: If an undeclared extra field holds a
            value with no JSON form (``prepare`` refuses such a message first).
    """
    serialized = _serialized(message)
    if serialized is not None:
        return _fingerprint(serialized[1])
    data = message.model_dump(mode="json", exclude=set(_EXCLUDE), serialize_as_any=True)
    return message_fingerprint(data)


def prepare_message(message: Message, max_message_bytes: int) -> PreparedMessage:
    """Check a message and encode its body: :func:`encode_message` (the importers' name).

    Args:
        message: The message to write (any ``Message`` subclass).
        max_message_bytes: The store's limit on :func:`message_payload_bytes`.

    Returns:
        The prepared message.

    Raises:
        InvalidContent: If any string or key holds a lone surrogate, a float is NaN or
            infinite, or a value has no JSON form (the message names the field).
        PayloadTooLarge: If the payload exceeds ``max_message_bytes`` (UTF-8 bytes), or the
            rest of the message exceeds :data:`ENVELOPE_ALLOWANCE_BYTES`
            (:func:`message_envelope_bytes`).
    """
    return encode_message(message, max_message_bytes)
