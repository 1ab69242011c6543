"""Streaming one JSON document: the items of an array, the members of an object, one at a time.

A recording or transcript that is one JSON document (a JSON array of events, an object of
named streams, an array of records) can be gigabytes; this reads it in chunks and yields
one top-level item (or one item of a member's array) at a time, with the byte offsets it
spans, so memory holds one item, not the file.

Each item is parsed by the standard library's ``json.JSONDecoder.raw_decode``: the values are
exactly what :func:`json.loads` of the whole file gives (lone surrogate escapes kept as lone
surrogates, surrogate pairs joined, integers of any size, ``1e400`` as ``inf``, ``NaN`` and
``Infinity`` accepted, the last of duplicate keys winning). ``ijson`` (its ``yajl2_c``
backend, which the CPython 3.11 wheel ships, and its pure-Python one) differs from
``json.loads`` on these (it refuses ``1e400``, ``NaN`` and a UTF-8 BOM on both backends, and
integers past 64 bits and lone surrogate escapes on ``yajl2_c``), so it is not used to parse:
the importers' rule is that a file means what ``json.loads`` says it means.

A syntax error raises :class:`JsonStreamError` with the line, column, byte offset and item
index of the error, as ``json.loads`` of the whole text would place it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["BOM", "JsonItem", "JsonReader", "JsonStreamError"]

BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_TAIL = 12
"""A decode error, or a value ending, this close to the end of the buffer may be the
buffer's end, not the file's (a number, literal or ``\\uXXXX`` escape cut in two): more is
read and it is tried again."""


class JsonStreamError(Exception):
    """A JSON document that does not parse, placed as ``json.loads`` would place it.

    Attributes:
        reason: What is wrong (``json.JSONDecodeError.msg``, or the UTF-8 or nesting error).
        line: The line of the error (from 1; ``None`` for bytes that are not UTF-8).
        column: Its column (from 1, in characters; ``None`` likewise).
        offset: Its byte offset in the file.
        index: The top-level item it is in (``None``: outside any item).
    """

    def __init__(
        self, reason: str, line: int | None, column: int | None, offset: int, index: int | None
    ) -> None:
        self.reason, self.line, self.column = reason, line, column
        self.offset, self.index = offset, index
        super().__init__(self.where())

    def where(self) -> str:
        """The error as one phrase: ``"<reason> at line L column C (byte B, item I)"``.

        Bytes that are not UTF-8 are ``"not UTF-8 text at byte B, item I"``.
        """
        item = f", item {self.index}" if self.index is not None else ""
        if self.line is None:
            return f"{self.reason} at byte {self.offset}{item}"
        at = "" if self.reason.endswith(" at") else " at"  # "Unterminated string starting at"
        return f"{self.reason}{at} line {self.line} column {self.column} (byte {self.offset}{item})"


@dataclass(frozen=True, slots=True)
class JsonItem:
    """One item of a document: its value and where its text is.

    Attributes:
        value: The parsed value.
        start: The byte offset of its first character.
        end: The byte offset past its last character.
    """

    value: Any
    start: int
    end: int


_SPACES = " \t\n\r"


class JsonReader:
    """Reads a binary file holding JSON text from a byte offset on, in chunks.

    The text read and not yet consumed is held (one item and at most a chunk more). Byte
    offsets are character offsets while the buffer is ASCII, else counted from a mark that
    moves forward with the reading; lines are counted only when an error is placed.
    """

    def __init__(
        self, file: IO[bytes], *, start: int = 0, line: int = 1, chunk: int | None = None
    ) -> None:
        """Read ``file`` from byte ``start`` (at line ``line``); a BOM there is skipped.

        ``chunk`` is the size of a read (default 1 MiB): a caller that reads a span again
        gives its length, so that a small span costs a small read.
        """
        file.seek(start)
        if start == 0 and file.read(len(BOM)) != BOM:
            file.seek(0)
        self._file = file
        self._chunk = chunk
        self._pending = b""  # the first bytes of a character the last read cut
        self._bad: int | None = None  # the offset of bytes that are not UTF-8
        self._read_bytes = file.tell()
        self._text = ""
        self._pos = 0
        self._eof = False
        self._ascii = True  # the buffer is ASCII: byte offsets are character offsets
        self._base_bytes = file.tell()  # the byte offset of the buffer's first character
        self._base_chars = 0  # characters dropped before the buffer
        self._base_line = line  # the line of the buffer's first character
        self._base_newline = -1  # the character offset of the last newline dropped
        self._mark = 0  # a position whose byte offset is known (a non-ASCII buffer)
        self._mark_bytes = self._base_bytes
        self.index: int | None = None
        """The item being read (for errors), set by the caller."""

    # -- reading ------------------------------------------------------------------------

    def _fill(self, at_least: int = 0) -> bool:
        """Read about ``at_least`` more characters; ``False`` at the end of the file.

        Raises:
            JsonStreamError: When the text read before reaches bytes that are not UTF-8
                (raised only once the parser needs what follows them, so that the error
                names the item they are in).
        """
        if self._bad is not None:
            raise JsonStreamError("not UTF-8 text", None, None, self._bad, self.index)
        if self._eof:
            return False
        if self._pos > _CHUNK:
            self._drop()
        raw = self._file.read(max(at_least, self._chunk or _CHUNK))
        data, self._pending = self._pending + raw, b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data[: exc.start].decode("utf-8")
            if raw and exc.end == len(data) and exc.reason == "unexpected end of data":
                self._pending = data[exc.start :]  # a character cut by the read
            else:
                self._bad = self._read_bytes - (len(data) - len(raw)) + exc.start
        self._read_bytes += len(raw)
        self._eof = not raw
        self._ascii = self._ascii and text.isascii()
        self._text += text
        return bool(raw) or bool(text)

    def _drop(self) -> None:
        """Drop the consumed text, keeping the offsets and lines of what follows."""
        pos, text = self._pos, self._text
        self._base_bytes = self._offset(pos)
        self._base_line += text.count("\n", 0, pos)
        last = text.rfind("\n", 0, pos)
        self._base_newline = self._base_chars + last if last >= 0 else self._base_newline
        self._base_chars += pos
        self._text, self._pos = text[pos:], 0
        self._mark, self._mark_bytes = 0, self._base_bytes
        self._ascii = self._text.isascii()

    def _offset(self, pos: int) -> int:
        """The byte offset of the buffer's position ``pos``."""
        if self._ascii:
            return self._base_bytes + pos
        if pos < self._mark:  # behind the mark (an error placed back): count from the start
            head = self._text[:pos]
            return self._base_bytes + len(head.encode("utf-8", "surrogatepass"))
        piece = self._text[self._mark : pos]
        self._mark_bytes += len(piece.encode("utf-8", "surrogatepass"))
        self._mark = pos
        return self._mark_bytes

    def _error(self, reason: str, pos: int) -> JsonStreamError:
        pos = min(pos, len(self._text))
        text = self._text
        line = self._base_line + text.count("\n", 0, pos)
        last = text.rfind("\n", 0, pos)
        newline = self._base_chars + last if last >= 0 else self._base_newline
        column = self._base_chars + pos - newline
        return JsonStreamError(reason, line, column, self._offset(pos), self.index)

    def offset(self) -> int:
        """The byte offset of the read position."""
        return self._offset(self._pos)

    def peek(self) -> str:
        """Skip whitespace; return the next character (``""`` at the end of the file)."""
        while True:
            text, pos = self._text, self._pos
            if pos < len(text) and text[pos] not in _SPACES:
                return text[pos]
            match = _SPACE.match(text, pos)
            self._pos = match.end() if match else pos
            if self._pos < len(text):
                return text[self._pos]
            if not self._fill():
                return ""

    def take(self, expected: str, reason: str) -> None:
        """Consume the character ``expected`` (after whitespace).

        Raises:
            JsonStreamError: If the next character is another one (``reason`` says what
                was expected).
        """
        if self.peek() != expected:
            raise self._error(reason, self._pos)
        self._pos += 1

    def value(self) -> JsonItem:
        """Read and parse the next JSON value (after whitespace).

        Raises:
            JsonStreamError: If it is not JSON, or nests deeper than the parser recurses.
        """
        self.peek()
        while True:
            text, pos = self._text, self._pos
            try:
                value, end = _DECODER.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                if self._could_be_cut(exc) and not self._eof:
                    self._fill(len(text) - pos)  # the buffer doubles
                    continue
                raise self._error(exc.msg, exc.pos) from exc
            except RecursionError as exc:
                raise self._error("nested too deep", pos) from exc
            if end > len(text) - _TAIL and not self._eof:
                self._fill()  # a value may go on past the buffer's end ("1." of "1.5")
                continue
            start = self._offset(pos)
            self._pos = end
            return JsonItem(value, start, self._offset(end))

    def _could_be_cut(self, exc: json.JSONDecodeError) -> bool:
        return exc.pos >= len(self._text) - _TAIL or exc.msg.startswith("Unterminated string")

    def end(self) -> None:
        """Check that only whitespace is left.

        Raises:
            JsonStreamError: ``Extra data``, as ``json.loads`` says it, if anything else is.
        """
        if self.peek() != "":
            raise self._error("Extra data", self._pos)

    # -- documents ----------------------------------------------------------------------

    def array_items(self) -> Iterator[JsonItem]:
        """Yield the items of the array that starts at the read position, then consume it.

        ``index`` is set to each item's position as it is read (errors name it).

        Raises:
            JsonStreamError: If the array does not parse.
        """
        self.take("[", "Expecting value")
        if self.peek() == "]":
            self._pos += 1
            return
        index = 0
        while True:
            self.index = index
            yield self.value()
            following = self.peek()
            self._pos += 1 if following in ",]" and following else 0
            if following == "]":
                self.index = None
                return
            if following != ",":
                raise self._error("Expecting ',' delimiter", self._pos)
            index += 1

    def object_keys(self) -> Iterator[str]:
        """Yield the keys of the object at the read position; the caller reads each value.

        After each key the read position is at its value; the caller consumes the value
        (:meth:`value` or :meth:`array_items`) before asking for the next key.

        Raises:
            JsonStreamError: If the object does not parse.
        """
        self.take("{", "Expecting value")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                raise self._error("Expecting property name enclosed in double quotes", self._pos)
            key = self.value().value
            self.take(":", "Expecting ':' delimiter")
            yield key
            following = self.peek()
            if following == "}":
                self._pos += 1
                return
            self.take(",", "Expecting ',' delimiter")

    def items_between(self, end: int) -> Iterator[JsonItem]:
        """Yield the values from the read position up to byte ``end``, skipping commas.

        The second read of a run's span (its start and end are item offsets found by
        :meth:`array_items`): the file is read again from the span's start only (give
        the reader the span's length as its ``chunk``).
        """
        while self.peek() not in ("", "]") and self.offset() < end:
            yield self.value()
            if self.peek() == ",":
                self._pos += 1
