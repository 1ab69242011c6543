"""Events that carry no message content: ``RAW``, ``CUSTOM``, ``USAGE_METADATA``, unknown types.

Real stacks send many of them (LangGraph wraps every LangChain callback in a ``RAW`` event
holding whole message dicts; adapters add ``USAGE_METADATA`` or custom usage events). None of
them is a message, and none is lost:

- each is counted in the run's ``metadata["agui_other_events"]`` by type (``CUSTOM`` events
  as ``"CUSTOM:<name>"``);
- token usage, wherever it appears in the event (``usage``/``usage_metadata`` objects or the
  event itself: OpenAI ``prompt_tokens``/``completion_tokens``, Anthropic and LangChain
  ``input_tokens``/``output_tokens``, Gemini ``promptTokenCount``/``candidatesTokenCount``,
  camelCase ``inputTokens``/``outputTokens``), is given to the message it belongs to: the
  run's record whose AG-UI id the object holding the usage names, else the run's latest
  assistant message; a report naming a message of an earlier run (LangGraph's graph-level
  ``on_chain_end`` holds every message of the thread) is that message's, taken when it
  streamed, and is skipped. The message's ``tokens`` is its output token count (the total when
  only that is reported) and ``metadata["usage"]`` the whole report. Reports for one message
  are merged field by field keeping the largest value (streams repeat a message's usage, or
  send it cumulatively, or split input and output), so nothing is counted twice; the total
  is at least the merged input plus output (Anthropic reports input in ``message_start``
  and the output in ``message_delta``). OpenAI's ``reasoning_tokens`` is read from
  ``completion_tokens_details``/``output_tokens_details``. Usage no
  message takes is the run's own. The run's ``metadata["agui_token_usage"]`` sums them all
  (a terminal event's ``usage``, the run's total, raises each field to at least its sum);
- with ``keep_events`` (``StorageAgent(keep_events=True)``, ``threadkeep import
  --keep-events``) each event is also kept whole, in order, in ``metadata["agui_events"]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RawEvent

from .._models import Role
from ._fold_base import FoldBase
from ._state import FoldState, Record

__all__ = ["OTHER_EVENTS_NOTE", "OtherHandlers", "find_usage"]

OTHER_EVENTS_NOTE = "agui_other_events"
"""Run ``metadata`` key counting events that carry no message content, by type."""

_FIELDS: dict[str, tuple[str, ...]] = {
    "input_tokens": (
        "input_tokens",
        "prompt_tokens",
        "inputTokens",
        "promptTokens",
        "promptTokenCount",
        "prompt_token_count",
        "input_token_count",
    ),
    "output_tokens": (
        "output_tokens",
        "completion_tokens",
        "outputTokens",
        "completionTokens",
        "candidatesTokenCount",
        "candidates_token_count",
        "output_token_count",
    ),
    "total_tokens": (
        "total_tokens",
        "totalTokens",
        "totalTokenCount",
        "total_token_count",
    ),
    "reasoning_tokens": ("reasoning_tokens", "reasoningTokens", "thoughtsTokenCount"),
}
_MAX_DEPTH = 12


def _count(data: Mapping[str, Any], name: str) -> int | None:
    for spelling in _FIELDS[name]:
        value = data.get(spelling)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _usage_of(data: Mapping[str, Any]) -> dict[str, int] | None:
    usage = {name: n for name in _FIELDS if (n := _count(data, name)) is not None}
    if not usage.keys() & {"input_tokens", "output_tokens", "total_tokens"}:
        return None
    for details in ("completion_tokens_details", "output_tokens_details"):  # OpenAI
        nested = data.get(details)
        reasoning = _count(nested, "reasoning_tokens") if isinstance(nested, Mapping) else None
        if reasoning is not None:
            usage.setdefault("reasoning_tokens", reasoning)
    if "total_tokens" not in usage and usage.keys() >= {"input_tokens", "output_tokens"}:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage


def find_usage(value: Any, owner: str | None = None) -> Iterator[tuple[dict[str, int], str | None]]:
    """Yield every token-usage report in a JSON value, with the id of the object holding it.

    Args:
        value: A decoded JSON value (an event's payload).
        owner: The id of the object ``value`` belongs to, if any.

    Yields:
        ``(usage, owner_id)``: ``usage`` maps ``input_tokens``, ``output_tokens``,
        ``total_tokens`` and ``reasoning_tokens`` (those reported) to counts; ``owner_id``
        is the ``id`` of the innermost object around it that has one (a message), or
        ``None``.
    """
    stack: list[tuple[Any, str | None, int]] = [(value, owner, 0)]
    while stack:
        item, holder, depth = stack.pop()
        if depth > _MAX_DEPTH:
            continue
        if isinstance(item, Mapping):
            usage = _usage_of(item)
            if usage is not None:
                yield usage, holder
                continue
            own = item.get("id")
            holder = own if isinstance(own, str) and own else holder
            stack.extend((v, holder, depth + 1) for v in reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend((v, holder, depth + 1) for v in reversed(item))


def _event_name(event: BaseEvent) -> str:
    kind = getattr(event.type, "value", event.type)
    if isinstance(event, CustomEvent):
        return f"CUSTOM:{event.name}"
    return str(kind)


def _payload(event: BaseEvent) -> Any:
    if isinstance(event, RawEvent):
        return event.event
    if isinstance(event, CustomEvent):
        return event.value
    return event.model_dump(by_alias=True, exclude={"type", "timestamp", "raw_event"})


class OtherHandlers(FoldBase):
    """``handle_unknown_event``: count, take token usage, keep on request (module docstring)."""

    async def handle_unknown_event(self, state: FoldState, event: BaseEvent) -> None:
        """Count an event that carries no message content; take its token usage; keep it.

        Override to persist custom or future event types another way (call ``super()`` to
        keep the counting).
        """
        counts = state.run_metadata.setdefault(OTHER_EVENTS_NOTE, {})
        name = _event_name(event)
        counts[name] = counts.get(name, 0) + 1
        for usage, owner in find_usage(_payload(event)):
            await self.add_usage(state, usage, owner)
        if state.keep_events:
            kept = event.model_dump(mode="json", by_alias=True, exclude_none=True)
            state.run_metadata.setdefault("agui_events", []).append(kept)

    async def add_usage(self, state: FoldState, usage: dict[str, int], owner: str | None) -> None:
        """Merge one usage report into its message's (see the module docstring)."""
        if owner and state.record_for(owner) is None and await self.earlier_message(state, owner):
            return  # an earlier run's message (LangGraph's RAW events carry the whole state)
        record = self.usage_record(state, owner)
        key = record.key if record is not None else ""
        merged = state.usage.setdefault(key, {})
        changed = False
        for name, count in usage.items():
            if count > merged.get(name, -1):
                merged[name] = count
                changed = True
        if merged.keys() >= {"input_tokens", "output_tokens"}:  # split reports (Anthropic)
            derived = merged["input_tokens"] + merged["output_tokens"]
            if derived > merged.get("total_tokens", -1):
                merged["total_tokens"] = derived
                changed = True
        if not changed:
            return
        totals: dict[str, int] = {}
        for report in state.usage.values():
            for name, count in report.items():
                totals[name] = totals.get(name, 0) + count
        state.run_metadata["agui_token_usage"] = totals
        if record is not None:
            record.message.tokens = merged.get("output_tokens", merged.get("total_tokens"))
            record.message.metadata = {**record.message.metadata, "usage": dict(merged)}
            await self.boundary(state, record)

    def add_run_usage(self, state: FoldState, usage: Any) -> None:
        """Take a terminal event's token usage into the run's ``agui_token_usage``.

        ``RUN_FINISHED.usage`` / ``RUN_ERROR.usage`` (AG-UI 1.0: one entry per provider and
        model, the producer's total for the whole run) belongs to no one message: its
        entries are summed, and each field of ``agui_token_usage`` becomes the larger of that
        sum and the messages' sum (LangGraph reports both; nothing is counted twice).

        Args:
            state: The run's fold state.
            usage: The event's ``usage`` as JSON (a list of entries, or one object).
        """
        reported: dict[str, int] = {}
        for entry, _owner in find_usage(usage):
            for name, count in entry.items():
                reported[name] = reported.get(name, 0) + count
        if reported:
            totals = dict(state.run_metadata.get("agui_token_usage") or {})
            for name, count in reported.items():
                totals[name] = max(totals.get(name, 0), count)
            state.run_metadata["agui_token_usage"] = totals

    async def earlier_message(self, state: FoldState, agui_id: str) -> bool:
        """Whether ``agui_id`` names a message the chat held before this run."""
        if agui_id in state.inbound_ids or any(h.agui_id == agui_id for h in state.history):
            return True
        found = await state.writer.store.get_message_by_agui_id(state.chat.chat_id, agui_id)
        return found is not None and found.run_id != state.run_id

    def usage_record(self, state: FoldState, owner: str | None) -> Record | None:
        """Return the record a usage report belongs to (by id, else the latest assistant)."""
        named = state.record_for(owner) if owner else None
        if named is not None:
            return named
        for record in reversed(list(state.records.values())):
            if record.message.role is Role.ASSISTANT:
                return record
        return None
