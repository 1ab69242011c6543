"""Event shapes real stacks send that the protocol models refuse, read as what they mean.

Recorded and live streams of raw SDK agents, Vercel AI and other adapters bend the AG-UI
event schema in a few recurring ways (issue 11, SPEC section 3 "Streams as real stacks send
them fold without loss"). :func:`normalize_event_data` rewrites one decoded event object
into the protocol's shape before it is validated; :func:`coerce_event` does the same for an
event object an inner agent yielded (a bare ``BaseEvent`` or an event carrying the dialect's
fields as extras). The import path (``_wire.parse_event``) and the live path
(``FoldBase.dispatch``) both go through here, so they store the same records.

- ``TOOL_CALL_RESULT`` without ``messageId``: the tool message's id is derived from the
  call it answers, :func:`tool_result_id` (``"result:<toolCallId>"``), so a retry folds to
  the same message. The result under ``result`` (or ``output``) instead of ``content``: a
  string is the content; AG-UI content parts stay parts; any other JSON value becomes its
  JSON text.
- ``RUN_ERROR`` without ``message``: the text is ``error`` (a string, or an object's
  ``message``/``detail``, else the object as JSON), else ``errorMessage``/``detail``, else
  none (``""``); an object's ``code`` (or ``type``) becomes the event's ``code`` when it
  names none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ag_ui.core import BaseEvent, RunErrorEvent, ToolCallResultEvent

__all__ = ["coerce_event", "normalize_event_data", "tool_result_id"]

_PART_TYPES = frozenset({"text", "image", "audio", "video", "document", "binary"})


def tool_result_id(tool_call_id: str) -> str:
    """Return the message id of a tool result that names none: ``"result:<toolCallId>"``.

    Args:
        tool_call_id: The id of the call the result answers.

    Returns:
        A deterministic id, so the same result folded twice is one message.
    """
    return f"result:{tool_call_id}"


def normalize_event_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return a decoded event object rewritten into the protocol's shape (module docstring).

    Args:
        data: One event object (camelCase or snake_case keys); not modified.

    Returns:
        A new mapping; the same fields when no rule applies.
    """
    out = dict(data)
    kind = out.get("type")
    kind = getattr(kind, "value", kind)
    if kind == "TOOL_CALL_RESULT":
        _tool_result(out)
    elif kind == "RUN_ERROR":
        _run_error(out)
    return out


def coerce_event(
    event: BaseEvent,
    classes: Mapping[str, type[BaseEvent]],
    generic: tuple[type[BaseEvent], ...] = (),
) -> BaseEvent:
    """Return the typed event an inner agent's event stands for (module docstring).

    A bare ``BaseEvent`` (or an unknown-type event) whose ``type`` names a known event is
    validated into that class after :func:`normalize_event_data`; a ``RUN_ERROR`` or
    ``TOOL_CALL_RESULT`` carrying the dialect's fields as extras gets them applied. Anything
    else (or anything that still does not validate) is returned unchanged.

    Args:
        event: The event as yielded.
        classes: Event ``type`` string -> model (``_wire.EVENT_CLASSES``).
        generic: Event classes that carry any type (``UnknownEvent``), coerced like
            ``BaseEvent``.

    Returns:
        The event to fold.
    """
    kind = getattr(event.type, "value", event.type)
    target = classes.get(str(kind))
    if target is None or (isinstance(event, target) and not _needs_rules(event)):
        return event
    if not isinstance(event, target) and type(event) not in (BaseEvent, *generic):
        return event  # a specific event of another family: not ours to rewrite
    data = normalize_event_data(event.model_dump(by_alias=True))
    data["type"] = str(kind)
    try:
        return target.model_validate(data)
    except ValueError:
        return event


def _needs_rules(event: BaseEvent) -> bool:
    extra = event.model_extra or {}
    if isinstance(event, RunErrorEvent):
        return not event.message and bool(extra.keys() & {"error", "errorMessage", "detail"})
    if isinstance(event, ToolCallResultEvent):
        return not event.content and bool(extra.keys() & {"result", "output"})
    return False


def _first(data: dict[str, Any], *names: str) -> Any:
    return next((data[n] for n in names if data.get(n) is not None), None)


def _tool_result(data: dict[str, Any]) -> None:
    call_id = _first(data, "toolCallId", "tool_call_id")
    if not _first(data, "messageId", "message_id") and isinstance(call_id, str) and call_id:
        data.pop("message_id", None)
        data["messageId"] = tool_result_id(call_id)
    if (
        data.get("content") in (None, "")
        and (value := _first(data, "result", "output")) is not None
    ):
        data["content"] = _as_content(value)
    elif data.get("content") is not None and not isinstance(data["content"], str | list):
        data["content"] = _as_content(data["content"])


def _as_content(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(p, Mapping) and p.get("type") in _PART_TYPES for p in value)
    ):
        return value
    return json.dumps(value, ensure_ascii=False)


def _run_error(data: dict[str, Any]) -> None:
    if isinstance(data.get("message"), str) and data["message"]:
        return
    error = data.get("error")
    text: Any = None
    if isinstance(error, str):
        text = error
    elif isinstance(error, Mapping):
        text = _first(dict(error), "message", "detail", "msg")
        if not data.get("code") and (code := _first(dict(error), "code", "type")) is not None:
            data["code"] = str(code)
        if text is None:
            text = json.dumps(error, ensure_ascii=False)
    elif error is not None:
        text = json.dumps(error, ensure_ascii=False)
    if text is None:
        text = _first(data, "errorMessage", "error_message", "detail")
    data["message"] = text if isinstance(text, str) else "" if text is None else str(text)
    if data.get("code") is not None and not isinstance(data["code"], str):
        data["code"] = str(data["code"])
