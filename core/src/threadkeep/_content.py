r"""Serialization and content checks shared by every driver.

A message is stored as a JSON body plus a few indexed columns. The body is compact JSON
written with ``ensure_ascii=False``; JSON escapes every control character, so U+0000 is
stored as the six characters ``\\u0000`` and PostgreSQL ``text`` (which rejects NUL bytes)
holds it exactly. Store-assigned fields live in columns and are not part of the body.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from ._errors import InvalidArgument, InvalidContent, PayloadTooLarge
from ._models import ChatStatus, Message, MessageKind, MessageStatus, Role, Share

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ENVELOPE_ALLOWANCE_BYTES",
    "MAX_NESTING_DEPTH",
    "STORE_ASSIGNED_MESSAGE_FIELDS",
    "PreparedMessage",
    "check_content",
    "check_finite",
    "check_payload_size",
    "dump_json",
    "envelope_problem",
    "json_data",
    "load_json",
    "message_envelope_bytes",
    "message_fingerprint",
    "message_payload_bytes",
    "validate_model",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""16 MiB: the default ``max_message_bytes``, the same on every backend."""

ENVELOPE_ALLOWANCE_BYTES = 1024 * 1024
"""Limit on everything of a message but its payload, in UTF-8 bytes of JSON (1 MiB).

See :func:`message_envelope_bytes`: metadata, parts, ids, names, extra fields. It is
separate from ``max_message_bytes`` (the payload), so JSON escaping of the payload (U+0000
is six characters in JSON) never counts against either.
"""

STORE_ASSIGNED_MESSAGE_FIELDS = frozenset(
    {"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"}
)
"""Message fields kept in columns, never in the body."""

MAX_NESTING_DEPTH = 64
"""Deepest nesting of containers a record may hold, counted from the record itself.

A model, mapping, list, tuple or set is one level. Deeper content is refused with
``InvalidContent`` before anything else walks it: the checks here, pydantic's serializer
(which gives up near 500 levels), pydantic-core's JSON parser (about 200 levels) and
Python's ``json`` module (the interpreter's recursion limit) all recurse, and MongoDB
refuses documents nested over 100 levels, so a bound below all of them keeps every
stored record writable and readable on every backend.
"""

_DEPTH_PROBLEM = (
    f"is nested more than {MAX_NESTING_DEPTH} levels deep (the limit, MAX_NESTING_DEPTH); "
    "flatten it or store it as a JSON string"
)

_ID_FIELDS = frozenset({"message_id", "tool_call_id", "reasoning_id"})

M = TypeVar("M", bound=BaseModel)


def dump_json(value: Any) -> str:
    """Encode ``value`` as compact JSON text, refusing what cannot be stored exactly.

    Args:
        value: A JSON-compatible value (dicts, lists, str, int, float, bool, None).

    Returns:
        Compact JSON (``ensure_ascii=False``); control characters including U+0000 are escaped.

    Raises:
        InvalidContent: If a string holds a lone UTF-16 surrogate (it has no UTF-8 form), or
            a float is NaN or infinite (it has no JSON form).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        msg = f"{exc}: NaN and infinity have no JSON form; store them as null or a string"
        raise InvalidContent(msg) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"content holds a lone UTF-16 surrogate at position {exc.start}; replace it "
            "(for example with U+FFFD) before writing"
        )
        raise InvalidContent(msg) from exc
    return text


_LEAF_TYPES = frozenset({str, int, bool, type(None), UUID, datetime})
_CONTAINERS = (BaseModel, Mapping, list, tuple, set, frozenset)


def _children(value: Any) -> Any:
    """Return ``(key, item)`` pairs of a container (model, mapping, sequence, set), else ``()``."""
    if isinstance(value, BaseModel):
        extra = value.__pydantic_extra__
        return [*value.__dict__.items(), *extra.items()] if extra else value.__dict__.items()
    if isinstance(value, Mapping):
        return value.items()
    if isinstance(value, list | tuple | set | frozenset):
        return enumerate(value)
    return ()


def _non_finite_path(value: Any, depth: int = 0) -> list[object] | None:
    """Return the keys leading to the first NaN or infinite float in ``value``, or ``None``.

    Raises:
        InvalidContent: If ``value`` is nested more than :data:`MAX_NESTING_DEPTH` deep.
    """
    if type(value) in _LEAF_TYPES:
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else []
    if depth >= MAX_NESTING_DEPTH and isinstance(value, _CONTAINERS):
        raise InvalidContent(f"content {_DEPTH_PROBLEM}")
    for key, item in _children(value):
        if isinstance(key, float) and not math.isfinite(key):
            return [key]
        found = _non_finite_path(item, depth + 1)
        if found is not None:
            return [key, *found]
    return None


def check_finite(value: Any, what: str) -> None:
    """Refuse NaN and infinite floats anywhere inside a record.

    JSON has no NaN or infinity: stored, they would come back as ``null`` (and a retry
    holding NaN would compare equal to one holding ``None``). Every record (messages,
    chats, steps, runs) passes through this before it is written.

    Args:
        value: A model, mapping, list or scalar; models are searched through their fields
            and extra fields.
        what: The record's name, the start of the path in the message.

    Raises:
        InvalidContent: Naming the path of the first NaN or infinite value, or if
            ``value`` is nested deeper than :data:`MAX_NESTING_DEPTH`.
    """
    keys = _non_finite_path(value)
    if keys is not None:
        path = what + "".join(f".{k}" if isinstance(k, str) else f"[{k!r}]" for k in keys)
        msg = (
            f"{path} is NaN or infinite, which has no JSON form and cannot be stored "
            "exactly; store null, a string or a finite number instead"
        )
        raise InvalidContent(msg)


def _surrogate_at(text: str) -> int | None:
    """Return the position of the first lone surrogate in ``text``, or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _path(what: str, keys: list[object]) -> str:
    """Spell a field path: ``.name`` for plain text keys, ``[key]`` (repr) otherwise."""
    parts = [
        f".{k}" if isinstance(k, str) and k.isidentifier() and k.isascii() else f"[{k!r}]"
        for k in keys
    ]
    return what + "".join(parts)


