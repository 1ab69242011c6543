"""Reading transcript files: one JSON document, or JSON Lines (one record per line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._content import check_finite, dump_json
from .._errors import InvalidArgument, InvalidContent

__all__ = ["check_record", "read_records"]


def read_records(path: Path) -> tuple[list[Any], list[int | None]]:
    """Return the records of a transcript file and the line each starts on.

    A file holding a JSON array gives its items; a file holding one JSON object gives that
    object; otherwise each non-blank line is parsed as one JSON record (JSON Lines). A UTF-8
    byte-order mark is ignored.

    Args:
        path: The file.

    Returns:
        The records, in file order (not yet checked for shape), and for each the number of
        its line (from 1) in a JSON Lines file, or ``None`` in a JSON document.

    Raises:
        InvalidArgument: If the file is missing, unreadable, not UTF-8, empty, or neither
            JSON nor JSON Lines; the message names the file and, for JSON Lines, the line.
    """
    text = _read_text(path)
    stripped = text.lstrip()
    if not stripped:
        raise InvalidArgument(f"{path} is empty; expected a JSON array of records or JSON Lines")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if stripped.startswith("["):
            msg = f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            raise InvalidArgument(msg) from exc
        return _json_lines(text, path)
    records = document if isinstance(document, list) else [document]
    return records, [None] * len(records)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise InvalidArgument(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise InvalidArgument(f"{path} is a directory, not a transcript file") from exc
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{path} is not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from exc


def _json_lines(text: str, path: Path) -> tuple[list[Any], list[int | None]]:
    records: list[Any] = []
    lines: list[int | None] = []
    # Split on "\n" only: U+2028 and friends may appear raw inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
            lines.append(number)
        except json.JSONDecodeError as exc:
            msg = (
                f"{path} is neither JSON nor JSON Lines: line {number} does not parse "
                f"({exc.msg} at column {exc.colno})"
            )
            raise InvalidArgument(msg) from exc
    return records, lines


def check_record(record: Any, where: str) -> None:
    """Refuse a record holding what no store can keep: NaN or infinity, or a lone surrogate.

    JSON text may spell both (``Infinity``, an escaped lone surrogate) and the
    store refuses them, so an import checks every record, keys included, before it writes.

    Args:
        record: One record as read from the file.
        where: The file and record (and line), for example ``"a.jsonl: record 2 (line 3)"``.

    Raises:
        InvalidContent: Naming ``where`` and the field that holds the value.
    """
    try:
        check_finite(record, "record")
    except InvalidContent as exc:
        raise InvalidContent(f"{where}: {exc}") from exc
    try:
        dump_json(record)
    except InvalidContent as exc:
        path = _surrogate_path(record)
        if path is None:
            raise InvalidContent(f"{where}: {exc}") from exc
        if path[-1] is _KEY:
            holder = f"the key {path[-2]!a} of {_field(path[:-2])}"
        else:
            holder = _field(path)
        msg = (
            f"{where}: {holder} holds a lone UTF-16 surrogate, which has no UTF-8 form and "
            "cannot be stored; replace it (for example with U+FFFD)"
        )
        raise InvalidContent(msg) from exc


def _field(path: list[Any]) -> str:
    """Return a path of keys as ``record.messages[0].content`` (keys ASCII-escaped)."""
    text = "record"
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else f".{ascii(key)[1:-1]}"
    return text


class _KeyMarker:
    def __repr__(self) -> str:
        return "<key>"


_KEY = _KeyMarker()
"""Ends a :func:`_surrogate_path` when the surrogate is in a key rather than a value."""


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _surrogate_path(value: Any) -> list[Any] | None:
    """Return the keys leading to the first string (or key) holding a lone surrogate."""
    if isinstance(value, str):
        return [] if _has_surrogate(value) else None
    items: Any = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        if isinstance(key, str) and _has_surrogate(key):
            return [key, _KEY]
        found = _surrogate_path(item)
        if found is not None:
            return [key, *found]
    return None
