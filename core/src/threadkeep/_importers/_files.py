"""Reading transcript files: one JSON document, or JSON Lines (one record per line)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .._content import check_content
from .._errors import InvalidArgument, InvalidContent
from ._jsonstream import JsonReader, JsonStreamError

__all__ = [
    "STREAM_BYTES",
    "aware_timestamp",
    "check_record",
    "find_files",
    "iter_records",
    "read_records",
]

STREAM_BYTES = 64 * 1024 * 1024
"""Files larger than this (bytes) are read as JSON Lines one line at a time (see
:func:`iter_records`), so memory holds one record, not the file."""


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
    except RecursionError as exc:
        raise _too_deep(path) from exc
    except json.JSONDecodeError as exc:
        if stripped.startswith("["):
            msg = f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            raise InvalidArgument(msg) from exc
        return _json_lines(text, path)
    records = document if isinstance(document, list) else [document]
    return records, [None] * len(records)


def iter_records(path: Path) -> Iterator[tuple[Any, int | None]]:
    """Yield ``(record, line)`` of a transcript file, as :func:`read_records` reads them.

    A file of at most :data:`STREAM_BYTES` is read whole by :func:`read_records`. A larger
    JSON array is streamed a record at a time (``_jsonstream``: each record is what
    ``json.loads`` gives); a larger file that does not start with ``[`` is streamed as JSON
    Lines, one line in memory at a time (a large single object that is not JSON Lines is
    read whole: it is one record). Each call reads the file again.

    Raises:
        InvalidArgument: As :func:`read_records`, naming the file and line (for a streamed
            array: the line, column, byte offset and record index of the error).
    """
    if not _is_large(path):
        records, lines = read_records(path)
        yield from zip(records, lines, strict=True)
        return
    if _first_char(path) == "[":
        yield from _stream_array(path)
        return
    try:
        file = path.open(encoding="utf-8-sig", newline="\n")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from exc
    with file:
        try:
            yield from _stream_lines(file, path)
        except UnicodeDecodeError as exc:
            raise InvalidArgument(f"{path} is not UTF-8 text (byte {exc.start})") from exc
        except _NotJsonLines:
            pass
        else:
            return
    records, lines = read_records(path)  # one document spread over lines: read it whole
    yield from zip(records, lines, strict=True)


def _stream_array(path: Path) -> Iterator[tuple[Any, int | None]]:
    try:
        file = path.open("rb")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from exc
    with file:
        reader = JsonReader(file)
        try:
            for item in reader.array_items():
                yield item.value, None
            reader.end()
        except JsonStreamError as exc:
            if exc.reason == "nested too deep":
                raise _too_deep(path) from exc
            raise InvalidArgument(f"{path} is not valid JSON: {exc.where()}") from exc
        except OSError as exc:
            raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from exc


class _NotJsonLines(Exception):
    """The first line of a large file does not parse: it is one JSON document."""


def _stream_lines(file: Any, path: Path) -> Iterator[tuple[Any, int | None]]:
    first = True
    for number, line in enumerate(file, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError as exc:
            raise _too_deep(path, number) from exc
        except json.JSONDecodeError as exc:
            if first:
                raise _NotJsonLines from exc
            msg = (
                f"{path} is neither JSON nor JSON Lines: line {number} does not parse "
                f"({exc.msg} at column {exc.colno})"
            )
            raise InvalidArgument(msg) from exc
        first = False
        yield record, number


def _is_large(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > STREAM_BYTES
    except OSError:
        return False


def _first_char(path: Path) -> str:
    with path.open("rb") as file:
        head = file.read(4096).decode("utf-8-sig", "ignore").lstrip()
    return head[:1]


def _too_deep(path: Path, line: int | None = None) -> InvalidArgument:
    """The error for JSON nested deeper than the parser recurses (``RecursionError``)."""
    where = f"{path}: line {line}" if line is not None else str(path)
    return InvalidArgument(f"{where} nests JSON too deep to be read; it is not a transcript")


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
        except RecursionError as exc:
            raise _too_deep(path, number) from exc
        except json.JSONDecodeError as exc:
            msg = (
                f"{path} is neither JSON nor JSON Lines: line {number} does not parse "
                f"({exc.msg} at column {exc.colno})"
            )
            raise InvalidArgument(msg) from exc
    return records, lines


def check_record(record: Any, where: str) -> None:
    """Refuse a record holding what no store can keep: NaN or infinity, or a lone surrogate.

    JSON text may spell both (``Infinity``, an escaped lone surrogate) and the store
    refuses them, so an import checks every record, keys included, before it writes; the
    check is the store's own (:func:`threadkeep._content.check_content`).

    Args:
        record: One record as read from the file.
        where: The file and record (and line), for example ``"a.jsonl: record 2 (line 3)"``.

    Raises:
        InvalidContent: Naming ``where`` and the field that holds the value.
    """
    try:
        check_content(record, "record")
    except InvalidContent as exc:
        raise InvalidContent(f"{where}: {exc}") from exc


def find_files(root: Path, suffixes: frozenset[str]) -> list[tuple[Path, str]]:
    """Return the files to import under ``root`` and a stable label for each.

    Args:
        root: A file (imported whatever its name), or a folder searched recursively for
            files whose suffix is in ``suffixes``.
        suffixes: Lower-case suffixes with the dot (``{".traj"}``).

    Returns:
        ``(path, label)`` pairs sorted by label; the label is the file name for a file and
        the POSIX path relative to ``root`` for a folder's files (chat keys are built from
        it, so it does not depend on the current directory).

    Raises:
        InvalidArgument: If ``root`` does not exist, or a folder holds no such file.
    """
    if root.is_file():
        return [(root, root.name)]
    if not root.is_dir():
        raise InvalidArgument(f"{root}: no such file or directory")
    found = sorted(
        (path.relative_to(root).as_posix(), path)
        for path in root.rglob("*")
        if path.suffix.lower() in suffixes and path.is_file()
    )
    if not found:
        names = ", ".join(sorted(suffixes))
        raise InvalidArgument(f"{root} holds no file to import ({names})")
    return [(path, label) for label, path in found]


def aware_timestamp(value: Any) -> datetime | None:
    """Return an ISO 8601 timestamp with a time zone as a ``datetime``, else ``None``.

    Recorders' timestamps become a message's ``created_at`` (informational, never the
    order); a naive one (no zone: which clock?) or one that does not parse gives ``None``,
    and the importers keep the text in metadata either way.
    """
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
