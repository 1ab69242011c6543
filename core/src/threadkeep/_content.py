r"""Serialization and content checks shared by every driver (SPEC section 3, "Content fidelity").

A message is stored as a JSON body plus a few indexed columns. The body is compact JSON
written with ``ensure_ascii=False``; JSON escapes every control character, so U+0000 is
stored as the six characters ``\\u0000`` and PostgreSQL ``text`` (which rejects NUL bytes)
holds it exactly. Store-assigned fields live in columns and are not part of the body.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ._errors import InvalidArgument, InvalidContent, PayloadTooLarge
from ._models import Message

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ENVELOPE_ALLOWANCE_BYTES",
    "STORE_ASSIGNED_MESSAGE_FIELDS",
    "PreparedMessage",
    "dump_json",
    "load_json",
    "message_fingerprint",
    "message_payload_bytes",
    "prepare_message",
    "validate_model",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""16 MiB: the default ``max_message_bytes``, the same on every backend."""

ENVELOPE_ALLOWANCE_BYTES = 1024 * 1024
"""Room for metadata, parts and ids on top of ``max_message_bytes`` in the encoded body."""

STORE_ASSIGNED_MESSAGE_FIELDS = frozenset(
    {"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"}
)
"""Message fields kept in columns, never in the body."""

_ID_FIELDS = frozenset({"message_id", "tool_call_id", "reasoning_id"})

M = TypeVar("M", bound=BaseModel)


def dump_json(value: Any) -> str:
    """Encode ``value`` as compact JSON text, refusing what cannot be stored exactly.

    Args:
        value: A JSON-compatible value (dicts, lists, str, int, float, bool, None).

    Returns:
        Compact JSON (``ensure_ascii=False``); control characters including U+0000 are escaped.

    Raises:
        InvalidContent: If a string holds a lone UTF-16 surrogate (it has no UTF-8 form).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"content holds a lone UTF-16 surrogate at position {exc.start}; replace it "
            "(for example with U+FFFD) before writing"
        )
        raise InvalidContent(msg) from exc
    return text


def load_json(text: str | bytes) -> Any:
    """Decode JSON text written by :func:`dump_json`."""
    return json.loads(text)


def validate_model(model: type[M], data: Any) -> M:
    """Validate ``data`` as ``model``, mapping pydantic's error to :class:`InvalidArgument`.

    Raises:
        InvalidArgument: If ``data`` does not validate; the message lists the fields.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidArgument(f"invalid {model.__name__}: {exc}") from exc


def message_payload_bytes(message: Message) -> int:
    """Return the size that ``max_message_bytes`` limits, in UTF-8 bytes.

    It is the sum of the UTF-8 lengths of ``content``, every tool call's ``arguments`` and
    ``content``, and every reasoning's ``content`` and ``encrypted_value``. Metadata, parts
    and ids are bounded separately by :data:`ENVELOPE_ALLOWANCE_BYTES`.
    """
    texts = [message.content]
    for call in message.tool_calls:
        texts += [call.arguments, call.content or ""]
    for reasoning in message.reasonings:
        texts += [reasoning.content, reasoning.encrypted_value or ""]
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _ID_FIELDS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def message_fingerprint(body: dict[str, Any]) -> str:
    """Return the SHA-256 (hex) of a message body without generated ids.

    Two appends with one ``agui_id`` are "equal" (SPEC section 3, idempotency) when their
    fingerprints match: ids the client did not choose (``message_id``, ``tool_call_id``,
    ``reasoning_id``) and store-assigned fields are left out.
    """
    canonical = json.dumps(
        _without_ids(body), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A message checked and serialized once, ready for a driver to persist.

    Attributes:
        message: The validated message (``chat_id`` set; other store fields as given).
        body: The JSON body text (store-assigned fields excluded).
        fingerprint: See :func:`message_fingerprint`.
    """

    message: Message
    body: str
    fingerprint: str


def prepare_message(message: Message, max_message_bytes: int) -> PreparedMessage:
    """Check a message and encode its body.

    Args:
        message: The message to write (any ``Message`` subclass).
        max_message_bytes: The store's limit on :func:`message_payload_bytes`.

    Returns:
        The prepared message.

    Raises:
        InvalidContent: If any string holds a lone surrogate.
        PayloadTooLarge: If the payload exceeds ``max_message_bytes``, or the whole body
            exceeds it by more than :data:`ENVELOPE_ALLOWANCE_BYTES`.
    """
    size = message_payload_bytes(message)
    if size > max_message_bytes:
        msg = (
            f"message payload is {size} bytes, over this store's max_message_bytes of "
            f"{max_message_bytes}; split it or store the data elsewhere and link it"
        )
        raise PayloadTooLarge(msg)
    # serialize_as_any: a ToolCall/Reasoning subclass instance keeps its own fields.
    data = message.model_dump(
        mode="json", exclude=set(STORE_ASSIGNED_MESSAGE_FIELDS), serialize_as_any=True
    )
    body = dump_json(data)
    limit = max_message_bytes + ENVELOPE_ALLOWANCE_BYTES
    if len(body) > limit and len(body.encode("utf-8")) > limit:
        msg = f"message body (metadata, parts and payload) is over {limit} bytes"
        raise PayloadTooLarge(msg)
    return PreparedMessage(message=message, body=body, fingerprint=message_fingerprint(data))
