r"""Streaming server-sent events: one ``data:`` block at a time, with the byte offset it starts at.

The rules are those of the whole-text reader (``agui._wire.read_event_text``), applied a
line at a time so that a recording of any size holds one block in memory:

- lines end at ``\\r\\n``, ``\\r`` or ``\\n``; a UTF-8 byte-order mark at the start is ignored;
- a line is ``field: value`` (one space after the colon dropped); only ``data`` fields are
  kept, a block's ``data`` lines joined with ``\\n`` (multi-line ``data:``); ``event:``,
  ``id:``, ``retry:`` and comment lines (``: ...``) are read and ignored;
- a blank line (or the end of the file) ends the block; a block whose data is blank is a
  problem ("empty data field"), ``[DONE]`` (the OpenAI-style end of stream) is skipped, and
  a block that is not JSON is a problem ("data is not JSON"); problems are reported, not
  raised (keep-alives and such are skipped by the caller with a warning).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from ._jsonstream import BOM

__all__ = ["SseDecodeError", "SseItem", "has_data_line", "sse_items"]

_BREAK = re.compile(rb"\r\n|\r|\n")
_DATA = b"data:"


@dataclass(frozen=True, slots=True)
class SseItem:
    """One ``data:`` block: its JSON value, or the problem that kept it from being one.

    Attributes:
        value: The decoded JSON value (``None`` with a problem).
        problem: ``"line N: ..."`` for a block that is not JSON or is empty, else ``None``.
        start: The byte offset of the block's first ``data:`` line.
        line: That line's number (from 1).
    """

    value: Any
    problem: str | None
    start: int
    line: int


class SseDecodeError(Exception):
    """A line that is not UTF-8 text (``line``: its number, ``byte``: the offset in it)."""

    def __init__(self, line: int, byte: int) -> None:
        self.line, self.byte = line, byte
        super().__init__(f"line {line} is not UTF-8 text (byte {byte})")


def has_data_line(file: IO[bytes]) -> bool:
    """Whether any line of the file starts with ``data:`` (read a line at a time)."""
    file.seek(0)
    for number, raw in enumerate(file):
        line = raw.removeprefix(BOM) if number == 0 else raw
        for piece in _BREAK.split(line):
            if piece.startswith(_DATA):
                return True
    return False


def _pieces(raw: bytes, offset: int) -> list[tuple[int, bytes]]:
    """The lines of one read that holds a CR too (CR, LF or CRLF ends), with their offsets."""
    found: list[tuple[int, bytes]] = []
    at = 0
    for match in _BREAK.finditer(raw):
        found.append((offset + at, raw[at : match.start()]))
        at = match.end()
    if at < len(raw):  # the last line, without a line break
        found.append((offset + at, raw[at:]))
    return found


def sse_items(
    file: IO[bytes], *, start: int = 0, end: int | None = None, line: int = 1
) -> Iterator[SseItem]:
    """Yield the ``data:`` blocks of an SSE file, from byte ``start`` to byte ``end``.

    Args:
        file: The file, opened in binary.
        start: Where to start: ``0``, or a block's ``start`` from an earlier read.
        end: Stop before the block starting at or after this offset (``None``: the end).
        line: The line number at ``start``.

    Raises:
        SseDecodeError: If a line is not UTF-8 text.
    """
    file.seek(start)
    offset = start
    if start == 0:
        offset = len(BOM) if file.read(len(BOM)) == BOM else 0
        file.seek(offset)
    stop = end if end is not None else -1
    data: list[str] = []
    first = (0, 0)
    number = line
    for read in file:
        if b"\r" in read:
            pieces = _pieces(read, offset)
        else:  # the common case: one line ending in "\n"
            pieces = [(offset, read[:-1] if read.endswith(b"\n") else read)]
        offset += len(read)
        for at, raw in pieces:
            number += 1
            if not raw:
                found = _block("\n".join(data), *first) if data else None
                if found is not None:
                    yield found
                data = []
                continue
            if not data and stop >= 0 and at >= stop:
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SseDecodeError(number - 1, exc.start) from exc
            field, _, value = text.partition(":")
            if field == "data":
                if not data:
                    first = (at, number - 1)
                data.append(value[1:] if value.startswith(" ") else value)
    found = _block("\n".join(data), *first) if data else None
    if found is not None:
        yield found


def _block(block: str, start: int, line: int) -> SseItem | None:
    """The block's item (``None``: the ``[DONE]`` sentinel, skipped)."""
    if not block.strip():
        return SseItem(None, f"line {line}: empty data field", start, line)
    if block.strip() == "[DONE]":
        return None
    try:
        return SseItem(json.loads(block), None, start, line)
    except json.JSONDecodeError as exc:
        return SseItem(None, f"line {line}: data is not JSON ({exc.msg})", start, line)
    except RecursionError:
        return SseItem(None, f"line {line}: data is not JSON (nested too deep)", start, line)
