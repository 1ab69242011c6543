"""ADK ``Event`` <-> threadkeep ``Message``.

An event is one message: ``agui_id`` is the event id; text parts are the ``content``; each
``function_call`` part is a typed :class:`~threadkeep.ToolCall` (its id is the call's
``agui_id``, its arguments the JSON of ``args``); an event answering calls
(``function_response`` parts) is a ``tool`` message whose ``tool_call_ref`` is the first
answered call's id. The whole event (``model_dump(mode="json")``) rides in
``metadata["adk"]["event"]``, so an event read back equals the one appended (model_dump
equality), whatever of it has no typed home in threadkeep (author, invocation id, actions,
grounding and usage metadata, bytes as base64, ...). An event with more than the store's
1 MiB beside the payload (inline image bytes) is kept as JSON text in ``content`` instead,
bounded by ``max_message_bytes``; its role, tool calls and ``tool_call_ref`` stay typed.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.events.event import Event

from threadkeep import Message, Role, ToolCall

from .._sizes import fits_beside_payload

__all__ = ["METADATA_KEY", "event_timestamp", "event_to_message", "message_to_event"]

METADATA_KEY = "adk"
"""The ``Message.metadata`` key under which the ADK event is kept."""


def event_to_message(event: Event, *, keep_id: bool = True) -> Message:
    """Return the threadkeep message that stores ``event`` (not yet appended).

    Args:
        event: A complete (non-partial) ADK event, its temp state already trimmed. A value
            JSON cannot hold (a callable in ``state_delta``...) is stored as its ``str()``,
            the rule of ADK's persistent services.
        keep_id: Use the event id as the message's ``agui_id`` (the store's idempotency
            key). ``False`` for a distinct event reusing a stored event's id, which ADK
            keeps as a second event; the id still rides in the stored event.

    Returns:
        An unsaved ``Message``: role ``user`` for author ``"user"``, ``tool`` when it
        answers function calls, else ``assistant``; typed tool calls; the event in metadata.
    """
    parts = event.content.parts if event.content and event.content.parts else []
    text = "".join(part.text for part in parts if part.text and not part.thought)
    calls = [
        ToolCall(
            agui_id=part.function_call.id,
            name=part.function_call.name or "",
            arguments=json.dumps(part.function_call.args or {}, sort_keys=True),
        )
        for part in parts
        if part.function_call is not None
    ]
    answered = [part.function_response.id for part in parts if part.function_response]
    role = Role.USER if event.author == "user" else Role.ASSISTANT
    if answered:
        role = Role.TOOL
    dumped = event.model_dump(mode="json", exclude_none=True, fallback=str)
    about: dict[str, Any] = {"author": event.author, "invocation_id": event.invocation_id}
    about["timestamp"] = event.timestamp
    message = Message(
        role=role,
        agui_id=(event.id or None) if keep_id else None,
        content=text,
        tool_calls=calls,
        tool_call_ref=answered[0] if answered else None,
        metadata={METADATA_KEY: {"event": dumped, **about}},
    )
    if fits_beside_payload(message):
        return message
    # An event with megabytes of inline data (an image's bytes): the event as JSON text in
    # content, the payload (bounded by max_message_bytes, not the 1 MiB beside it).
    text = json.dumps(dumped, ensure_ascii=False)
    return message.model_copy(
        update={"content": text, "metadata": {METADATA_KEY: {"event_json": True, **about}}}
    )


def message_to_event(message: Message) -> Event | None:
    """Return the ADK event a stored message holds, or ``None`` for a message ADK did not write.

    Args:
        message: A message read from a session's chat.

    Returns:
        The event, equal (``model_dump``) to the one appended; ``None`` when the message has
        no ADK event (a boundary, or a message another client appended to the chat).
    """
    kept: Any = message.metadata.get(METADATA_KEY)
    if isinstance(kept, dict) and kept.get("event_json") is True:
        return Event.model_validate_json(message.content)
    if not isinstance(kept, dict) or not isinstance(kept.get("event"), dict):
        return None
    return Event.model_validate(kept["event"])


def event_timestamp(message: Message) -> float | None:
    """Return the ADK event timestamp of a stored message (seconds since the epoch), if any."""
    kept: Any = message.metadata.get(METADATA_KEY)
    if isinstance(kept, dict) and isinstance(kept.get("timestamp"), int | float):
        return float(kept["timestamp"])
    return None
