"""Recording steps from inside an agent, and resuming.

While a :class:`StorageAgent` runs an inner agent, :func:`current_run` returns the run's
:class:`RunContext`. An agent records each unit of work as a step::

    ctx = current_run()
    async with ctx.step("llm", input={"messages": n}) as step:
        ...                                   # stream the model's events
        step.output = {"content": text}
    async with ctx.step("tool", input=args, key=call_id) as step:
        if not step.done:                     # completed in an earlier attempt: skip it
            step.output = await run_tool(args)
    result = step.output

A step is stored ``running`` with a snapshot of ``ctx.space`` and its stack ids, then
``completed`` with its output (``failed`` with the error if the body raises, ``interrupted``
if the run is cancelled). A completed ``tool`` step is stored before ``async with`` exits,
under either write policy, so a resumed run never runs a finished tool again.

Nested agent calls: ``async with ctx.delegate("visualizer") as child`` records a ``delegate``
step and makes ``child`` (a context one stack level down, ``stack_parent_id`` = this stack)
the current run context inside the block; ``Store.get_stack_path`` walks back to the root.

Resume: ``StorageAgent.claim`` takes an interrupted or errored run (a compare-and-set; a
second claimer gets ``Conflict``) and the run starts again with the earlier attempt's steps:
a step whose key matches a completed one yields ``done=True`` and its stored ``output``
without running. Keys default to ``"<stack_id>:<type>:<n>"`` (the n-th step of that type in
that stack), so an agent that repeats its path resumes without naming keys; pass ``key=``
(for example the tool call id) when the path can change.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID, uuid4

from .._errors import ThreadkeepError
from .._runs import Step, StepStatus, StepType

__all__ = ["NoActiveRun", "RunContext", "StepHandle", "bind", "current_run", "unbind"]

Submit = Callable[[Step, bool], Awaitable[None]]
"""Hands a step to the run's writer; ``True`` waits until it is stored."""

_CURRENT: ContextVar[RunContext] = ContextVar("threadkeep_agui_run")


class NoActiveRun(ThreadkeepError):
    """``current_run()`` was called outside a run of a ``StorageAgent``."""


def current_run() -> RunContext:
    """Return the context of the run executing the calling code.

    Raises:
        NoActiveRun: If no ``StorageAgent`` run is executing this code.
    """
    try:
        return _CURRENT.get()
    except LookupError:
        msg = "no threadkeep run is active; call current_run() inside an agent a StorageAgent runs"
        raise NoActiveRun(msg) from None


class StepHandle:
    """One step in progress: set :attr:`output`; :attr:`done` means "already completed".

    Attributes:
        step: The step record as last submitted.
        done: ``True`` when a resumed run found this step completed: skip the work and use
            :attr:`output`, which holds the stored output.
        output: The step's output (any JSON value), stored when the step completes.
    """

    def __init__(self, step: Step, *, done: bool) -> None:
        self.step = step
        self.done = done
        self.output: Any = step.output if done else None

    @property
    def key(self) -> str:
        """The key that matches this step across attempts of the run."""
        return str(self.step.metadata.get("key", ""))


