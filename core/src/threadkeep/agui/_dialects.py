"""Event shapes real stacks send that the protocol models refuse, read as what they mean.

Recorded and live streams of raw SDK agents, Vercel AI and other adapters bend the AG-UI
event schema in a few recurring ways (issue 11); streams as real stacks send them must fold
without loss.
:func:`normalize_event_data` rewrites one decoded event object
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
- Field types recorders bend, which would otherwise drop the whole event (and the text or
  the run's end it carries): a ``timestamp`` that is a float or an ISO 8601 string becomes
  integer milliseconds (unreadable: dropped); ids that are numbers become strings;
  ``RUN_STARTED``/``RUN_FINISHED`` without ``threadId``/``runId`` get ``""`` (the run is
  the one being folded); a ``TOOL_CALL_START`` without ``toolCallName`` gets ``""``; a
  ``TOOL_CALL_ARGS`` (or chunk) delta that is a JSON value becomes its JSON text; a
  ``TOOL_CALL_RESULT`` ``role`` other than ``"tool"`` is dropped; a ``STATE_DELTA`` that
  is one patch operation becomes a list of it; a text message ``role`` of ``"model"``
  (Gemini) or ``"ai"`` (LangChain) is ``"assistant"``; a ``REASONING_MESSAGE_START`` whose
  ``role`` is not ``"reasoning"`` (older recorders wrote ``"assistant"``, the speaker) is a
  reasoning message start all the same; a ``MESSAGES_SNAPSHOT`` message
  without ``id`` gets ``"snapshot:<position>:<hash of role and content>"`` and the text
  parts of an assistant, system or developer message given as parts are joined.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ag_ui.core import BaseEvent, RunErrorEvent, ToolCallResultEvent

__all__ = ["coerce_event", "normalize_event_data", "tool_outcome", "tool_result_id"]

_OUTCOMES = {"failed": "errored", "interrupted": "interrupted"}

_PART_TYPES = frozenset({"text", "image", "audio", "video", "document", "binary"})


def tool_result_id(tool_call_id: str) -> str:
    """Return the message id of a tool result that names none: ``"result:<toolCallId>"``.

    Args:
        tool_call_id: The id of the call the result answers.

    Returns:
        A deterministic id, so the same result folded twice is one message.
    """
    return f"result:{tool_call_id}"


def tool_outcome(encrypted_value: str) -> str | None:
    """Return the status a tool result's ``REASONING_ENCRYPTED_VALUE`` gives it, if any.

    Pydantic AI (2.x, AG-UI >= 0.1.11) sends a failed, interrupted, denied or retried tool
    return's outcome as ``{"pydantic_ai": {"outcome": ...}}`` in an encrypted value naming
    the tool result message (``ToolMessage`` has no outcome slot). A tool that raised is
    ``"failed"``: its result is stored ``errored``; ``"interrupted"`` is ``interrupted``;
    ``"denied"`` and ``"retried"`` are answers the model was shown, stored ``complete``.

    Args:
        encrypted_value: The event's ``encryptedValue``.

    Returns:
        ``"errored"``, ``"interrupted"`` or ``None`` (no outcome that changes the status).
    """
    if not encrypted_value.startswith("{") or "pydantic_ai" not in encrypted_value:
        return None
    try:
        value = json.loads(encrypted_value)
    except (ValueError, RecursionError):
        return None
    carried = value.get("pydantic_ai") if isinstance(value, Mapping) else None
    outcome = carried.get("outcome") if isinstance(carried, Mapping) else None
    return _OUTCOMES.get(outcome) if isinstance(outcome, str) else None


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
    _field_types(out)
    if kind == "TOOL_CALL_RESULT":
        _tool_result(out)
    elif kind == "RUN_ERROR":
        _run_error(out)
    elif kind in ("RUN_STARTED", "RUN_FINISHED"):
        for camel, snake in (("threadId", "thread_id"), ("runId", "run_id")):
            if out.get(camel) is None and out.get(snake) is None:
                out[camel] = ""
    elif kind == "TOOL_CALL_START" and _first(out, "toolCallName", "tool_call_name") is None:
        out["toolCallName"] = ""
    elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"):
        if out.get("delta") is not None and not isinstance(out["delta"], str):
            out["delta"] = json.dumps(out["delta"], ensure_ascii=False)
    elif kind == "STATE_DELTA" and isinstance(out.get("delta"), Mapping):
        out["delta"] = [out["delta"]]
    elif kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK") and out.get("role") in _ASSISTANT:
        out["role"] = "assistant"
    elif kind == "REASONING_MESSAGE_START" and out.get("role") not in (None, "reasoning"):
        out["role"] = "reasoning"  # older recorders wrote the speaker: "assistant"
    elif kind == "MESSAGES_SNAPSHOT" and isinstance(out.get("messages"), list):
        out["messages"] = [_snapshot_message(m, i) for i, m in enumerate(out["messages"])]
    return out


_ASSISTANT = frozenset({"model", "ai"})
_ID_FIELDS = (
    "messageId",
    "message_id",
    "toolCallId",
    "tool_call_id",
    "parentMessageId",
    "parent_message_id",
    "threadId",
    "thread_id",
    "runId",
    "run_id",
)


def _field_types(data: dict[str, Any]) -> None:
    """Numbers as ids and floats or ISO strings as timestamps (module docstring)."""
    for name in _ID_FIELDS:
        value = data.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            data[name] = str(value)
    stamp = data.get("timestamp")
    if stamp is None or (isinstance(stamp, int) and not isinstance(stamp, bool)):
        return
    if isinstance(stamp, float) and math.isfinite(stamp):
        data["timestamp"] = int(stamp)
        return
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            data["timestamp"] = int(parsed.timestamp() * 1000)
            return
    data.pop("timestamp")


def _snapshot_message(message: Any, position: int) -> Any:
    if not isinstance(message, Mapping):
        return message
    out = dict(message)
    role = out.get("role")
    content = out.get("content")
    if role in ("assistant", "system", "developer") and isinstance(content, list):
        out["content"] = "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text"
        )
    if isinstance(out.get("id"), int | float) and not isinstance(out.get("id"), bool):
        out["id"] = str(out["id"])
    if not out.get("id"):
        shape = json.dumps([role, out.get("content")], ensure_ascii=False, default=str)
        digest = hashlib.sha256(shape.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        out["id"] = f"snapshot:{position}:{digest}"
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
    if data.get("role") not in (None, "tool"):
        data.pop("role")


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
