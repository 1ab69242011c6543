"""Folding recorded runs of new chats in memory and writing them in ``load_chats`` batches.

See :mod:`._agui_bulk` for why what is written equals what ``StorageAgent`` writes. Each
run of a new chat is folded by the agent against a :class:`._agui_bulk.RecordingStore`;
the chats collect in a :class:`RunBatch` until it holds about
:data:`._bulk.WRITE_MESSAGES` messages, then go to the store in one ``Store.load_chats``
call, each with its proof (:data:`._agui_bulk.CHAT_PROOF`), written with its records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, RunAgentInput

from .._store_chat_load import ChatLoad
from ..agui._agent import StorageAgent
from . import ImportReport
from ._agui_bulk import CHAT_PROOF, RecordingStore, Unsupported, new_chat
from ._agui_files import RunRecord
from ._bulk import WRITE_CHATS, WRITE_MESSAGES

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["OWNER", "RUN_DIGEST", "Replay", "RunBatch", "replay_input"]

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


def replay_input(run: RunRecord, thread_key: str, run_id: str) -> RunAgentInput:
    """The ``RunAgentInput`` a recorded run is replayed with (its request, re-keyed)."""
    base = run.agent_input() or RunAgentInput(
        thread_id=thread_key,
        run_id=run_id,
        messages=[],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
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


@dataclass
class RunBatch:
    """New chats of one run each, folded and waiting for one ``load_chats`` call.

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
    pending: list[tuple[ChatLoad, RunRecord, str]] = field(default_factory=list)
    size: int = 0

    async def add(self, run: RunRecord, thread_key: str, proof: str) -> None:
        """Fold ``run`` as the only run of a new chat and keep it for the batch.

        Raises:
            Unsupported: If the run needs the ordinary path (nothing was written).
        """
        chat = new_chat(self.store, self.user_id, thread_key, run.recording.name)
        recorder = RecordingStore(self.store, chat)
        agent = storage_agent(
            recorder.as_store(), run, user_id=self.user_id, keep_events=self.keep_events
        )
        with self.held_back() as refused:
            async for _event in agent.run(replay_input(run, thread_key, run.run_id)):
                pass
        if recorder.unsupported or recorder.run is None or refused:
            raise Unsupported(recorder.unsupported or "the run did not end in one batch")
        messages = [*recorder.input, *recorder.records]
        counts = {
            "messages": len(messages),
            "tool_calls": sum(len(p.message.tool_calls) for p in messages),
        }
        item = ChatLoad(
            user_id=self.user_id,
            thread_id=thread_key,
            chat_id=chat.chat_id,
            name=chat.name,
            messages=messages,
            runs=[recorder.run],
            steps=recorder.steps,
            proof={CHAT_PROOF: {"digest": proof, "counts": counts}},
        )
        self.pending.append((item, run, thread_key))
        self.size += len(messages)

    def full(self) -> bool:
        """Whether the batch holds enough to be written."""
        return self.size >= WRITE_MESSAGES or len(self.pending) >= WRITE_CHATS

    async def flush(self) -> tuple[ImportReport, list[tuple[RunRecord, str]]]:
        """Write the batch; return its counts and the runs whose chat existed by then.

        Those runs (a concurrent import created the chat meanwhile) are for the ordinary
        path; nothing of them was written.

        Raises:
            ThreadkeepError: Any error of the store; nothing of the batch is written.
        """
        pending, self.pending, self.size = self.pending, [], 0
        report = ImportReport()
        if not pending:
            return report, []
        results = await self.store.load_chats([item for item, _, _ in pending])
        taken: list[tuple[RunRecord, str]] = []
        for (_, run, key), result in zip(pending, results, strict=True):
            if not result.created:
                taken.append((run, key))
                continue
            report.chats_created += 1
            report.messages_created += result.messages
            report.tool_calls_created += result.tool_calls
        return report, taken