class RunContext:
    """The running agent's view of its run: identity, stack frame, shared space, steps.

    Built by :class:`StorageAgent`; agents get it from :func:`current_run`.

    Attributes:
        chat_id: The chat the run belongs to.
        run_id: The AG-UI run id.
        agent_id: The agent executing this stack level.
        stack_id: This stack level (the root of a run, or a delegated call).
        stack_parent_id: The stack that delegated to this one (``None`` at the root).
        stack_depth: 0 at the root, 1 for a delegated call, and so on.
        space: Data shared by the run's agents; snapshotted
            into every step and restored from the last incomplete step on resume.
        previous_steps: The steps of earlier attempts of this run (empty on a first run).
        done: For a delegated call found completed on resume: skip it.
        output: For a delegated call: set it to record the ``delegate`` step's output.
    """

    def __init__(
        self,
        *,
        chat_id: UUID,
        run_id: str,
        agent_id: str | None,
        stack_id: str,
        submit: Submit,
        previous_steps: Sequence[Step] = (),
        space: dict[str, Any] | None = None,
        parent: RunContext | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.run_id = run_id
        self.agent_id = agent_id
        self.stack_id = stack_id
        self.stack_parent_id = parent.stack_id if parent else None
        self.stack_depth: int = parent.stack_depth + 1 if parent else 0
        self.space: dict[str, Any] = space if space is not None else {}
        self.previous_steps = list(previous_steps)
        self.done = False
        self.output: Any = None
        self._submit = submit
        self._by_key = {str(s.metadata.get("key")): s for s in self.previous_steps}
        self._ordinals: defaultdict[str, itertools.count[int]] = defaultdict(itertools.count)
        self._children = itertools.count()

    @property
    def resuming(self) -> bool:
        """Whether this is a resumed attempt of the run (earlier steps exist)."""
        return bool(self.previous_steps)

    def completed(self, key: str) -> Step | None:
        """Return the completed step of an earlier attempt with this key, or ``None``."""
        step = self._by_key.get(key)
        return step if step is not None and step.status is StepStatus.COMPLETED else None

    def _key(self, type_: str, key: str | None) -> str:
        return key or f"{self.stack_id}:{type_}:{next(self._ordinals[type_])}"

    def _new_step(
        self, type_: str, key: str, input_: Any, status: StepStatus, output: Any = None
    ) -> Step:
        earlier = self._by_key.get(key)
        return Step(
            step_id=earlier.step_id if earlier else uuid4(),
            chat_id=self.chat_id,
            run_id=self.run_id,
            agent_id=self.agent_id,
            stack_id=self.stack_id,
            stack_parent_id=self.stack_parent_id,
            stack_depth=self.stack_depth,
            type=type_,
            status=status,
            input=input_,
            output=output,
            space_snapshot=copy.deepcopy(self.space) if self.space else {},
            metadata={"key": key},
        )

    async def record(
        self, step_type: str, *, input: Any = None, output: Any = None, key: str | None = None
    ) -> Step:
        """Record a step that already happened (for example a hook), completed, in one write.

        Returns:
            The step (or the completed step of an earlier attempt with the same key).
        """
        key = self._key(step_type, key)
        earlier = self.completed(key)
        if earlier is not None:
            return earlier
        step = self._new_step(step_type, key, input, StepStatus.COMPLETED, output)
        await self._submit(step, step_type == StepType.TOOL)
        return step

    @asynccontextmanager
    async def step(
        self, step_type: str, *, input: Any = None, key: str | None = None
    ) -> AsyncIterator[StepHandle]:
        """Record the block as one step (see the module docstring).

        Args:
            step_type: ``input``, ``hook_create``, ``llm``, ``tool``, ``hook_next``, ``delegate``
                or any other non-empty name.
            input: The step's input (a JSON value), stored for retry.
            key: Matches the step across attempts; default ``"<stack_id>:<type>:<n>"``.

        Yields:
            A :class:`StepHandle`; set its ``output``. When ``done`` is true the step
            completed in an earlier attempt and nothing is recorded again.
        """
        key = self._key(step_type, key)
        earlier = self.completed(key)
        if earlier is not None:
            yield StepHandle(earlier, done=True)
            return
        running = self._new_step(step_type, key, input, StepStatus.RUNNING)
        handle = StepHandle(running, done=False)
        await self._submit(handle.step, False)
        try:
            yield handle
        except BaseException as exc:
            failed = isinstance(exc, Exception)
            handle.step = handle.step.model_copy(
                update={
                    "status": StepStatus.FAILED if failed else StepStatus.INTERRUPTED,
                    "error": f"{type(exc).__name__}: {exc}" if failed else None,
                    "output": handle.output,
                }
            )
            await self._submit(handle.step, False)
            raise
        handle.step = handle.step.model_copy(
            update={"status": StepStatus.COMPLETED, "output": handle.output}
        )
        await self._submit(handle.step, step_type == StepType.TOOL)

    @asynccontextmanager
    async def delegate(
        self, agent_id: str, *, input: Any = None, key: str | None = None
    ) -> AsyncIterator[RunContext]:
        """Record a nested agent call and run the block one stack level down.

        The ``delegate`` step's output is the child's ``output`` attribute when set. Inside
        the block :func:`current_run` returns the child context; the child's first step,
        ``input``, records ``input``.

        Yields:
            The child :class:`RunContext` (``done`` true if the call completed before).
        """
        call = {"agent_id": agent_id, "input": input}
        async with self.step(StepType.DELEGATE.value, input=call, key=key) as handle:
            child = RunContext(
                chat_id=self.chat_id,
                run_id=self.run_id,
                agent_id=agent_id,
                stack_id=f"{self.stack_id}.{next(self._children)}",
                submit=self._submit,
                previous_steps=self.previous_steps,
                space=self.space,
                parent=self,
            )
            child.done = handle.done
            if not handle.done:
                await child.record(StepType.INPUT.value, input=input)
            token = _CURRENT.set(child)
            try:
                yield child
            finally:
                _CURRENT.reset(token)
            if not handle.done:
                handle.output = getattr(child, "output", None)


def bind(context: RunContext) -> Any:
    """Make ``context`` the current run context; return the token for :func:`unbind`."""
    return _CURRENT.set(context)


def unbind(token: Any) -> None:
    """Undo :func:`bind` (ignored when the context changed in between)."""
    # A generator finalized from another context cannot reset; the context is gone anyway.
    with contextlib.suppress(ValueError):
        _CURRENT.reset(token)
