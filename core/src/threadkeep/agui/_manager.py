"""``RunManager``: runs storage agents so their output survives the client going away.

The stream manager: each run gets a fresh :class:`StorageAgent` from a
factory and a producer task that drains the agent's stream into an unbounded queue. The
client reads the queue through :meth:`RunHandle.events`; stopping early (a disconnect) does
not stop the producer, so the run finishes and is stored. Runs are registered under
``(thread_id, run_id)`` while they execute, for :meth:`RunManager.cancel`.

Outcomes, as the client sees them: the inner agent's own terminal event ends the stream; a
raw exception of the inner agent becomes a synthesized ``RUN_ERROR`` (code
``INTERNAL_ERROR``); a cancel becomes ``RUN_FINISHED`` with outcome ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
)

from .._errors import Conflict
from ._agent import ResumeState, StorageAgent

__all__ = ["AgentFactory", "RunHandle", "RunManager"]

AgentFactory = Callable[..., StorageAgent]
"""Builds the storage agent for one run; receives ``run``'s extra arguments."""

_TERMINAL = (RunFinishedEvent, RunErrorEvent)
_log = logging.getLogger("threadkeep.agui")


class _Done:
    """Queue sentinel: the producer finished."""


class RunHandle:
    """One run started by :class:`RunManager`.

    Attributes:
        thread_id: The AG-UI thread id.
        run_id: The AG-UI run id.
        agent: The storage agent executing the run.
    """

    def __init__(self, thread_id: str, run_id: str, agent: StorageAgent) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.agent = agent
        self._queue: asyncio.Queue[BaseEvent | _Done] = asyncio.Queue()
        self._producer: asyncio.Task[None] | None = None
        self._terminal_sent = False
        self._closed = False
        self._release: Callable[[], None] | None = None

    async def events(self) -> AsyncIterator[BaseEvent]:
        """Yield the run's events in order, ending after its terminal event.

        The stream ends after ``RUN_FINISHED``/``RUN_ERROR`` (or when the producer ends), so
        a client is not kept waiting while the last records are written; :meth:`wait`
        waits for those. Stop iterating at any time: the run goes on. One consumer only.
        """
        while not isinstance(item := await self._queue.get(), _Done):
            yield item
            if isinstance(item, _TERMINAL):
                return

    def cancel(self) -> bool:
        """Cancel the run: open records end ``interrupted``, delivered content kept.

        After the run's terminal event (``RUN_FINISHED``/``RUN_ERROR``) the outcome is
        decided and stays as it is (the first terminal event decides); an inner agent
        still lingering after it is stopped all the same,
        so :meth:`wait` does not wait on it.

        Returns:
            ``True`` if the run was still executing, ``False`` if it had already ended
            (its terminal event was sent, or its producer finished).
        """
        if self._producer is None or self._producer.done():
            return False
        cancelled = self._producer.cancel()
        return cancelled and not self._terminal_sent

    async def wait(self) -> None:
        """Wait until the run has ended and everything of it is stored. Never raises.

        When it returns the run is no longer registered with its :class:`RunManager`, so
        the same ``(thread_id, run_id)`` may be run again at once.
        """
        if self._producer is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._producer)
        persistence = self.agent.persistence
        if persistence is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(persistence)
        if self.done and self._release is not None:
            self._release()

    @property
    def done(self) -> bool:
        """Whether the run ended and its records are stored."""
        persistence = self.agent.persistence
        producer_done = self._producer is not None and self._producer.done()
        return producer_done and (persistence is None or persistence.done())

    def _forward(self, event: BaseEvent) -> None:
        self._terminal_sent = self._terminal_sent or isinstance(event, _TERMINAL)
        self._queue.put_nowait(event)

    async def _produce(self, input: RunAgentInput, resume: ResumeState | None) -> None:
        try:
            async for event in self.agent.run(input, resume=resume):
                self._forward(event)
        except asyncio.CancelledError:
            if not self._terminal_sent:
                self._forward(
                    RunFinishedEvent(
                        thread_id=self.thread_id,
                        run_id=self.run_id,
                        outcome=RunFinishedCancelledOutcome(),
                    )
                )
        except Exception as exc:  # noqa: BLE001 - any crash becomes the client's RUN_ERROR
            _log.exception("threadkeep: the inner agent of run %r failed", self.run_id)
            if not self._terminal_sent:
                message = f"the agent failed: {type(exc).__name__}: {exc}"
                self._forward(RunErrorEvent(message=message, code="INTERNAL_ERROR"))
        finally:
            self._close()

    def _close(self) -> None:
        """End the client's stream (once): the producer finished, or never started."""
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(_Done())

    def _producer_done(self, producer: asyncio.Task[None]) -> None:
        """A producer cancelled before its first step never ran its ``finally``: end here.

        The client then gets the synthesized ``RUN_FINISHED`` (outcome ``cancelled``) the
        cancel outcome promises; nothing was stored, since the run never began.
        """
        if self._closed:
            return
        if producer.cancelled() and not self._terminal_sent:
            self._forward(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedCancelledOutcome(),
                )
            )
        self._close()


