"""Reading AG-UI events from recorded text: a JSON array, JSON Lines, or ``data:`` SSE.

Used by ``threadkeep import --format agui`` and by tests. A UTF-8 byte-order mark is
tolerated; SSE comments (``: ping``), ``id:``/``event:``/``retry:`` fields and multi-line
``data:`` fields follow the WHATWG event-stream rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from ag_ui.core import BaseEvent, Event, RunErrorEvent, ToolCallResultEvent
from pydantic import ValidationError

from .._errors import InvalidArgument
from ._compat import THINKING_EVENTS, UnknownEvent
from ._dialects import coerce_event, normalize_event_data

__all__ = ["EVENT_CLASSES", "ParsedStream", "coerce", "parse_event", "read_event_text"]


def _known_classes() -> dict[str, type[BaseEvent]]:
    union = get_args(Event)[0]
    classes: dict[str, type[BaseEvent]] = {}
    for cls in (*get_args(union), *THINKING_EVENTS):
        default = cls.model_fields["type"].default
        classes[str(getattr(default, "value", default))] = cls
    return classes


EVENT_CLASSES: dict[str, type[BaseEvent]] = _known_classes()
"""Event ``type`` string -> model, for every AG-UI event plus the deprecated ``THINKING_*``."""


def parse_event(data: Mapping[str, Any]) -> BaseEvent:
    """Build the typed event for one decoded JSON object (camelCase or snake_case keys).

    Args:
        data: The event object; ``type`` names its class. An unknown ``type`` gives an
            :class:`UnknownEvent` holding every field. Shapes real stacks send (a
            ``TOOL_CALL_RESULT`` without ``messageId``, a ``RUN_ERROR`` with its text under
            ``error``...) are read first as ``_dialects`` says.

    Returns:
        The event model.

    Raises:
        InvalidArgument: If ``data`` is not an object with a string ``type``, or a known
            event misses a required field (for example ``TEXT_MESSAGE_START`` without
            ``messageId``) or has one of a JSON type its rules cannot read; the message
            names the type and the fields.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise InvalidArgument("an AG-UI event is a JSON object with a string 'type'")
    cls = EVENT_CLASSES.get(data["type"], UnknownEvent)
    try:
        return cls.model_validate(normalize_event_data(data))
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
        raise InvalidArgument(f"invalid {data['type']} event ({fields})") from exc
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        # A field of a JSON type the dialect rules do not expect (a list where a role or an
        # id goes): the event is malformed, as one that does not validate.
        detail = f"{type(exc).__name__}: {exc}"
        raise InvalidArgument(f"invalid {data['type']} event (a field's type: {detail})") from exc


def coerce(event: BaseEvent) -> BaseEvent:
    """Return the typed event an inner agent's event stands for (``_dialects.coerce_event``).

    Args:
        event: An event as an inner agent yielded it.

    Returns:
        The event to fold (``event`` itself unless a dialect rule applies).
    """
    if type(event) in _AS_IS:  # the per-delta path: a typed event no rule rewrites
        return event
    return coerce_event(event, EVENT_CLASSES, (UnknownEvent,))


_AS_IS = frozenset(EVENT_CLASSES.values()) - {RunErrorEvent, ToolCallResultEvent}
"""Event classes ``coerce_event`` returns unchanged whatever their fields: only a
``RUN_ERROR`` or ``TOOL_CALL_RESULT`` (dialect fields as extras), a bare ``BaseEvent``, an
``UnknownEvent`` or a subclass can be rewritten."""


@dataclass(frozen=True, slots=True)
class ParsedStream:
    """Decoded JSON values of an event file, and the items that did not parse.

    Attributes:
        items: Decoded JSON values in file order (events, or a request object, or a mapping
            of named sequences).
        problems: ``"<where>: <what>"`` for each SSE ``data:`` block or JSON line that is not
            JSON; those are skipped, the rest is kept.
        lines: For each item, the line it starts on (JSON Lines, SSE), or ``None`` (an item
            of one JSON document).
        sse: The text was read as server-sent events.
    """

    items: list[Any]
    problems: list[str]
    lines: list[int | None] = field(default_factory=list)
    sse: bool = False


def read_event_text(text: str) -> ParsedStream:
    """Decode event file text: a JSON document, JSON Lines, or server-sent events.

    A JSON array gives its items; one JSON object gives itself; text whose lines start with
    ``data:`` is read as SSE; anything else as JSON Lines.

    Raises:
        InvalidArgument: If the text is empty.
    """
    text = text.removeprefix("\ufeff")
    stripped = text.strip()
    if not stripped:
        raise InvalidArgument("the event file is empty")
    if stripped[0] in "[{":
        try:
            document = json.loads(stripped)
        except (json.JSONDecodeError, RecursionError):
            pass  # JSON Lines or SSE; a too-deep document is reported by line below
        else:
            items = document if isinstance(document, list) else [document]
            return ParsedStream(items, [], [None] * len(items))
    if any(line.startswith("data:") for line in text.splitlines()):
        return _sse(text)
    return _json_lines(text)


def _json_lines(text: str) -> ParsedStream:
    parsed = ParsedStream([], [], [])
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                parsed.items.append(json.loads(line))
                parsed.lines.append(number)
            except json.JSONDecodeError as exc:
                parsed.problems.append(f"line {number}: not JSON ({exc.msg})")
            except RecursionError:
                parsed.problems.append(f"line {number}: not JSON (nested too deep)")
    return parsed


def _sse(text: str) -> ParsedStream:
    parsed = ParsedStream([], [], [], sse=True)
    data: list[str] = []
    start = 0
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate([*lines, ""], start=1):
        if not line:
            if data:
                _decode_block("\n".join(data), start, parsed)
            data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            start = start if data else number
            data.append(value.removeprefix(" "))
    return parsed


def _decode_block(block: str, line: int, parsed: ParsedStream) -> None:
    if not block.strip():
        parsed.problems.append(f"line {line}: empty data field")
        return
    if block.strip() == "[DONE]":
        return  # the end-of-stream sentinel OpenAI-style servers send
    try:
        parsed.items.append(json.loads(block))
        parsed.lines.append(line)
    except json.JSONDecodeError as exc:
        parsed.problems.append(f"line {line}: data is not JSON ({exc.msg})")
    except RecursionError:
        parsed.problems.append(f"line {line}: data is not JSON (nested too deep)")
