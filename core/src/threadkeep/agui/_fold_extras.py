"""Shared state, activity messages and message snapshots.

- ``STATE_SNAPSHOT`` / ``STATE_DELTA`` (JSON Patch): the run's AG-UI state document; the
  final document is stored in the run record's ``metadata["agui_state"]`` at the end.
- ``ACTIVITY_SNAPSHOT`` / ``ACTIVITY_DELTA``: an AG-UI activity message, stored as an
  assistant message whose ``CustomPart`` ``agui_activity`` holds its type and content
  (``metadata["agui_role"] == "activity"``), rewritten on each change.

``MESSAGES_SNAPSHOT`` is reconciled with the stream in ``_fold_snapshot``.
"""

from __future__ import annotations

import logging
from typing import Any

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from .._errors import InvalidArgument
from .._models import CustomPart, MessageStatus, Role
from ._fold_base import FoldBase
from ._jsonpatch import apply_patch
from ._state import FoldState, Record
from ._translate import ACTIVITY_PART

__all__ = ["ExtraHandlers"]

_log = logging.getLogger("threadkeep.agui")


class ExtraHandlers(FoldBase):
    """``handle_state`` and ``handle_activity``."""

    async def handle_state(self, state: FoldState, event: BaseEvent) -> None:
        """Track the AG-UI state document (snapshot, or JSON Patch delta)."""
        if isinstance(event, StateSnapshotEvent):
            state.agui_state, state.has_agui_state = event.snapshot, True
        elif isinstance(event, StateDeltaEvent):
            try:
                state.agui_state = apply_patch(state.agui_state or {}, event.delta)
            except InvalidArgument as exc:
                _log.warning("threadkeep: STATE_DELTA does not apply (%s); state kept", exc)
                return
            state.has_agui_state = True

    async def handle_activity(self, state: FoldState, event: BaseEvent) -> None:
        """Store an activity message's content, replaced by snapshots, patched by deltas."""
        if not isinstance(event, ActivitySnapshotEvent | ActivityDeltaEvent):
            return
        record = state.record_for(event.message_id)
        if isinstance(event, ActivitySnapshotEvent):
            if record is not None and event.replace is False:
                return
            content: Any = event.content
        else:
            try:
                content = apply_patch(_activity_content(record), event.patch)
            except InvalidArgument as exc:
                _log.warning("threadkeep: ACTIVITY_DELTA does not apply (%s); kept as was", exc)
                return
        if record is None:
            record = await self.open_record(
                state, agui_id=event.message_id, role=Role.ASSISTANT, write=False
            )
        value = {"activity_type": event.activity_type, "content": content}
        record.message.parts = [CustomPart(name=ACTIVITY_PART, value=value)]
        record.message.metadata = {**record.message.metadata, "agui_role": "activity"}
        await self.finish(state, record, MessageStatus.COMPLETE)


def _activity_content(record: Record | None) -> Any:
    if record is None:
        return {}
    for part in record.message.parts:
        if isinstance(part, CustomPart) and part.name == ACTIVITY_PART:
            return (part.value or {}).get("content", {})
    return {}