class RunManager:
    """Start, cancel and resume runs of storage agents (see the module docstring).

    Args:
        factory: Builds a fresh :class:`StorageAgent` per run; ``run(input, *args,
            **kwargs)`` passes ``args``/``kwargs`` on to it.

    Example::

        manager = RunManager(lambda: StorageAgent(my_agent, store, user_id="u1"))
        handle = await manager.run(input)
        async for event in handle.events():
            ...                     # forward to the client (SSE)
        await handle.wait()         # everything is stored
    """

    def __init__(self, factory: AgentFactory) -> None:
        self.factory = factory
        self._runs: dict[tuple[str, str], RunHandle] = {}

    async def run(self, input: RunAgentInput, *args: Any, **kwargs: Any) -> RunHandle:
        """Start a run and return its handle.

        Raises:
            Conflict: If a run with the same ``(thread_id, run_id)`` is executing here.
        """
        return self._start(input, self.factory(*args, **kwargs), None)

    async def resume(self, input: RunAgentInput, *args: Any, **kwargs: Any) -> RunHandle:
        """Claim an interrupted or errored run and run it again (steps done before are skipped).

        Raises:
            Conflict: If another worker claimed the run, it is complete, or it is executing.
            ChatNotFound / RunNotFound: If there is no such chat or run.
        """
        self._refuse_duplicate(input)
        agent = self.factory(*args, **kwargs)
        state = await agent.claim(input)
        return self._start(input, agent, state)

    def cancel(self, thread_id: str, run_id: str) -> bool:
        """Cancel the run keyed ``(thread_id, run_id)``; ``False`` if none is executing."""
        handle = self._runs.get((thread_id, run_id))
        return handle.cancel() if handle is not None else False

    def get(self, thread_id: str, run_id: str) -> RunHandle | None:
        """Return the handle of a run executing or still being stored, or ``None``."""
        return self._runs.get((thread_id, run_id))

    async def drain(self) -> None:
        """Wait until every run started here has ended and is stored (a graceful shutdown).

        Call it before closing the store. Never raises.
        """
        while self._runs:
            await asyncio.gather(*(handle.wait() for handle in list(self._runs.values())))
            await asyncio.sleep(0)  # let the done-callbacks unregister them

    def _refuse_duplicate(self, input: RunAgentInput) -> None:
        if (input.thread_id, input.run_id) in self._runs:
            raise Conflict(f"run {input.run_id!r} of thread {input.thread_id!r} is executing")

    def _start(
        self, input: RunAgentInput, agent: StorageAgent, resume: ResumeState | None
    ) -> RunHandle:
        self._refuse_duplicate(input)
        key = (input.thread_id, input.run_id)
        handle = RunHandle(input.thread_id, input.run_id, agent)
        self._runs[key] = handle
        producer = asyncio.create_task(handle._produce(input, resume))
        handle._producer = producer
        producer.add_done_callback(handle._producer_done)

        def release() -> None:
            if self._runs.get(key) is handle:
                del self._runs[key]

        def forget(_: object) -> None:
            # Registered until the run's records are stored, so get(...).wait() covers them.
            persistence = agent.persistence
            if persistence is not None and not persistence.done():
                persistence.add_done_callback(forget)
            else:
                release()

        handle._release = release
        producer.add_done_callback(forget)
        return handle
