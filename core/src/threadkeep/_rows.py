"""Rebuilding stored rows as models in pydantic-core: the fast path of page reads.

A page's bodies are validated as one JSON array and the store-assigned columns are set on
the result without validating them again, when nothing could tell the difference (see
:func:`_column_types`). Anything else returns ``None`` and the caller takes the general,
row-by-row path, so the errors stay those of that path.
"""

from __future__ import annotations

import functools
import operator
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import repeat
from types import NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin
from uuid import UUID

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator, core_schema

from ._clock import as_utc
from ._content import STORE_ASSIGNED_MESSAGE_FIELDS
from ._models import Message, MessageKind, UTCDateTime

__all__ = ["MESSAGE_COLUMNS", "MESSAGE_ROW", "built", "from_json", "page_from_json"]

R = TypeVar("R", bound=BaseModel)

MESSAGE_COLUMNS = frozenset(STORE_ASSIGNED_MESSAGE_FIELDS)
"""The columns of a message row that the store assigns (set after the body validates)."""
MESSAGE_ROW = ("chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at")
"""The column order of a message row, before its body."""
_JOIN_LIMIT = 1 << 20
"""A page whose bodies hold at most this many characters is validated as one JSON array."""
_TZINFO = operator.attrgetter("tzinfo")
_DICT = operator.attrgetter("__dict__")
_FIELDS_SET = operator.attrgetter("__pydantic_fields_set__")
_set_attribute = object.__setattr__


def built(model: type[R], values: dict[str, Any]) -> R:
    """``model.model_construct(**values)`` for a model that needs none of its loop.

    ``values`` gives every field (no defaults to fill, no aliases; it becomes the
    instance's ``__dict__``), and ``model`` has no extra fields, private attributes or
    ``model_post_init``. ``model_construct`` walks every field in Python (about 10
    microseconds a call); this sets the four slots of a pydantic instance directly.
    """
    record = model.__new__(model)
    _set_attribute(record, "__dict__", values)
    _set_attribute(record, "__pydantic_fields_set__", set(values))
    _set_attribute(record, "__pydantic_extra__", None)
    _set_attribute(record, "__pydantic_private__", None)
    return record


def _kept_types(annotation: Any) -> frozenset[type]:
    """Return the column value types a field of ``annotation`` keeps as they are.

    ``int`` keeps an exact ``int``, ``UUID`` any ``UUID`` (asyncpg's subclass included),
    ``UTCDateTime`` a ``datetime`` that is already UTC, and ``None`` when the field is optional.
    """
    union = get_origin(annotation) in (Union, UnionType)
    kept: set[type] = set()
    for arg in get_args(annotation) if union else (annotation,):
        if arg is NoneType or arg is int or arg is UUID:
            kept.add(arg)
        elif arg == UTCDateTime:
            kept.add(datetime)
    return frozenset(kept)


@functools.cache
def _column_types(
    model: type[BaseModel], names: frozenset[str]
) -> dict[str, frozenset[type]] | None:
    """Per column, the value types ``model`` keeps unchanged; ``None`` if none may skip validation.

    Setting validated columns after validating the body gives what validating them together
    gives when nothing can observe the difference: no field or model validator of the
    subclass (threadkeep's own model validator never reads store-assigned fields), no
    ``model_post_init`` or private attributes, no default factory reading other fields, and
    plain column fields (no constraints).
    """
    decorators = model.__pydantic_decorators__
    own = {d.func for d in Message.__pydantic_decorators__.model_validators.values()}
    if (
        any(d.func not in own for d in decorators.model_validators.values())
        or decorators.field_validators
        or decorators.validators
        or decorators.root_validators
        or model.__pydantic_post_init__ is not None
        or any(f.default_factory_takes_validated_data for f in model.model_fields.values())
    ):
        return None
    types: dict[str, frozenset[type]] = {}
    for name in names:
        field = model.model_fields.get(name)
        if field is None or field.metadata:
            return None
        types[name] = _kept_types(field.annotation)
    return types


def _all_kept(columns: dict[str, Any], types: dict[str, frozenset[type]]) -> bool:
    for key, value in columns.items():
        kept = types[key]
        if type(value) not in kept and not (UUID in kept and isinstance(value, UUID)):
            return False
    return True