_NON_FINITE = "is NaN or infinite, which has no JSON form and cannot be stored exactly; " + (
    "store null, a string or a finite number instead"
)
_REPLACE = "replace it (for example with U+FFFD) before writing"
_CLEAN_TYPES = frozenset(
    {int, bool, type(None), UUID, datetime, Role, MessageStatus, MessageKind, ChatStatus, Share}
)
"""Types that can hold neither a surrogate nor a non-finite float (checked by ``type is``).

threadkeep's own enums are among them: their values are fixed ASCII words.
"""


def _content_problem(value: Any, depth: int = 0) -> tuple[list[object], str] | None:
    """Return the keys leading to the first value no store can keep exactly, and why.

    The walk goes at most :data:`MAX_NESTING_DEPTH` levels down: a container deeper than
    that is the problem itself, so no input can exhaust the interpreter's stack here.
    """
    if isinstance(value, str | float) or _is_clean(value):
        return _leaf_problem(value)
    if depth >= MAX_NESTING_DEPTH and isinstance(value, _CONTAINERS):
        return [], _DEPTH_PROBLEM
    for key, item in _children(value):
        if not _is_clean(key):
            if isinstance(key, str) and (at := _surrogate_at(key)) is not None:
                return [], f"has a key holding a lone UTF-16 surrogate at position {at} ({key!r})"
            if isinstance(key, float) and not math.isfinite(key):
                return [], f"has a key that {_NON_FINITE}"
        if _is_clean(item):
            continue  # the common leaves, without a call (imports check every record)
        found = _content_problem(item, depth + 1)
        if found is not None:
            return [key, *found[0]], found[1]
    return None


def _leaf_problem(value: Any) -> tuple[list[object], str] | None:
    """``_content_problem`` of a string, a float or a clean leaf."""
    if _is_clean(value):
        return None
    if isinstance(value, str):
        at = _surrogate_at(value)
        return None if at is None else ([], f"holds a lone UTF-16 surrogate at position {at}")
    if isinstance(value, float) and not math.isfinite(value):
        return [], _NON_FINITE
    return None


def _is_clean(value: Any) -> bool:
    """Whether ``value`` is a leaf that cannot hold a surrogate or a NaN (a quick test)."""
    kind = type(value)
    return (kind is str and value.isascii()) or kind in _CLEAN_TYPES or (kind is list and not value)


def check_content(value: Any, what: str) -> None:
    """Refuse what no store can keep exactly, naming the field.

    NaN and infinite floats (JSON has no form for them: they would read back as
    ``null``) and lone UTF-16 surrogates (they have no UTF-8 form), in values and in
    mapping keys, anywhere inside a record: models are searched through their fields and
    extra fields. Containers nested deeper than :data:`MAX_NESTING_DEPTH` are refused too.

    Args:
        value: A model, mapping, list or scalar.
        what: The record's name, the start of the path in the message.

    Raises:
        InvalidContent: Naming the path of the first such value (``message.agui_id``,
            ``chat.metadata.tags[2]``) and what to do.
    """
    found = _content_problem(value)
    if found is not None:
        keys, problem = found
        hint = "" if problem in (_NON_FINITE, _DEPTH_PROBLEM) else f"; {_REPLACE}"
        raise InvalidContent(f"{_path(what, keys)} {problem}{hint}")


