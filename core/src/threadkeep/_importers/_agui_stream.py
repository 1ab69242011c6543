"""Reading one AG-UI recording file for the import, streamed: its outline, then a run's events.

Every layout is read in bounded memory, in both passes (the outline's types and the JSON
Lines reading are in ``_agui_read``):

- JSON Lines: a line at a time (``_agui_read.lines_outline``);
- one JSON document (an array of events, an object of named streams): an item at a time
  (``_jsonstream``: ``json.JSONDecoder.raw_decode`` over chunks, so each value is what
  ``json.loads`` gives); a run's span is the byte offsets of its items, read again from
  there. A document that is one object and not named streams (a request, a single event)
  is read whole: it is one request or one event;
- server-sent events: a line at a time, a ``data:`` block at a time (``_sse_stream``).

A document that does not parse refuses the import when the items read before the error
held AG-UI events ("``<file>: <reason> at line L column C (byte B, item I)``": the line
and column as ``json.loads`` places them, the byte offset, and the index of the top-level
item, which is what locates the error in a one-line document); a file that does not parse
as one document and held no events before the error is read as text lines instead, SSE
when a line starts with ``data:``, else JSON Lines (as the whole-text reader did).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ag_ui.core import BaseEvent

from .._errors import InvalidArgument
from ..agui._wire import parse_event
from ._agui_read import (
    BOM,
    Notes,
    Recording,
    Span,
    Splitter,
    finish,
    is_json_lines,
    lines_outline,
    outline_event,
    stamp_of,
)
from ._agui_request import RequestRef, digest, normalize_request
from ._jsonstream import JsonReader, JsonStreamError
from ._sse_stream import SseDecodeError, has_data_line, sse_items

__all__ = ["SpanReader", "outline_file"]

_log = logging.getLogger("threadkeep.import")
_SPACE = b" \t\r\n"


def outline_file(path: Path, *, name: str, label: str, strict: bool, pair: bool) -> list[Recording]:
    """Read one file in outline (see the module docstring and ``_agui_read``).

    Args:
        path: The file.
        name: The recording's name.
        label: The file's name as the import shows it (its path under the imported
            directory): an object of named streams gives recordings ``<label>#<stream>``.
        strict: The file was named directly: holding no AG-UI is an error, not a note.
        pair: It is a request or response of a pair (a run folder's ``request.json``):
            a file that is not UTF-8 text is an error naming it, not a note.

    Returns:
        The file's recordings (``[]`` for a file that is not AG-UI, after a note).

    Raises:
        InvalidArgument: If the file cannot be read, is an AG-UI file that is malformed
            (a line or item that is not JSON: the message names the file and where; a
            request that is not a ``RunAgentInput``), or (``strict``) holds no AG-UI
            events or request.
    """
    try:
        stamp = stamp_of(path)
        lines = is_json_lines(path)
        head = _head(path)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    if lines:
        found = lines_outline(path, name, stamp, strict=strict, pair=pair, documents=True)
        if found is not None:
            return found
    if head in (b"[", b"{"):
        found = _document_outline(path, name, label, stamp, strict=strict, pair=pair)
        if found is not None:
            return found
    with path.open("rb") as file:
        sse = has_data_line(file)
    if sse:
        return _sse_outline(path, name, stamp, strict=strict, pair=pair)
    found = lines_outline(path, name, stamp, strict=strict, pair=pair, documents=False)
    return found or []


def _head(path: Path) -> bytes:
    """The file's first byte that is not a BOM or JSON whitespace (``b""``: none)."""
    with path.open("rb") as file:
        first = True
        while chunk := file.read(1 << 16):
            text = chunk.removeprefix(BOM) if first else chunk
            first = False
            stripped = text.lstrip(_SPACE)
            if stripped:
                return stripped[:1]
    return b""


def _file_digest(path: Path) -> str:
    """The digest of the file's text: SHA-256 of its bytes after a BOM (``digest(text)``)."""
    hasher = hashlib.sha256()
    with path.open("rb") as file:
        head = file.read(len(BOM))
        hasher.update(head if head != BOM else b"")
        while chunk := file.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()[:16]


# -- one JSON document ------------------------------------------------------------------


def _document_outline(
    path: Path, name: str, label: str, stamp: tuple[int, int], *, strict: bool, pair: bool
) -> list[Recording] | None:
    """The outline of a JSON document, an item at a time; ``None``: it is not one document."""
    notes = Notes()
    streams: dict[str, Splitter] = {}
    try:
        with path.open("rb") as file:
            reader = JsonReader(file)
            if reader.peek() == "[":
                streams[""] = Splitter(path, None, "json", stamp)
                _outline_array(reader, streams[""], notes, "")
                named = False
            else:
                named = _outline_object(reader, path, stamp, notes, streams)
            reader.end()
    except JsonStreamError as exc:
        if any(s.segments or s.opened is not None for s in streams.values()):
            raise InvalidArgument(f"{path}: {exc.where()}; the file is not valid JSON") from exc
        return None  # read as text lines, as the whole-text reader did
    text_digest = _file_digest(path)
    found: list[Recording] = []
    if "" in streams and not named:
        segments = streams[""].segments
        found = [Recording(name, segments, digest=text_digest)] if segments else []
    elif named:
        for key, splitter in streams.items():
            recording = Recording(f"{label}#{key}", digest=digest(text_digest, key))
            recording.segments = splitter.segments
            found += [recording] if recording.segments else []
    else:
        return _single_document(path, name, stamp, text_digest, strict=strict, pair=pair)
    return finish(path, found, notes, strict=strict, sse=False)


def _outline_array(reader: JsonReader, splitter: Splitter, notes: Notes, prefix: str) -> None:
    end = 0
    for item in reader.array_items():
        index = reader.index or 0
        outlined = outline_event(item.value)
        if isinstance(outlined, str):
            notes.skip(f"{prefix}event {index}: {outlined}")
        else:
            splitter.add(outlined, item.start, index, None)
        end = item.end
    splitter.close(end)


def _outline_object(
    reader: JsonReader,
    path: Path,
    stamp: tuple[int, int],
    notes: Notes,
    streams: dict[str, Splitter],
) -> bool:
    """Outline an object whose every value is an array (named streams); ``False``: it is not.

    A ``messages`` key makes it a request, whatever its other values. A key given twice
    keeps its last array (as ``json.loads`` keeps the last value).
    """
    named = True
    keys = 0
    for key in reader.object_keys():
        keys += 1
        if named and key != "messages" and reader.peek() == "[":
            splitter = streams[key] = Splitter(path, key, "json", stamp)
            _outline_array(reader, splitter, notes, f"{key}: ")
        else:
            reader.value()
            named = False
    return named and keys > 0


def _single_document(
    path: Path, name: str, stamp: tuple[int, int], text_digest: str, *, strict: bool, pair: bool
) -> list[Recording]:
    """A document that is one object and not named streams: a request, or one item."""
    with path.open("rb") as file:
        item = JsonReader(file).value()
    document = item.value
    notes = Notes()
    is_request = isinstance(document, dict) and "type" not in document
    if is_request and isinstance(document.get("messages"), list):
        request = normalize_request(document, where=str(path))
        ref = RequestRef(str(path), request.thread_id, request.run_id)
        found = [Recording(name, request=ref, digest=text_digest)]
        return finish(path, found, notes, strict=strict, sse=False)
    splitter = Splitter(path, None, "json", stamp)
    outlined = outline_event(document)
    if isinstance(outlined, str):
        notes.skip(f"event 0: {outlined}")
    else:
        splitter.add(outlined, item.start, 0, None)
    splitter.close(item.end)
    found = [Recording(name, splitter.segments, digest=text_digest)] if splitter.segments else []
    return finish(path, found, notes, strict=strict, sse=False)


# -- server-sent events -----------------------------------------------------------------


def _sse_outline(
    path: Path, name: str, stamp: tuple[int, int], *, strict: bool, pair: bool
) -> list[Recording]:
    splitter = Splitter(path, None, "sse", stamp)
    notes = Notes()
    items = 0
    with path.open("rb") as file:
        try:
            for block in sse_items(file):
                if block.problem is not None:
                    notes.problems.append(block.problem)
                    continue
                outlined = outline_event(block.value)
                if isinstance(outlined, str):
                    notes.skip(f"event {items} (line {block.line}): {outlined}")
                else:
                    splitter.add(outlined, block.start, items, block.line)
                items += 1
        except SseDecodeError as exc:
            if splitter.opened is not None or splitter.segments or strict or pair:
                raise InvalidArgument(f"{path}: {exc}") from exc
            _log.warning("skipped %s: not an AG-UI file (not UTF-8 text)", path)
            return []
        splitter.close(file.seek(0, 2))
    found = [Recording(name, splitter.segments, digest=_file_digest(path))]
    return finish(path, found if splitter.segments else [], notes, strict=strict, sse=True)


# -- the second pass --------------------------------------------------------------------


class SpanReader:
    """Reads runs' events again, in full (pass 2), from their spans' byte offsets."""

    def events(self, span: Span) -> list[BaseEvent]:
        """The events of one run, parsed; items that are not events are skipped (warned).

        Raises:
            InvalidArgument: If the file changed since it was outlined.
        """
        try:
            changed = stamp_of(Path(span.path)) != span.stamp
        except OSError:
            changed = True
        if changed:
            raise _changed(span)
        skipped: list[str] = []
        events: list[BaseEvent] = []
        try:
            with open(span.path, "rb") as file:
                for index, line, item in _READERS[span.layout](file, span):
                    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                        continue  # noted when the file was outlined
                    try:
                        events.append(parse_event(item))
                    except InvalidArgument as exc:
                        where = f" (line {line})" if line is not None else ""
                        prefix = f"{span.key}: " if span.key is not None else ""
                        skipped.append(f"{prefix}event {index}{where}: {exc}")
        except (OSError, ValueError, JsonStreamError, SseDecodeError) as exc:
            raise _changed(span) from exc
        if skipped:
            count = f"{len(skipped)} item{'s' if len(skipped) > 1 else ''}"
            _log.warning(
                "%s: %s skipped as not AG-UI events (first: %s)", span.path, count, skipped[0]
            )
        return events


def _changed(span: Span) -> InvalidArgument:
    return InvalidArgument(f"{span.path} changed during the import; import it again")


_Items = Iterator[tuple[int, int | None, Any]]


def _line_items(file: IO[bytes], span: Span) -> _Items:
    index, line = span.index, span.line or 1
    file.seek(span.start)
    position = span.start
    while position < span.end:
        raw = file.readline()
        if not raw:
            break
        position += len(raw)
        text = raw.decode("utf-8")
        if text.strip():
            yield index, line, json.loads(text)
            index += 1
        line += 1


def _json_items(file: IO[bytes], span: Span) -> _Items:
    reader = JsonReader(file, start=span.start, chunk=span.end - span.start + 64)
    for offset, item in enumerate(reader.items_between(span.end)):
        yield span.index + offset, None, item.value


def _sse_block_items(file: IO[bytes], span: Span) -> _Items:
    index = span.index
    for block in sse_items(file, start=span.start, end=span.end, line=span.line or 1):
        if block.problem is None:
            yield index, block.line, block.value
            index += 1


_READERS = {"lines": _line_items, "json": _json_items, "sse": _sse_block_items}
