"""A small RFC 6902 JSON Patch, for AG-UI ``STATE_DELTA`` and ``ACTIVITY_DELTA`` events.

The AG-UI protocol carries shared state and activity content as JSON documents changed by
JSON Patch operations (``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``). The
fold keeps the current document so the run's final state can be stored.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from .._errors import InvalidArgument

__all__ = ["apply_patch"]


def apply_patch(document: Any, operations: Sequence[Any]) -> Any:
    """Return ``document`` with the JSON Patch ``operations`` applied (the input is not changed).

    Args:
        document: A JSON value (dicts, lists, scalars).
        operations: RFC 6902 operations as mappings, or pydantic models with ``op``/``path``/
            ``value``/``from_`` attributes (the AG-UI SDK's operation classes).

    Returns:
        The patched document (a deep copy).

    Raises:
        InvalidArgument: If an operation is malformed, a path does not exist where it must,
            or a ``test`` operation fails (RFC 6902: the whole patch is then rejected).
    """
    result = copy.deepcopy(document)
    for raw in operations:
        operation = _as_mapping(raw)
        result = _apply_one(result, operation)
    return result


def _as_mapping(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        data: dict[str, Any] = dump(by_alias=True)
        return data
    raise InvalidArgument(f"a JSON Patch operation is an object, not {type(raw).__name__}")


def _apply_one(doc: Any, operation: dict[str, Any]) -> Any:
    op = operation.get("op")
    path = _pointer(operation.get("path"))
    if op == "add":
        return _add(doc, path, copy.deepcopy(operation.get("value")))
    if op == "remove":
        return _remove(doc, path)[0]
    if op == "replace":
        doc = _remove(doc, path)[0]
        return _add(doc, path, copy.deepcopy(operation.get("value")))
    if op in ("move", "copy"):
        source = _pointer(operation.get("from"))
        value = copy.deepcopy(_get(doc, source))
        if op == "move":
            doc = _remove(doc, source)[0]
        return _add(doc, path, value)
    if op == "test":
        if _get(doc, path) != operation.get("value"):
            raise InvalidArgument(f"JSON Patch test failed at {operation.get('path')!r}")
        return doc
    raise InvalidArgument(f"unknown JSON Patch op {op!r}")


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise InvalidArgument(f"{path!r} is not a JSON Pointer")
    if not path:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], segment: str, *, insert: bool) -> int:
    if insert and segment == "-":
        return len(container)
    if not segment.isdigit():
        raise InvalidArgument(f"{segment!r} is not an array index")
    index = int(segment)
    if index > len(container) or (not insert and index == len(container)):
        raise InvalidArgument(f"array index {index} is out of range")
    return index


def _parent(doc: Any, path: list[str]) -> Any:
    return _get(doc, path[:-1])


def _get(doc: Any, path: list[str]) -> Any:
    current = doc
    for token in path:
        if isinstance(current, dict):
            if token not in current:
                raise InvalidArgument(f"JSON Pointer member {token!r} does not exist")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, insert=False)]
        else:
            raise InvalidArgument(f"JSON Pointer goes through a scalar at {token!r}")
    return current


def _add(doc: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _parent(doc, path)
    token = path[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, insert=True), value)
    else:
        raise InvalidArgument(f"cannot add {token!r} to a scalar")
    return doc


def _remove(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, doc
    parent = _parent(doc, path)
    token = path[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise InvalidArgument(f"JSON Pointer member {token!r} does not exist")
        return doc, parent.pop(token)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, token, insert=False))
    raise InvalidArgument(f"cannot remove {token!r} from a scalar")
