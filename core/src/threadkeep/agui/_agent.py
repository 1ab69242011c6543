"""``StorageAgent``: wrap any AG-UI agent so every run's event stream becomes durable history.

The wrapper is transparent: the inner agent's events
are yielded verbatim and in real time, while a background task folds the same events into
records. Each event is put on an unbounded queue before it is yielded, with ``put_nowait``:
the outgoing stream never waits for the store, and the fold never loses an event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from uuid import uuid4

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent

from .._errors import (
    ChatNotFound,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    ThreadkeepError,
)
from .._models import Chat, Message
from .._paging import MessageFilter
from .._runs import Run, RunStatus, Step, StepStatus, StepType
from .._store import Store
from ._channel import Channel
from ._fold import EventFolder
from ._inbound import classify_inbound, newest_ids, same_message
from ._state import FoldState
from ._steps import RunContext, bind, unbind
from ._translate import AguiMessage, translate_messages
from ._writers import WritePolicy, make_writer

__all__ = ["AGUIAgent", "OnError", "ResumeState", "StorageAgent"]

OnError = Literal["keep", "discard"]
"""What an errored run leaves: its records marked ``errored``, or nothing."""

_log = logging.getLogger("threadkeep.agui")
_BACKGROUND: set[asyncio.Task[None]] = set()
"""Strong references: asyncio keeps only weak ones, and a fold must not be collected."""


class AGUIAgent(Protocol):
    """The inner-agent contract: ``run(input)`` yields AG-UI events."""

    def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        """Yield the run's AG-UI events."""
        ...


@dataclass(frozen=True, slots=True)
class ResumeState:
    """A claimed run, ready to run again (returned by :meth:`StorageAgent.claim`).

    Attributes:
        chat: The run's chat.
        run: The run record, now ``active`` under this agent's owner.
        steps: The steps of earlier attempts, in order.
        last_incomplete: The run's newest step that is not completed (where Yao's resume
            starts), or ``None``.
    """

    chat: Chat
    run: Run
    steps: list[Step]
    last_incomplete: Step | None


@dataclass(frozen=True, slots=True)
class _Opened:
    state: FoldState
    agent_input: RunAgentInput
    previous_steps: list[Step]
    space: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _End:
    status: RunStatus
    error: str | None


@dataclass(frozen=True, slots=True)
class _StepChange:
    step: Step
    durable: bool
    done: asyncio.Future[None] | None = field(default=None)


def default_owner() -> str:
    """Return a worker id unique to this process: ``"<host>:<pid>:<random>"``.

    The host name is looked up once per process (a system call per ``StorageAgent``
    otherwise, and ``RunManager`` builds one per run); the random part is new each time.
    """
    pid = os.getpid()
    prefix = _OWNER_PREFIX.get(pid)
    if prefix is None:  # a forked child has another pid, so it looks up its own
        prefix = _OWNER_PREFIX[pid] = f"{socket.gethostname()}:{pid}:"
    return prefix + uuid4().hex[:8]


_OWNER_PREFIX: dict[int, str] = {}