def _no_json_path(value: Any) -> list[object] | None:
    """Return the keys leading to the first value with no JSON form, or ``None``."""
    children = list(_children(value))
    if not children and not isinstance(value, BaseModel | Mapping | list | tuple | set):
        try:
            to_jsonable_python(value)
        except ValueError:  # PydanticSerializationError, UnicodeDecodeError
            return []
        return None
    for key, item in children:
        found = _no_json_path(item)
        if found is not None:
            return [key, *found]
    return None


def json_data(record: BaseModel, what: str, **options: Any) -> dict[str, Any]:
    """Check a record with :func:`check_content` and return its JSON data.

    Args:
        record: A message, chat, step, run, tool call or reasoning (any subclass).
        what: The record's name, the start of the path in error messages.
        **options: Passed to ``model_dump(mode="json", ...)`` (``exclude``...).

    Returns:
        ``record.model_dump(mode="json", **options)``.

    Raises:
        InvalidContent: As for :func:`check_content`, or if a value has no JSON form
            (an ``object()``, bytes that are not UTF-8...), naming its path.
    """
    check_content(record, what)
    try:
        data: dict[str, Any] = record.model_dump(mode="json", **options)
    except ValueError as exc:  # PydanticSerializationError, UnicodeDecodeError
        keys = _no_json_path(record)
        where = what if keys is None else _path(what, keys)
        msg = (
            f"{where} has no JSON form and cannot be stored ({exc}); store JSON data "
            "(str, int, finite float, bool, None, lists and dicts of them) instead"
        )
        raise InvalidContent(msg) from exc
    return data


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
    ``content``, and every reasoning's ``content`` and ``encrypted_value``: the text itself,
    not its JSON form (escapes do not count). Everything else is bounded separately by
    :data:`ENVELOPE_ALLOWANCE_BYTES` (see :func:`message_envelope_bytes`).
    """
    texts = [message.content]
    for call in message.tool_calls:
        texts += [call.arguments, call.content or ""]
    for reasoning in message.reasonings:
        texts += [reasoning.content, reasoning.encrypted_value or ""]
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def _without_payload(body: dict[str, Any]) -> dict[str, Any]:
    """Return a message body (JSON data) with its payload strings emptied."""
    stripped = {**body, "content": ""}
    for field, texts in (
        ("tool_calls", ("arguments", "content")),
        ("reasonings", ("content", "encrypted_value")),
    ):
        items = body.get(field)
        if isinstance(items, list):
            stripped[field] = [
                {**item, **{t: "" for t in texts if isinstance(item.get(t), str)}}
                if isinstance(item, dict)
                else item
                for item in items
            ]
    return stripped


def message_envelope_bytes(body: dict[str, Any]) -> int:
    """Return the size of everything in a message but its payload, in UTF-8 bytes of JSON.

    What :data:`ENVELOPE_ALLOWANCE_BYTES` limits: the body (JSON data, as
    ``model_dump(mode="json")`` gives it) dumped with the payload strings of
    :func:`message_payload_bytes` emptied, so metadata, parts, ids, names and extra fields
    count, and neither the payload nor its JSON escaping does.
    """
    return len(dump_json(_without_payload(body)).encode("utf-8"))


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _ID_FIELDS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def message_fingerprint(body: dict[str, Any]) -> str:
    """Return the SHA-256 (hex) of a message body without generated ids.

    Two appends with one ``agui_id`` are "equal" when their
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
        body: The JSON body text (store-assigned fields excluded, and the top-level
            scalars at ``Message``'s default: ``threadkeep._encode_lean``).
        fingerprint: See :func:`message_fingerprint`.
    """

    message: Message
    body: str
    fingerprint: str


def check_payload_size(message: Message, max_message_bytes: int) -> None:
    """Refuse a message whose payload is over ``max_message_bytes``.

    Raises:
        PayloadTooLarge: If :func:`message_payload_bytes` exceeds ``max_message_bytes``.
    """
    size = message_payload_bytes(message)
    if size > max_message_bytes:
        msg = (
            f"message payload (content, tool-call arguments and results, reasoning) is "
            f"{size} bytes of UTF-8, over this store's max_message_bytes of "
            f"{max_message_bytes}; split it or store the data elsewhere and link it"
        )
        raise PayloadTooLarge(msg)


def envelope_problem(data: dict[str, Any]) -> None:
    """Refuse a message body (JSON data) whose envelope is over the allowance.

    Raises:
        PayloadTooLarge: If :func:`message_envelope_bytes` of ``data`` exceeds
            :data:`ENVELOPE_ALLOWANCE_BYTES`.
    """
    envelope = message_envelope_bytes(data)
    if envelope > ENVELOPE_ALLOWANCE_BYTES:
        msg = (
            f"message metadata, parts, ids and other fields take {envelope} bytes of "
            f"JSON, over the {ENVELOPE_ALLOWANCE_BYTES} bytes a message may hold beside "
            "its payload; move large data into content (or store it elsewhere and link "
            "it)"
        )
        raise PayloadTooLarge(msg)
