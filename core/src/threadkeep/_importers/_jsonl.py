"""Streaming JSON Lines: one record at a time, so a file of any size reads in bounded memory.

Claude Code session files and agent event logs are JSON Lines whose single lines often hold
hundreds of kilobytes (a tool result with a whole file in it); the importers read them line
by line from the binary file instead of loading the text whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._errors import InvalidArgument

__all__ = ["iter_json_lines", "open_error", "parse_json_text"]


def open_error(path: Path, exc: OSError) -> InvalidArgument:
    """Return the one-line error for a file that cannot be opened or read.

    Args:
        path: The file.
        exc: The error ``open``/``read`` raised.
    """
    if isinstance(exc, FileNotFoundError):
        return InvalidArgument(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return InvalidArgument(f"{path} is a directory, not a transcript file")
    return InvalidArgument(f"cannot read {path}: {exc.strerror or exc}")


def parse_json_text(text: str, where: str) -> Any:
    """Parse one JSON value, turning every failure into ``InvalidArgument`` naming ``where``.

    Args:
        text: The JSON text.
        where: The file and line, for the message (``"a.jsonl: line 3"``).

    Raises:
        InvalidArgument: If the text is not JSON, or nests too deep for the parser.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{where} is not JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise InvalidArgument(f"{where} nests too deep to be read") from exc


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    r"""Yield ``(line number, value)`` for each non-blank line of a JSON Lines file.

    Lines are split on ``\\n`` only (U+2028 may appear raw inside JSON strings), a UTF-8
    byte-order mark on the first line is ignored, and only one line is held at a time.

    Args:
        path: The file.

    Yields:
        The line number (from 1) and the parsed value of that line.

    Raises:
        InvalidArgument: If the file cannot be read, a line is not UTF-8, or a line is not
            JSON; the message names the file and the line.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise open_error(path, exc) from exc
    with handle:
        try:
            for number, read in enumerate(handle, start=1):
                raw = read.removeprefix(b"\xef\xbb\xbf") if number == 1 else read
                if not raw.strip():
                    continue
                where = f"{path.name}: line {number}"
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InvalidArgument(f"{where} is not UTF-8 text (byte {exc.start})") from exc
                yield number, parse_json_text(text, where)
        except OSError as exc:
            raise open_error(path, exc) from exc
