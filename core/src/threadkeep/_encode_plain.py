"""The bulk load's encoding of a plain message: body and fingerprint from two templates.

Most messages of a large history are plain: a ``Message`` of the base class with no
parts, tool calls, reasonings, metadata, boundary or extra fields, only its typed scalar
fields (``agui_id``, ``role``, ``content``, ``run_id``...). For such a message both texts
``encode_message`` writes (the body, and the canonical text whose SHA-256 is the
fingerprint) are fixed JSON with one value per field, so they are built here from two
templates and the JSON text of each value, without serializing the model at all:

- the templates are derived when the module is imported, from the serializer itself: a
  probe message whose scalar fields hold marker strings is serialized as
  ``encode_message`` serializes (its body) and canonicalized as ``encode_message``
  canonicalizes (keys sorted, generated ids left out: ``_encode._canonical``), and each
  marker becomes a slot of an f-string compiled once. Then sample messages (every field
  type, escapes, non-ASCII) are encoded both ways; if a field is added to ``Message`` or
  anything differs, the templates are off and every message takes the general path
  (``ENABLED`` says which);
- a value's JSON text is ``"null"``, ``"true"``/``"false"``, an enum's quoted value, an
  integer's digits, or a string quoted as is when it is printable ASCII without a quote
  or a backslash; any other string (and the ``message_id``) is written by pydantic-core's
  ``to_json`` (the serializer's own escaping, which refuses a lone surrogate);
- every value must have exactly its field's type (a value put past validation, say by
  ``model_construct``, is not plain: the general path refuses it as ``encode_message``
  would), and a body that could come near ``ENVELOPE_ALLOWANCE_BYTES`` is not plain.

``core/tests/test_encode_plain.py`` checks the results against ``encode_message``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

from pydantic_core import PydanticSerializationError, from_json, to_json

from ._content import (
    ENVELOPE_ALLOWANCE_BYTES,
    STORE_ASSIGNED_MESSAGE_FIELDS,
    PreparedMessage,
    check_payload_size,
)
from ._encode import _canonical, encode_message
from ._encode_lean import lean_json
from ._models import Message, MessageKind, MessageStatus, Role

__all__ = ["ENABLED", "encode_plain"]

_OPTIONAL_TEXT = ("agui_id", "tool_call_ref", "run_id", "request_id", "block_id", "step")
_SLOTS: tuple[str, ...] = ("message_id", "role", "content", "status", "in_progress")
_SLOTS += ("tokens", "kind", "v", *_OPTIONAL_TEXT)
"""The fields a plain message renders, in the order :func:`encode_plain` renders them."""
_EMPTY: dict[str, type[Any]] = {
    "parts": list,
    "tool_calls": list,
    "reasonings": list,
    "metadata": dict,
}
_EXCLUDE = set(STORE_ASSIGNED_MESSAGE_FIELDS)
_SERIALIZE = Message.__pydantic_serializer__.to_json
_ENUM_JSON = {
    member: to_json(member.value).decode() for enum in (Role, MessageStatus) for member in enum
}
"""The JSON text of each ``role`` and ``status`` (looked up after an exact type check)."""
_MAX_CHARS = ENVELOPE_ALLOWANCE_BYTES // 8
"""A longer body may reach the envelope check (``len(body) * 2`` bytes, UTF-8 at most 4
bytes a character): it takes the general path."""


def _marker(field: str) -> str:
    return f"@@{field}@@"


def _template(
    text: str, order: tuple[str, ...], absent: str | None = None
) -> Callable[[list[str]], str] | None:
    """A function writing ``text`` with each field's quoted marker replaced by its JSON text.

    The function is one f-string (the fastest way CPython joins many pieces), compiled
    here from ``text``; it takes the fields' JSON texts in ``order``. ``None`` if a marker
    is not in ``text`` exactly once (``absent``'s: not at all).
    """
    found = []
    for index, field in enumerate(order):
        quoted = f'"{_marker(field)}"'
        if text.count(quoted) != (field != absent):
            return None
        if field == absent:
            continue
        found.append((text.index(quoted), index, quoted))
    source, end = [], 0
    for at, index, quoted in sorted(found):
        literal = text[end:at].replace("{", "{{").replace("}", "}}")
        source.append(f"{literal}{{t[{index}]}}")
        end = at + len(quoted)
    source.append(text[end:].replace("{", "{{").replace("}", "}}"))
    code = "lambda t: f" + repr("".join(source))
    return cast(Callable[[list[str]], str], eval(code, {}))  # noqa: S307 - built from our own text


def _templates() -> tuple[Callable[[list[str]], str], Callable[[list[str]], str]] | None:
    """The body and canonical templates, from a probe of marker values (see the module)."""
    body_fields = [name for name in Message.model_fields if name not in _EXCLUDE]
    if set(body_fields) != set(_SLOTS) | set(_EMPTY) | {"boundary"}:
        return None  # a field this module does not know: everything takes the general path
    markers: dict[str, Any] = {field: _marker(field) for field in _SLOTS}
    probe = Message.model_construct(**markers)
    raw = _SERIALIZE(probe, exclude=_EXCLUDE, warnings=False)
    body = _template(raw.decode("utf-8"), _SLOTS)
    canonical_text = to_json(_canonical(from_json(raw))).decode("utf-8")
    canonical = _template(canonical_text, _SLOTS, absent="message_id")  # ids do not count
    if body is None or canonical is None:
        return None
    return body, canonical


def _text(value: str) -> str:
    """The JSON text of a string, as the serializer writes it (see the module)."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return to_json(value).decode("utf-8")  # PydanticSerializationError: a lone surrogate


def _rendered(fields: dict[str, Any]) -> list[str] | None:
    """Each slot's JSON text, in ``_SLOTS`` order, or ``None`` if a value is not plain."""
    message_id, content, tokens = fields["message_id"], fields["content"], fields["tokens"]
    in_progress, v = fields["in_progress"], fields["v"]
    if type(message_id) is not UUID or type(content) is not str or type(v) is not int:
        return None
    if type(in_progress) is not bool or not (tokens is None or type(tokens) is int):
        return None
    role, status, kind = fields["role"], fields["status"], fields["kind"]
    if type(role) is not Role or type(status) is not MessageStatus or kind is not _MESSAGE:
        return None
    texts = [
        to_json(message_id).decode("utf-8"),  # the serializer's own spelling, and faster
        _ENUM_JSON[role],
        _text(content),
        _ENUM_JSON[status],
        "true" if in_progress else "false",
        "null" if tokens is None else str(tokens),
        _KIND_JSON,
        str(v),
    ]
    for name in _OPTIONAL_TEXT:
        value = fields[name]
        if value is None:
            texts.append("null")
        elif type(value) is str:
            texts.append(_text(value))
        else:
            return None
    return texts


def _is_plain(message: Message) -> bool:
    """Whether the message holds nothing but scalar fields (its containers empty)."""
    fields = message.__dict__
    parts, calls, reasonings = fields["parts"], fields["tool_calls"], fields["reasonings"]
    metadata = fields["metadata"]
    if parts or calls or reasonings or metadata or fields["boundary"] is not None:
        return False
    if type(parts) is not list or type(calls) is not list or type(reasonings) is not list:
        return False
    return type(metadata) is dict and not message.__pydantic_extra__


def encode_plain(message: Message, max_message_bytes: int) -> PreparedMessage | None:
    """``encode_message(message, max_message_bytes)`` of a plain message, or ``None``.

    Args:
        message: A ``Message`` of the base class (the caller checks the class).
        max_message_bytes: The store's limit on the payload (UTF-8 bytes).

    Returns:
        The prepared message (``message`` itself, the body and fingerprint
        ``encode_message`` gives), or ``None`` when the message is not plain or a value
        needs the general path (then nothing was checked: call ``encode_message``).

    Raises:
        PayloadTooLarge: If the content is over ``max_message_bytes`` (the text of
            ``check_payload_size``).
    """
    if _TEMPLATES is None or not _is_plain(message):
        return None
    try:
        texts = _rendered(message.__dict__)
    except PydanticSerializationError:
        return None  # a lone surrogate: encode_message names it
    if texts is None:
        return None
    content = message.__dict__["content"]
    size = len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
    if size > max_message_bytes:
        check_payload_size(message, max_message_bytes)  # raises, naming the sizes
    body_of, canonical_of = _TEMPLATES
    body = body_of(texts)
    if len(body) > _MAX_CHARS:
        return None
    canonical = canonical_of(texts)
    fingerprint = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    body = lean_json(message, as_any=False)  # stored lean, as encode_message (_encode_lean)
    return PreparedMessage(message=message, body=body, fingerprint=fingerprint)


def _agrees() -> bool:
    """Whether the templates give ``encode_message``'s results for sample messages."""
    samples = [
        Message(role="user"),
        Message(role="assistant", agui_id="a", content="plain text", tokens=0),
        Message(
            role="tool",
            agui_id='q"\\ \x00\x1f\x7f é 😀 \u2028',
            content="line\nnext\ttab\r\b\f %s %% {}",
            status=MessageStatus.INTERRUPTED,
            in_progress=True,
            tool_call_ref="t",
            run_id="r",
            request_id="q",
            block_id="b",
            step="s",
            tokens=12345678901234,
            v=3,
        ),
    ]
    limit = ENVELOPE_ALLOWANCE_BYTES
    return all(encode_plain(m, limit) == encode_message(m, limit) for m in samples)


_MESSAGE = MessageKind.MESSAGE
_KIND_JSON = to_json(_MESSAGE.value).decode()
_TEMPLATES = _templates()
if _TEMPLATES is not None and not _agrees():
    _TEMPLATES = None
ENABLED = _TEMPLATES is not None
"""Whether the templates were derived and agree with ``encode_message`` on samples
(otherwise every message takes the general path)."""