class StorageAgent(EventFolder):
    """Wrap an inner AG-UI agent, persisting each run's event stream as chat history.

    One instance serves one run at a time (``RunManager`` builds one per run).

    Args:
        inner: The agent to wrap: ``run(input) -> AsyncIterator[BaseEvent]``.
        store: An open store (with the ``steps`` capability).
        user_id: Owner of the chats; ``(user_id, input.thread_id)`` picks the chat.
        agent_id: Stored on new chats and on steps.
        write_policy: ``"incremental"`` (default) or ``"buffered"`` (see ``_writers``).
        on_error: ``"keep"`` (errored records stay, marked ``errored``) or ``"discard"``
            (nothing of an errored run stays: ``Store.discard_run``).
        flush_bytes: Incremental flush size, in UTF-8 bytes of streamed text (default 4096).
        owner: The worker id holding the run's lease (default: host, pid and a random part).
        lease_seconds: Lease length; heartbeats renew it every third of it (default 60 s).
        translate: Stored messages -> AG-UI messages (default :func:`translate_messages`).
        chat_options: Keyword arguments for ``Store.create_chat`` (``name``, ``tenant_id``...).
        keep_events: Keep every event that carries no message content (``RAW``, ``CUSTOM``,
            ``USAGE_METADATA``, unknown types) whole in the run's ``metadata["agui_events"]``;
            they are counted and their token usage taken either way (``_fold_other``).
        accept_history: Store inbound messages of any role that the chat does not hold
            (recorded history, as ``threadkeep import`` does) instead of refusing them.
        run_metadata: Extra entries for every run's ``metadata`` (JSON values), written
            with the run's end.

    Raises:
        InvalidArgument: If a policy or size is invalid.
    """

    def __init__(
        self,
        inner: AGUIAgent,
        store: Store,
        *,
        user_id: str,
        agent_id: str | None = None,
        write_policy: WritePolicy = "incremental",
        on_error: OnError = "keep",
        flush_bytes: int = 4096,
        owner: str | None = None,
        lease_seconds: float = 60.0,
        translate: Callable[[Sequence[Message]], list[AguiMessage]] = translate_messages,
        chat_options: Mapping[str, Any] | None = None,
        keep_events: bool = False,
        accept_history: bool = False,
        run_metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if on_error not in ("keep", "discard"):
            raise InvalidArgument(f"on_error is 'keep' or 'discard', not {on_error!r}")
        if flush_bytes < 1 or lease_seconds <= 0:
            raise InvalidArgument("flush_bytes and lease_seconds must be positive")
        make_writer(write_policy, store, self.materialize, flush_bytes=flush_bytes)
        self.inner = inner
        self.store = store
        self.user_id = user_id
        self.agent_id = agent_id
        self.write_policy: WritePolicy = write_policy
        self.on_error: OnError = on_error
        self.flush_bytes = flush_bytes
        self.owner = owner or default_owner()
        self.lease_seconds = lease_seconds
        self._translate = translate
        self.chat_options = dict(chat_options or {})
        self.keep_events = keep_events
        self.accept_history = accept_history
        self.run_metadata = dict(run_metadata or {})
        self.persistence: asyncio.Task[None] | None = None
        """The background fold of the current (or last) run; done once it is all stored."""

    def translate(self, messages: Sequence[Message]) -> list[AguiMessage]:
        """Translate stored messages into the AG-UI history the inner agent receives."""
        return self._translate(messages)

    async def claim(self, input: RunAgentInput) -> ResumeState:
        """Claim an interrupted or errored run (or one whose lease expired) to resume it.

        A compare-and-set on the run: of concurrent claimers one wins.
        Pass the result to :meth:`run` as ``resume=``.

        Raises:
            ChatNotFound: If ``(user_id, input.thread_id)`` has no chat.
            RunNotFound: If the chat has no run ``input.run_id``.
            Conflict: If the run is complete or another worker holds a live lease.
        """
        chat = await self._find_chat(input)
        if chat is None:
            raise ChatNotFound(f"user {self.user_id!r} has no chat for thread {input.thread_id!r}")
        run = await self.store.claim_run(
            chat.chat_id, input.run_id, owner=self.owner, lease_seconds=self.lease_seconds
        )
        steps = await self.store.get_steps(chat.chat_id, input.run_id)
        last = await self.store.get_last_incomplete_step(chat.chat_id)
        if last is None or last.run_id != input.run_id:  # the chat's newest is another run's
            open_steps = [s for s in steps if s.status is not StepStatus.COMPLETED]
            last = open_steps[-1] if open_steps else None
        return ResumeState(chat, run, steps, last)

    async def run(
        self, input: RunAgentInput, *, resume: ResumeState | None = None
    ) -> AsyncIterator[BaseEvent]:
        """Store new inbound messages, replay the stored history, stream the inner agent.

        An inbound message not stored in this chat must be a user message (or the result
        of a stored tool call); any other unknown message ends the run with a
        ``RUN_ERROR`` of code ``INVALID_INPUT`` and nothing is written. "Stored" counts
        tool calls and reasonings nested in stored messages, so a client echoing its whole
        message list replays cleanly. The inner agent receives a copy of ``input`` whose
        messages are the chat's context (``Store.context_messages``: what follows the last
        boundary) translated to AG-UI. Its events are yielded verbatim while a background
        task folds them. On cancellation (or a consumer closing the stream) open records
        end ``interrupted`` with everything delivered kept; when the inner agent raises,
        they end ``errored`` and the exception propagates.

        Args:
            input: The AG-UI run input; ``thread_id``/``run_id`` key the chat and the run.
            resume: From :meth:`claim`, to run a claimed run again.

        Yields:
            The inner agent's events, or one ``RUN_ERROR`` (codes ``INVALID_INPUT``,
            ``RUN_CONFLICT`` for a run id already used, ``STORAGE_ERROR``).
        """
        opened = await self._open(input, resume)
        if isinstance(opened, RunErrorEvent):
            yield opened
            return
        state = opened.state
        queue: Channel[BaseEvent | _StepChange | _End] = Channel()
        self.persistence = asyncio.create_task(self._persist(state, queue))
        _BACKGROUND.add(self.persistence)
        self.persistence.add_done_callback(_BACKGROUND.discard)
        context = RunContext(
            chat_id=state.chat.chat_id,
            run_id=state.run_id,
            agent_id=self.agent_id,
            stack_id=state.stack_id,
            submit=_submitter(queue),
            previous_steps=opened.previous_steps,
            space=opened.space,
        )
        token = bind(context)
        status, error = RunStatus.COMPLETE, None
        try:
            await context.record(StepType.INPUT.value, input={"run_id": input.run_id})
            append = queue.pending.append  # queue.put_nowait, inlined: it runs per delta
            async for event in self.inner.run(opened.agent_input):
                append(event)
                if queue.waiter is not None:
                    queue.wake()
                yield event
        except (asyncio.CancelledError, GeneratorExit):
            status = RunStatus.INTERRUPTED
            raise
        except Exception as exc:
            status, error = RunStatus.ERRORED, f"{type(exc).__name__}: {exc}"
            raise
        finally:
            unbind(token)
            queue.put_nowait(_End(status, error))
            await asyncio.shield(self.persistence)

    async def _open(
        self, input: RunAgentInput, resume: ResumeState | None
    ) -> _Opened | RunErrorEvent:
        try:
            found = resume.chat if resume else await self._find_chat(input)
            context: list[Message] = []
            held: dict[str, Message] = {}
            named = newest_ids(input.messages)
            if found is not None:  # the context and the client's new ids, in one read
                context, held = await self.store.run_context(found.chat_id, agui_ids=named)
            new, problem = await classify_inbound(
                self.store,
                found.chat_id if found else None,
                input.messages,
                context,
                run_id=input.run_id,
                accept_any=self.accept_history,
                looked_up=(set(named), held),
            )
            if problem is not None:
                return RunErrorEvent(message=problem, code="INVALID_INPUT")
            chat = found or await self._create_chat(input)
            try:
                begun = await self._begin(chat, input, new)
            except IdempotencyConflict as exc:
                context, new, begun = await self._begin_again(chat, input, new, exc)
        except Conflict as exc:
            return RunErrorEvent(message=str(exc), code="RUN_CONFLICT")
        except InvalidArgument as exc:  # the client's input (an empty threadId...), not the store
            _log.warning("threadkeep: run %r refused: %s", input.run_id, exc)
            return RunErrorEvent(message=str(exc), code="INVALID_INPUT")
        except ThreadkeepError as exc:
            _log.exception("threadkeep: run %r could not start", input.run_id)
            return RunErrorEvent(message=f"history storage failed: {exc}", code="STORAGE_ERROR")
        history = self.translate([*context, *new])
        previous = resume.steps if resume else []
        roots = [s.stack_id for s in previous if s.stack_depth == 0]
        stack_id = roots[0] if roots else uuid4().hex
        writer = make_writer(
            self.write_policy, self.store, self.materialize, flush_bytes=self.flush_bytes
        )
        state = FoldState(chat, input.run_id, stack_id, writer, agent_id=self.agent_id)
        state.run_record = begun
        state.inbound_ids = {m.id for m in input.messages}
        state.history = [*context, *new]
        state.keep_events = self.keep_events
        state.run_metadata.update(self.run_metadata)
        if resume is not None:
            await self._load_previous_attempt(state, resume)
        last = resume.last_incomplete if resume else None
        space = dict(last.space_snapshot or {}) if last is not None else {}
        agent_input = input.model_copy(update={"messages": history})
        return _Opened(state, agent_input, previous, space)

    async def _load_previous_attempt(self, state: FoldState, resume: ResumeState) -> None:
        """Give a resumed run's fold what earlier attempts stored (issue 18: no re-store)."""
        state.previous_steps = {
            str(s.metadata.get("key")): s for s in resume.steps if s.metadata.get("key")
        }
        cursor: str | None = None
        while True:
            page = await self.store.list_messages(
                state.chat.chat_id,
                limit=200,
                cursor=cursor,
                message_filter=MessageFilter(run_id=state.run_id),
            )
            for message in page.items:
                if message.agui_id:
                    state.previous_messages[message.agui_id] = message
            if not page.has_more:
                return
            cursor = page.next_cursor

    async def _begin(self, chat: Chat, input: RunAgentInput, new: list[Message]) -> Run:
        return await self.store.begin_run(
            chat.chat_id,
            input.run_id,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            messages=new,
        )

    async def _begin_again(
        self,
        chat: Chat,
        input: RunAgentInput,
        new: list[Message],
        conflict: IdempotencyConflict,
    ) -> tuple[list[Message], list[Message], Run]:
        """Begin the run after an inbound id collided with a message no read had found.

        The message holding it was stored meanwhile by a concurrent run of the same client
        (a double submit: the same message, so it is used as stored, whichever run
        wrote it first), or is hidden (``delete_messages``: it counts as stored). The
        inbound messages are classified again counting hidden ones, and the context is
        read again so the inner agent sees the stored message.

        Returns:
            ``(context, new, run)``: the chat's context, the messages this run stored and
            the run record ``begin_run`` returned.

        Raises:
            IdempotencyConflict: ``conflict``, if a visible message holds an inbound id
                with other content (a different message), or the input is now refused.
        """
        context = await self.store.context_messages(chat.chat_id)
        again, problem = await classify_inbound(
            self.store,
            chat.chat_id,
            input.messages,
            context,
            run_id=input.run_id,
            accept_any=self.accept_history,
            include_hidden=True,
        )
        if problem is not None:
            raise conflict
        still_new = {m.agui_id for m in again}
        for message in new:
            if message.agui_id is None or message.agui_id in still_new:
                continue
            held = await self.store.get_message_by_agui_id(chat.chat_id, message.agui_id)
            if held is not None and not same_message(held, message):
                raise conflict
        begun = await self._begin(chat, input, again)
        return context, again, begun

    async def _find_chat(self, input: RunAgentInput) -> Chat | None:
        # A read first: create_chat is an (idempotent) write, needed once per thread only,
        # and not at all for input that is refused. The tenant is part of the chat's key.
        tenant_id = self.chat_options.get("tenant_id")
        return await self.store.find_chat(self.user_id, input.thread_id, tenant_id=tenant_id)

    async def _create_chat(self, input: RunAgentInput) -> Chat:
        options = {"agent_id": self.agent_id, **self.chat_options}
        return await self.store.create_chat(self.user_id, input.thread_id, **options)

    # -- the background fold ------------------------------------------------------------

    async def _persist(
        self, state: FoldState, queue: Channel[BaseEvent | _StepChange | _End]
    ) -> None:
        heartbeat = _Heartbeat(lambda: self._heartbeat(state), self.lease_seconds / 3)
        pending = queue.pending
        try:
            while True:
                item = queue.get_nowait()  # no await per item while the queue holds some
                if item is None:
                    item = await queue.get()
                if isinstance(item, _End):
                    break
                if self.fold_delta_now(state, item):  # type: ignore[arg-type]
                    self.fold_more_deltas(state, item, pending)  # type: ignore[arg-type]
                else:
                    await self._fold_item(state, item)
            heartbeat.cancel()
            await self._close(state, item)
        finally:
            heartbeat.cancel()

    async def _fold_item(self, state: FoldState, item: BaseEvent | _StepChange) -> None:
        try:
            if isinstance(item, _StepChange):
                await state.writer.step_changed(state, item.step, durable=item.durable)
            else:
                await self.dispatch(state, item)
        except Exception:  # noqa: BLE001 - one bad event must not stop the fold of the rest
            _log.exception("threadkeep: folding %s failed; continuing", type(item).__name__)
        finally:
            if isinstance(item, _StepChange) and item.done is not None and not item.done.done():
                item.done.set_result(None)

    async def _close(self, state: FoldState, end: _End) -> None:
        if state.outcome is None:
            state.error = state.error or end.error
            if end.status is RunStatus.COMPLETE and state.run_started:
                # RUN_STARTED, then no RUN_FINISHED / RUN_ERROR: the stream was cut.
                end = _End(RunStatus.INTERRUPTED, None)
                state.error = state.error or _CUT
        # The first terminal event decided the outcome; records opened after it end too.
        await self.end_run_records(state, state.outcome or end.status)
        assert state.outcome is not None
        if state.outcome is RunStatus.ERRORED and self.on_error == "discard":
            try:
                await self.store.discard_run(state.chat.chat_id, state.run_id)
            except ThreadkeepError:
                _log.exception("threadkeep: errored run %r not discarded", state.run_id)
            return
        metadata = dict(state.run_metadata)
        if state.has_agui_state:
            metadata["agui_state"] = state.agui_state
        status = _truncation_outcome(state, metadata)
        await state.writer.end(state, owner=self.owner, status=status, metadata=metadata)

    async def _heartbeat(self, state: FoldState) -> None:
        # Started a third of the lease into the run (``_Heartbeat``), then every third.
        while True:
            try:
                state.run_record = await self.store.heartbeat_run(
                    state.chat.chat_id,
                    state.run_id,
                    owner=self.owner,
                    lease_seconds=self.lease_seconds,
                )
            except Conflict:
                _log.warning("threadkeep: run %r lost its lease to another worker", state.run_id)
                return
            except ThreadkeepError:
                _log.warning("threadkeep: heartbeat of run %r failed", state.run_id, exc_info=True)
            await asyncio.sleep(self.lease_seconds / 3)


class _Heartbeat:
    """Runs a run's heartbeats from ``delay`` seconds on, until cancelled.

    A timer rather than a task sleeping from the start: most runs end before their
    first heartbeat, and a timer costs neither a task nor its cancellation.
    """

    __slots__ = ("_beats", "_timer", "task")

    def __init__(self, beats: Callable[[], Coroutine[Any, Any, None]], delay: float) -> None:
        self._beats = beats
        self.task: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._beats())

    def cancel(self) -> None:
        """Stop the heartbeats (and the timer, when they have not started)."""
        self._timer.cancel()
        if self.task is not None:
            self.task.cancel()


