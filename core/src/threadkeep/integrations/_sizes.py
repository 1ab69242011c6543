"""``fits_beside_payload``: whether a message's non-payload part stays within the store's bound.

A threadkeep message holds up to ``max_message_bytes`` (16 MiB by default) of payload
(``content``, tool-call arguments and results, reasoning text) and 1 MiB of everything else
(metadata, parts, ids: the "envelope", see ``docs/reliability.md``). Framework records whose
bulk sits in fields without a typed place (a screenshot's data URL in a tool output, an inline
image) would go over the envelope; an integration stores such a record as JSON text in
``content`` instead, so it is bounded by the payload limit as the framework's own stores are
bounded by nothing but their database.
"""

from __future__ import annotations

from threadkeep import Message

__all__ = ["ENVELOPE_BUDGET_BYTES", "fits_beside_payload"]

ENVELOPE_BUDGET_BYTES = 768 * 1024
"""What an integration lets a message hold beside its payload: 3/4 of the store's 1 MiB.

The margin covers the store's own fields (ids, timestamps) and its JSON measure, which may
count a few bytes differently from Pydantic's."""


def fits_beside_payload(message: Message) -> bool:
    """Return whether ``message`` without its payload strings is within the budget.

    Args:
        message: An unsaved message.

    Returns:
        ``True`` when its JSON, with ``content``, tool-call ``arguments``/``content`` and
        reasoning ``content``/``encrypted_value`` emptied, is at most
        :data:`ENVELOPE_BUDGET_BYTES` (UTF-8 bytes).
    """
    stripped = message.model_copy(
        update={
            "content": "",
            "tool_calls": [
                c.model_copy(update={"arguments": "", "content": None}) for c in message.tool_calls
            ],
            "reasonings": [
                r.model_copy(update={"content": "", "encrypted_value": None})
                for r in message.reasonings
            ],
        }
    )
    return len(stripped.model_dump_json().encode("utf-8")) <= ENVELOPE_BUDGET_BYTES
