"""Events the installed ``ag-ui-protocol`` does not model: deprecated ``THINKING_*`` and unknown.

``ag-ui-protocol`` 1.0 dropped the ``THINKING_*`` family (replaced by ``REASONING_*``), yet
recorded streams and older producers still send it; the two families map one to one.
These classes let such events be parsed, dispatched and persisted like any other.
:class:`UnknownEvent` carries an event whose ``type`` no model knows (a newer protocol, a
custom producer); the storage agent hands it to ``handle_unknown_event``.
"""

from __future__ import annotations

from typing import Literal

from ag_ui.core import BaseEvent

__all__ = [
    "THINKING_EVENTS",
    "ThinkingContentEvent",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ThinkingTextMessageContentEvent",
    "ThinkingTextMessageEndEvent",
    "ThinkingTextMessageStartEvent",
    "UnknownEvent",
]


class ThinkingStartEvent(BaseEvent):
    """Deprecated ``THINKING_START`` (now ``REASONING_START``); ``title`` names the step."""

    type: Literal["THINKING_START"] = "THINKING_START"  # type: ignore[assignment]
    title: str | None = None


class ThinkingEndEvent(BaseEvent):
    """Deprecated ``THINKING_END`` (now ``REASONING_END``)."""

    type: Literal["THINKING_END"] = "THINKING_END"  # type: ignore[assignment]


class ThinkingTextMessageStartEvent(BaseEvent):
    """Deprecated ``THINKING_TEXT_MESSAGE_START`` (now ``REASONING_MESSAGE_START``)."""

    type: Literal["THINKING_TEXT_MESSAGE_START"] = "THINKING_TEXT_MESSAGE_START"  # type: ignore[assignment]


class ThinkingTextMessageContentEvent(BaseEvent):
    """Deprecated ``THINKING_TEXT_MESSAGE_CONTENT`` (now ``REASONING_MESSAGE_CONTENT``)."""

    type: Literal["THINKING_TEXT_MESSAGE_CONTENT"] = "THINKING_TEXT_MESSAGE_CONTENT"  # type: ignore[assignment]
    delta: str


class ThinkingTextMessageEndEvent(BaseEvent):
    """Deprecated ``THINKING_TEXT_MESSAGE_END`` (now ``REASONING_MESSAGE_END``)."""

    type: Literal["THINKING_TEXT_MESSAGE_END"] = "THINKING_TEXT_MESSAGE_END"  # type: ignore[assignment]


class ThinkingContentEvent(BaseEvent):
    """The oldest spelling, ``THINKING_CONTENT``: a reasoning delta without a message start."""

    type: Literal["THINKING_CONTENT"] = "THINKING_CONTENT"  # type: ignore[assignment]
    delta: str


class UnknownEvent(BaseEvent):
    """An event whose ``type`` no model knows; every field is kept as an extra field."""

    type: str  # type: ignore[assignment]


THINKING_EVENTS: tuple[type[BaseEvent], ...] = (
    ThinkingStartEvent,
    ThinkingEndEvent,
    ThinkingTextMessageStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingContentEvent,
)
"""The deprecated family, for registries that need to name it."""
