"""Steps: resume points of a run.

Needs the ``steps`` capability. A step records one unit of a run (input, llm call, tool,
delegate...); ``get_last_incomplete_step`` is where a resume starts and
``get_stack_path`` walks nested agent calls from the root.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ._content import validate_model
from ._errors import Conflict, InvalidArgument, StepNotFound
from ._runs import Step
from ._store_args import as_id, as_items, as_model, as_text
from ._store_core import Component

__all__ = ["StepOps"]

_MAX_STACK_DEPTH = 256


class StepOps(Component):
    """Step operations: save, read and list a run's steps."""

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """Implement :meth:`threadkeep.Store.save_steps`."""
        self._ctx.require_open()
        given = [
            as_model(Step, step, f"steps[{i}]") for i, step in enumerate(as_items(steps, "steps"))
        ]
        for step in given:
            self._ctx.records.record_body(step)
        for chat_id in dict.fromkeys(s.chat_id for s in given):
            await self._ctx.chats.get_chat(chat_id)
        return await self._driver.save_steps(given, self._ctx.now()) if given else []

    async def update_step(self, step_id: UUID | str, /, **changes: Any) -> Step:
        """Implement :meth:`threadkeep.Store.update_step`."""
        step_id = as_id(step_id, "step_id")
        frozen = set(changes) & {"step_id", "chat_id", "seq", "created_at"}
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a step")
        step = await self.get_step(step_id)
        updated = validate_model(type(step), {**step.model_dump(), **changes})
        (stored,) = await self.save_steps([updated])
        return stored

    async def get_step(self, step_id: UUID | str) -> Step:
        """Implement :meth:`threadkeep.Store.get_step`."""
        self._ctx.require_open()
        step_id = as_id(step_id, "step_id")
        step = await self._driver.get_step(step_id)
        if step is None:
            raise StepNotFound(f"no step {step_id}")
        return step

    async def get_steps(self, chat_id: UUID | str, run_id: str) -> list[Step]:
        """Implement :meth:`threadkeep.Store.get_steps`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        steps = await self._driver.steps_for_run(chat_id, run_id)
        if not steps and await self._ctx.chats._rehydrate_if_archived(chat_id):
            steps = await self._driver.steps_for_run(chat_id, run_id)
        return steps

    async def get_last_incomplete_step(self, chat_id: UUID | str) -> Step | None:
        """Implement :meth:`threadkeep.Store.get_last_incomplete_step`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        step = await self._driver.last_incomplete_step(chat_id)
        if step is None and await self._ctx.chats._rehydrate_if_archived(chat_id):
            step = await self._driver.last_incomplete_step(chat_id)
        return step

    async def get_stack_steps(self, stack_id: str) -> list[Step]:
        """Implement :meth:`threadkeep.Store.get_stack_steps`."""
        self._ctx.require_open()
        return await self._driver.steps_for_stack(as_text(stack_id, "stack_id"))

    async def get_stack_path(self, stack_id: str) -> list[str]:
        """Implement :meth:`threadkeep.Store.get_stack_path`."""
        stack_id = as_text(stack_id, "stack_id")
        path = [stack_id]
        current = stack_id
        for _ in range(_MAX_STACK_DEPTH):
            steps = await self.get_stack_steps(current)
            if not steps:
                raise StepNotFound(f"no step has stack_id {current!r}")
            parent = steps[0].stack_parent_id
            if parent is None:
                return path[::-1]
            if parent in path:
                raise Conflict(f"stack {stack_id!r} has a cycle through {parent!r}")
            path.append(parent)
            current = parent
        raise Conflict(f"stack {stack_id!r} is deeper than {_MAX_STACK_DEPTH}")
