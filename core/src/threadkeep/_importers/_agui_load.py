"""Folding recorded runs of new chats in memory and writing them in ``load_chats`` batches.

See :mod:`._agui_bulk` for why what is written equals what ``StorageAgent`` writes. Each
run of a new chat is folded by the agent against a :class:`._agui_bulk.RecordingStore`;
the chats collect in a :class:`RunBatch` until it holds about
:data:`._bulk.WRITE_MESSAGES` messages, then go to the store in one ``Store.load_chats``
call, each with its proof (:data:`._agui_bulk.CHAT_PROOF`), written with its records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, RunAgentInput

from .._models import Message
from .._store_chat_load import ChatLoad
from ..agui._agent import StorageAgent
from . import ImportReport
from ._agui_bulk import CHAT_PROOF, NAMES, RecordingStore, Unsupported, new_chat
from ._agui_files import RunRecord
from ._bulk import WRITE_CHATS, WRITE_MESSAGES

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["OWNER", "RUN_DIGEST", "Replay", "RunBatch", "repeated_input", "replay_input"]

OWNER = "threadkeep-import"
"""The owner of imported runs (their lease, while an ordinary-path import folds them)."""
RUN_DIGEST = "agui_import"
"""Run ``metadata`` key holding the digest of the recording an imported run came from."""


class Replay:
    """An inner agent that yields recorded events."""

    def __init__(self, events: list[BaseEvent]) -> None:
        self.events = events

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        """Yield the recorded events, in order."""
        for event in self.events:
            yield event


def replay_input(
    run: RunRecord, thread_key: str, run_id: str, request: RunAgentInput | None = None
) -> RunAgentInput:
    """The ``RunAgentInput`` a recorded run is replayed with (its request, re-keyed).

    Args:
        run: The recorded run.
        thread_key: Its chat's key (the input's ``thread_id``).
        run_id: The run id it is stored under.
        request: The run's request, if read already (else it is read now).
    """
    base = (
        request
        or run.agent_input()
        or RunAgentInput(
            thread_id=thread_key,
            run_id=run_id,
            messages=[],
            tools=[],
            context=[],
            state={},
            forwarded_props={},
        )
    )
    return base.model_copy(update={"thread_id": thread_key, "run_id": run_id})


def storage_agent(store: Store, run: RunRecord, *, user_id: str, keep_events: bool) -> StorageAgent:
    """The agent an import replays a recorded run through (either path)."""
    return StorageAgent(
        Replay(run.events()),
        store,
        user_id=user_id,
        write_policy="buffered",
        owner=OWNER,
        keep_events=keep_events,
        accept_history=True,
        run_metadata={RUN_DIGEST: run.digest},
    )


def repeated_input(request: RunAgentInput | None, stored: Sequence[Message]) -> list[str]:
    """The ids of a run's request messages that are not among the run's stored messages.

    A request repeats the chat's history (the prompt an earlier run stored, its answers):
    the run stores only what is new, so what it repeats is already present wherever the
    chat holds it. A message stored under a renamed id (``<id>#<n>``: the id with other
    content) or keeping its id in ``metadata["agui_id"]`` is the run's own.

    Args:
        request: The run's request.
        stored: The messages the run stored.

    Returns:
        The ids to look up in the chat, each once, in request order.
    """
    if request is None:
        return []
    mine = {m.agui_id for m in stored if m.agui_id} | {
        str(m.metadata["agui_id"]) for m in stored if m.metadata.get("agui_id")
    }
    found: list[str] = []
    for message in request.messages:
        if message.id in mine or message.id in found:
            continue
        if not any(held.startswith(f"{message.id}#") for held in mine):
            found.append(message.id)
    return found


@dataclass
class RunBatch:
    """New chats (their runs folded in memory, in order) waiting for one ``load_chats`` call.

    Args:
        store: The open store.
        user_id: Owner of the chats.
        keep_events: ``StorageAgent(keep_events=)``.
        held_back: Runs the wrapper's warnings about (a context manager per run, see
            ``agui._refused_batches``): a run it warns about takes the ordinary path.
    """

    store: Store
    user_id: str
    keep_events: bool
    held_back: Callable[[], Any]
    pending: list[tuple[ChatLoad, list[RunRecord], str, ImportReport]] = field(default_factory=list)
    size: int = 0

    async def add(self, runs: list[RunRecord], thread_key: str, proof: str) -> None:
        """Fold ``runs`` as the runs of a new chat, in order, and keep it for the batch.

        Raises:
            Unsupported: If a run needs the ordinary path (nothing was written).
        """
        chat = new_chat(self.store, self.user_id, thread_key, runs[0].recording.name)
        recorder = RecordingStore(self.store, chat)
        present = ImportReport()
        for run in runs:
            present.merge(await self._fold(recorder, run, thread_key))
        messages = recorder.messages
        counts = {
            "messages": len(messages) + present.messages_present,
            "tool_calls": sum(len(p.message.tool_calls) for p in messages)
            + present.tool_calls_present,
        }
        item = ChatLoad(
            user_id=self.user_id,
            thread_id=thread_key,
            chat_id=chat.chat_id,
            name=chat.name,
            messages=messages,
            runs=recorder.runs,
            steps=recorder.steps,
            proof={CHAT_PROOF: {"digest": proof, "counts": counts, "names": NAMES}},
        )
        self.pending.append((item, runs, thread_key, present))
        self.size += len(messages)

    async def _fold(self, recorder: RecordingStore, run: RunRecord, key: str) -> ImportReport:
        """Fold one run against the stand-in; return the counts of the input it repeats."""
        used = {held.run_id for held in recorder.runs}
        run_id = next(
            rid
            for n in range(1, len(used) + 2)
            if (rid := run.run_id if n == 1 else f"{run.run_id}#{n}") not in used
        )
        if any(held.metadata.get(RUN_DIGEST) == run.digest for held in recorder.runs):
            raise Unsupported("a recording repeated in one chat")
        before = len(recorder.messages)
        request = run.agent_input()
        agent = storage_agent(
            recorder.as_store(), run, user_id=self.user_id, keep_events=self.keep_events
        )
        with self.held_back() as refused:
            async for _event in agent.run(replay_input(run, key, run_id, request)):
                pass
        ended = recorder.runs[-1] if recorder.runs else None
        if recorder.unsupported or ended is None or ended.run_id != run_id or refused:
            raise Unsupported(recorder.unsupported or "the run did not end in one batch")
        mine = [p.message for p in recorder.messages[before:]]
        report = ImportReport()
        for agui_id in repeated_input(request, mine):
            held = recorder.holds(agui_id)
            if held is not None:
                report.messages_present += 1
                report.tool_calls_present += len(held.tool_calls)
        return report

    def full(self) -> bool:
        """Whether the batch holds enough to be written."""
        return self.size >= WRITE_MESSAGES or len(self.pending) >= WRITE_CHATS

    async def flush(self) -> tuple[ImportReport, list[tuple[list[RunRecord], str]]]:
        """Write the batch; return its counts and the chats that existed by then.

        Those chats' runs (a concurrent import created the chat meanwhile) are for the
        ordinary path; nothing of them was written.

        Raises:
            ThreadkeepError: Any error of the store; nothing of the batch is written.
        """
        pending, self.pending, self.size = self.pending, [], 0
        report = ImportReport()
        if not pending:
            return report, []
        results = await self.store.load_chats([item for item, _, _, _ in pending])
        taken: list[tuple[list[RunRecord], str]] = []
        for (_, runs, key, present), result in zip(pending, results, strict=True):
            if not result.created:
                taken.append((runs, key))
                continue
            report.chats_created += 1
            report.messages_created += result.messages
            report.tool_calls_created += result.tool_calls
            report.merge(present)
        return report, taken
