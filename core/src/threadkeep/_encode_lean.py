"""Lean stored message bodies: top-level scalar fields at ``Message``'s default left out.

A short message's body is mostly default-valued fields (``"agui_id":null``,
``"status":"complete"``, ``"in_progress":false``...), and pydantic-core's cost of rebuilding
a page is mostly parsing and building values (``docs/performance.md``, "Reads: trusted
rebuild / lean bodies"). So the stored body leaves out a top-level field whose default is
a JSON scalar (``null``, ``""``, ``false``, an enum's value, ``1``) when its value is the
default of ``Message`` **and** of the message's own class (:func:`lean_fields`). The
containers (``parts``, ``tool_calls``, ``reasonings``, ``metadata``) are always written,
empty or not, and nested records (tool calls, reasonings, parts, the boundary) whole:
readers of the raw body (the contract suite's back door, ``json_extract`` by hand) index
those keys directly, while a scalar is read with its default (``body.get("agui_id")``).

What stays exactly as it was:

- the idempotency fingerprint: computed from the full body's data before this step
  (``_encode``), so rows stored before and after fingerprint alike;
- what a read gives: a left-out field reads as ``Message``'s default, which is the value
  written (the rule above), and counts in ``model_fields_set`` as it does when read from a
  full body (:data:`LEAN_FIELDS` are added). A ``message_model`` whose own default or
  type for one of these fields differs from ``Message``'s is rebuilt from the decoded body
  with the left-out fields put back first (:func:`fill_defaults`), and so is a model with
  validators of its own (the general path), so they see what a full body holds;
- full bodies (every row written before) read unchanged.

What changes: the body text in the store (and in anything that copies it raw). A reader
that validates it with pydantic (an older threadkeep, for one) gets an equal model whose
``model_fields_set`` lacks the left-out fields. The archive bundles and ``threadkeep
export`` write ``model_dump`` of the rebuilt models, not the stored text: unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from ._content import STORE_ASSIGNED_MESSAGE_FIELDS
from ._models import Message

__all__ = [
    "LEAN_DEFAULTS",
    "LEAN_FIELDS",
    "fill_defaults",
    "lean_data",
    "lean_exclude",
    "lean_fields",
    "lean_json",
]


def _json_default(field: FieldInfo) -> tuple[bool, Any]:
    """``(True, default as JSON data)`` for a constant default (no factory)."""
    if field.default_factory is not None or field.default is PydanticUndefined:
        return False, None
    return True, to_jsonable_python(field.default)


def _lean_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for name, field in Message.model_fields.items():
        if name in STORE_ASSIGNED_MESSAGE_FIELDS:
            continue
        known, value = _json_default(field)
        if known and (value is None or type(value) in (str, int, bool)):  # no containers
            defaults[name] = value
    return defaults


LEAN_DEFAULTS: dict[str, Any] = _lean_defaults()
"""``Message``'s top-level fields that a body may leave out, with their defaults as JSON."""
LEAN_FIELDS = frozenset(LEAN_DEFAULTS)
"""The names of :data:`LEAN_DEFAULTS` (added to a lean body's read ``model_fields_set``)."""


def _same_default(model: type[BaseModel], name: str) -> bool:
    """Whether ``model`` declares field ``name`` exactly as ``Message`` does (type, default)."""
    mine, base = model.model_fields.get(name), Message.model_fields[name]
    if mine is None or mine.annotation != base.annotation or mine.metadata != base.metadata:
        return False
    if mine.default_factory is not None:
        return False
    default = mine.default
    return type(default) is type(base.default) and default == base.default


@functools.cache
def lean_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields a body of ``model`` may leave out: :data:`LEAN_FIELDS` it declares alike.

    Args:
        model: A ``Message`` class (the writer's class, or a store's ``message_model``).

    Returns:
        The names in :data:`LEAN_FIELDS` whose annotation, constraints and default in
        ``model`` are ``Message``'s; all of them for ``Message`` itself.
    """
    return frozenset(name for name in LEAN_FIELDS if _same_default(model, name))


_PY_DEFAULTS: dict[str, Any] = {name: Message.model_fields[name].default for name in LEAN_FIELDS}
_KEPT_OUT = frozenset(STORE_ASSIGNED_MESSAGE_FIELDS)


def _at_default(value: Any, default: Any) -> bool:
    """Whether ``value`` is ``default`` exactly: of the same type (``0`` is not ``False``).

    A ``str`` put past validation is not the enum member it spells: written out.
    """
    return value is default or (type(value) is type(default) and value == default)


def lean_exclude(message: BaseModel) -> set[str]:
    """The fields a message's stored body leaves out: the store's columns and its defaults.

    Args:
        message: A ``Message`` (any subclass).

    Returns:
        A new set for the serializer's ``exclude``: the store-assigned fields, and each of
        :func:`lean_fields` of the message's class whose value is ``Message``'s default.
    """
    values = message.__dict__
    defaults = _PY_DEFAULTS
    excluded = {
        name
        for name in lean_fields(type(message))
        if name in values and _at_default(values[name], defaults[name])
    }
    excluded |= _KEPT_OUT
    return excluded


def lean_json(message: BaseModel, *, as_any: bool) -> str:
    """The lean stored body of a message whose full body serializes (compact JSON text).

    Args:
        message: A ``Message`` (any subclass) that serialized without error already.
        as_any: ``serialize_as_any`` (nested subclass instances keep their own fields);
            ``False`` only for messages whose nested records are all of their declared
            classes (the same text then, cheaper).

    Returns:
        The message's own pydantic-core serialization without :func:`lean_exclude`.
    """
    raw = message.__pydantic_serializer__.to_json(
        message, exclude=lean_exclude(message), serialize_as_any=as_any
    )
    return raw.decode("utf-8")


def lean_data(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``data`` (a full body's JSON data) without the fields a lean body leaves out.

    Args:
        data: A message's full body, decoded (not changed).
        model: The message's class: only :func:`lean_fields` of it are left out.

    Returns:
        A new dict, keys in the order of ``data``.
    """
    keys = lean_fields(model)
    defaults = LEAN_DEFAULTS
    return {
        key: value
        for key, value in data.items()
        if key not in keys or not _at_default(value, defaults[key])
    }


def fill_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """Put back the fields a lean body left out, as a full body holds them (in place).

    Args:
        data: A message body decoded as a dict (lean or full).

    Returns:
        ``data``, with every :data:`LEAN_FIELDS` name it lacked set to its ``Message``
        default (JSON data, validated with the rest).
    """
    for key, value in LEAN_DEFAULTS.items():
        data.setdefault(key, value)
    return data
