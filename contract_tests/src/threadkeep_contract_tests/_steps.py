"""Steps and runs, capability ``steps``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from itertools import pairwise
from typing import ClassVar
from uuid import UUID

import pytest

from threadkeep import (
    ChatNotFound,
    Conflict,
    Message,
    RunStatus,
    Step,
    StepNotFound,
    StepStatus,
    Store,
)

from ._base import ContractBase, StoreFactory
from ._helpers import SteppingClock, opened

__all__ = ["StepTests"]

steps_capability = pytest.mark.threadkeep_capability("steps")


def _step(chat_id: UUID, stack: str, kind: str, **fields: object) -> Step:
    return Step(chat_id=chat_id, run_id="run-1", stack_id=stack, type=kind, **fields)


class StepTests(ContractBase):
    """Steps keep their order and stack; runs are claimed by one worker; sweeps interrupt."""

    contract_area: ClassVar[str] = "Steps & runs"

    @pytest.mark.asyncio
    @steps_capability
    async def test_steps_round_trip_in_order(self, store: Store) -> None:
        """Saved steps read back equal, in seq order; updates keep seq and created_at."""
        chat = await store.create_chat("u-steps", "t-order")
        steps = [
            _step(chat.chat_id, "root", "input", input={"text": "héllo\x00中文"}),
            _step(chat.chat_id, "root", "llm", status=StepStatus.COMPLETED, output={"tokens": 12}),
            _step(chat.chat_id, "root", "tool", space_snapshot={"k": [1, {"n": None}]}),
            _step(chat.chat_id, "root", "custom_type", error="boom", metadata={"m": "ü"}),
        ]
        stored = await store.save_steps(steps)
        seqs = [s.seq for s in stored]
        assert all(a is not None and b is not None and a < b for a, b in pairwise(seqs))
        read = await store.get_steps(chat.chat_id, "run-1")
        assert [s.step_id for s in read] == [s.step_id for s in steps]
        for sent, got in zip(steps, read, strict=True):
            assert (
                got.type,
                got.input,
                got.output,
                got.space_snapshot,
                got.error,
                got.metadata,
            ) == (
                sent.type,
                sent.input,
                sent.output,
                sent.space_snapshot,
                sent.error,
                sent.metadata,
            )
        updated = await store.update_step(
            steps[2].step_id, status=StepStatus.COMPLETED, output="ok"
        )
        assert (updated.seq, updated.created_at) == (read[2].seq, read[2].created_at)
        assert (await store.get_step(steps[2].step_id)).output == "ok"
        await store.delete_chat(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await store.save_steps([_step(chat.chat_id, "root", "llm")])

    @pytest.mark.asyncio
    @steps_capability
    async def test_last_incomplete_step_and_stack_path(self, store: Store) -> None:
        """The newest non-completed step is where a resume starts; stack paths run root first."""
        chat = await store.create_chat("u-steps", "t-resume")
        assert await store.get_last_incomplete_step(chat.chat_id) is None
        done = StepStatus.COMPLETED
        await store.save_steps(
            [
                _step(chat.chat_id, "root", "input", status=done),
                _step(
                    chat.chat_id,
                    "child",
                    "delegate",
                    stack_parent_id="root",
                    stack_depth=1,
                    status=StepStatus.FAILED,
                ),
                _step(
                    chat.chat_id,
                    "grandchild",
                    "llm",
                    stack_parent_id="child",
                    stack_depth=2,
                    status=StepStatus.RUNNING,
                ),
                _step(
                    chat.chat_id,
                    "grandchild",
                    "tool",
                    stack_parent_id="child",
                    stack_depth=2,
                    status=done,
                ),
            ]
        )
        last = await store.get_last_incomplete_step(chat.chat_id)
        assert last is not None
        assert (last.stack_id, last.type) == ("grandchild", "llm")
        assert await store.get_stack_path("grandchild") == ["root", "child", "grandchild"]
        assert [s.type for s in await store.get_stack_steps("grandchild")] == ["llm", "tool"]
        with pytest.raises(StepNotFound):
            await store.get_stack_path("nowhere")

    @pytest.mark.asyncio
    @steps_capability
    async def test_claiming_a_run_is_compare_and_set(self, store: Store) -> None:
        """Of concurrent claimers of an interrupted run one wins; the rest get ``Conflict``."""
        chat = await store.create_chat("u-steps", "t-claim")
        await store.start_run(chat.chat_id, "run-1", owner="w0")
        with pytest.raises(Conflict):
            await store.start_run(chat.chat_id, "run-1", owner="intruder")
        await store.finish_run(chat.chat_id, "run-1", owner="w0", status=RunStatus.INTERRUPTED)
        results = await asyncio.gather(
            *(store.claim_run(chat.chat_id, "run-1", owner=f"w{i}") for i in range(1, 11)),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, BaseException)]
        assert len(winners) == 1, f"{len(winners)} workers claimed one run"
        assert all(isinstance(e, Conflict) for e in losers), losers
        run = await store.get_run(chat.chat_id, "run-1")
        assert (run.status, run.owner) == (RunStatus.ACTIVE, winners[0].owner)
        with pytest.raises(Conflict):
            await store.claim_run(chat.chat_id, "run-1", owner="late")
        done = await store.finish_run(
            chat.chat_id, "run-1", owner=run.owner or "", status=RunStatus.COMPLETE
        )
        assert done.status is RunStatus.COMPLETE
        with pytest.raises(Conflict):
            await store.claim_run(chat.chat_id, "run-1", owner="after-complete")

    @pytest.mark.asyncio
    @steps_capability
    async def test_sweeper_interrupts_expired_runs(self, store_factory: StoreFactory) -> None:
        """A run whose lease expired is marked interrupted with its open messages and steps."""
        clock = SteppingClock(step=timedelta(milliseconds=1))
        async with opened(store_factory, clock=clock) as store:
            chat = await store.create_chat("u-steps", "t-sweep")
            await store.start_run(chat.chat_id, "run-1", owner="dead-worker", lease_seconds=30)
            await store.start_run(chat.chat_id, "run-2", owner="live-worker", lease_seconds=3600)
            open_message = await store.append_message(
                chat.chat_id,
                Message(role="assistant", run_id="run-1", in_progress=True, status="active"),
            )
            (step,) = await store.save_steps(
                [_step(chat.chat_id, "root", "llm", status=StepStatus.RUNNING)]
            )
            assert await store.sweep_expired_runs() == []
            clock.advance(timedelta(seconds=60))
            swept = await store.sweep_expired_runs()
            assert [r.run_id for r in swept] == ["run-1"]
            assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.INTERRUPTED
            assert (await store.get_run(chat.chat_id, "run-2")).status is RunStatus.ACTIVE
            message = await store.get_message(open_message.message_id)
            assert (message.status, message.in_progress) == ("interrupted", False)
            assert (await store.get_step(step.step_id)).status is StepStatus.INTERRUPTED
            assert await store.sweep_expired_runs() == []
            claimed = await store.claim_run(chat.chat_id, "run-1", owner="rescuer")
            assert claimed.owner == "rescuer"

    @pytest.mark.asyncio
    @steps_capability
    async def test_discard_run_removes_only_that_run(self, store: Store) -> None:
        """``discard_run`` removes a run's messages, steps and record; other runs stay."""
        chat = await store.create_chat("u-steps", "t-discard")
        await store.start_run(chat.chat_id, "run-1", owner="w")
        await store.append_messages(
            chat.chat_id,
            [
                Message(role="user", run_id="run-0", content="kept"),
                Message(role="assistant", run_id="run-1", content="doomed"),
                Message(role="assistant", run_id="run-1", content="doomed too"),
            ],
        )
        await store.save_steps([_step(chat.chat_id, "root", "llm")])
        counts = await store.discard_run(chat.chat_id, "run-1")
        assert (counts["messages"], counts["steps"], counts["runs"]) == (2, 1, 1)
        rows = await self.raw_messages(store, chat.chat_id)
        assert [r.content for r in rows] == ["kept"]
        assert await store.get_steps(chat.chat_id, "run-1") == []