def from_json(
    model: type[R],
    body: str | bytes,
    columns: dict[str, Any],
    names: frozenset[str],
    filled: frozenset[str] = frozenset(),
) -> R | None:
    """Validate ``body`` in pydantic-core, then set ``columns`` as validation would have.

    ``names`` is ``frozenset(columns)``; datetime columns have been through :func:`as_utc`.
    ``filled`` names fields a lean body may leave out (their defaults fill them): they are
    added to the fields set, as a full body gives. Returns ``None`` (the caller takes the
    general path) when a column would not be kept as it is, or the body does not validate
    (so errors stay those of the general path).
    """
    types = _column_types(model, names)
    if types is None or not _all_kept(columns, types):
        return None
    try:
        record = model.model_validate_json(body)
    except (ValidationError, RecursionError):
        return None
    record.__dict__.update(columns)
    record.__pydantic_fields_set__.update(names, filled)
    return record


@functools.cache
def _page_validator(model: type[BaseModel]) -> tuple[SchemaValidator, bool]:
    """One compiled validator of ``list[model]`` and whether its boundary rule is left out.

    A ``Message`` model whose only model validator is threadkeep's own boundary rule (the
    ``function-after`` around its model schema) gets the validator of the model schema
    alone: the rule, a Python call per row from Rust, is then checked over the whole page
    by :func:`_boundaries_match` instead. Any other model keeps its whole schema.
    """
    schema: Any = model.__pydantic_core_schema__
    inner = schema.get("schema") if schema.get("type") == "function-after" else None
    plain = (
        issubclass(model, Message)
        and len(model.__pydantic_decorators__.model_validators) == 1
        and isinstance(inner, dict)
        and inner.get("type") == "model"
        and inner.get("cls") is model
    )
    return SchemaValidator(core_schema.list_schema(inner if plain else schema)), plain


def _boundaries_match(records: Sequence[Any]) -> bool:
    """``Message``'s boundary rule for every record: ``kind`` is boundary iff ``boundary``."""
    boundary = MessageKind.BOUNDARY
    return all((r.kind is boundary) is (r.boundary is not None) for r in records)


def _validated(model: type[R], bodies: Sequence[str]) -> list[R] | None:
    """The bodies validated as ``model``, or ``None`` if any is damaged (for the slow path)."""
    try:
        if sum(map(len, bodies)) <= _JOIN_LIMIT:
            validator, unchecked = _page_validator(model)
            records: list[R] = validator.validate_json("[" + ",".join(bodies) + "]")
            if unchecked and not _boundaries_match(records):
                return None  # the row-by-row path reports the damaged row
        else:  # no second copy of large bodies
            records = [model.model_validate_json(body) for body in bodies]
    except (ValidationError, RecursionError):
        return None
    if len(records) != len(bodies):  # a damaged body like '{..},{..}' split in the array
        return None
    return records


def page_from_json(
    model: type[R],
    names: tuple[str, ...],
    rows: Sequence[Sequence[Any]],
    filled: frozenset[str] = frozenset(),
) -> list[R] | None:
    """Rebuild a page of rows (columns in ``names`` order, then the body) at once.

    As :func:`from_json` for every row (``filled`` as there), with the columns checked a
    column at a time and the bodies validated in one pydantic-core call (one JSON array)
    when they are text and small enough. ``None`` sends the caller the row-by-row way.
    """
    keys = frozenset(names)
    types = _column_types(model, keys)
    if types is None or not rows:
        return None
    columns = list(zip(*rows, strict=True))
    bodies = columns[len(names)]
    if set(map(type, bodies)) != {str}:
        return None
    checked = []
    for name, column in zip(names, columns, strict=False):  # the body and the rest follow
        kept = types[name]
        seen = set(map(type, column))
        if not (seen <= kept or (UUID in kept and all(issubclass(t, UUID) for t in seen - kept))):
            return None
        if datetime in seen and set(map(_TZINFO, filter(None, column))) != {UTC}:
            checked.append(tuple(None if value is None else as_utc(value) for value in column))
        else:
            checked.append(column)
    records = _validated(model, bodies)
    if records is None:
        return None
    # Per record, ``__dict__.update(zip(names, values))`` and the fields set, as C loops: one
    # ``setitem`` pass per column (no zip object and pairs per record: half the time).
    dicts = list(map(_DICT, records))
    for name, column in zip(names, checked, strict=True):
        deque(map(operator.setitem, dicts, repeat(name), column), 0)
    deque(map(set.update, map(_FIELDS_SET, records), repeat(keys | filled)), 0)
    return records