_CUT = "the agent's stream ended after RUN_STARTED without RUN_FINISHED or RUN_ERROR"


def _truncation_outcome(state: FoldState, metadata: dict[str, Any]) -> RunStatus:
    """Return the run's end status, ``errored`` if a message was truncated (noted).

    A message cut at the store's ``max_message_bytes`` means the run's output is not
    stored whole: its ids go to ``metadata["truncated_messages"]`` and a run that would
    end ``complete`` ends ``errored``, its ``error`` saying why (an interrupted or errored
    run keeps its status). ``on_error="discard"`` does not apply: it is for agent failures.
    """
    assert state.outcome is not None
    cut = [r for r in state.records.values() if r.truncated_at is not None]
    if not cut:
        return state.outcome
    names = [r.message.agui_id or str(r.message.message_id) for r in cut]
    metadata["truncated_messages"] = names
    if state.outcome is not RunStatus.COMPLETE:
        return state.outcome
    limit = state.writer.store.max_message_bytes
    state.error = state.error or (
        f"message {', '.join(map(repr, names))} passed this store's max_message_bytes "
        f"({limit}) and was stored truncated (see its metadata['truncated'])"
    )
    return RunStatus.ERRORED


def _submitter(
    queue: Channel[BaseEvent | _StepChange | _End],
) -> Callable[[Step, bool], Any]:
    async def submit(step: Step, durable: bool) -> None:
        if not durable:
            queue.put_nowait(_StepChange(step, durable=False))
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.put_nowait(_StepChange(step, durable=True, done=done))
        await asyncio.shield(done)

    return submit
