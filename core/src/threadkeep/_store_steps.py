"""Steps: resume points of a run (SPEC section 3, "Runs, status and steps").

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
from ._store_context import ContextOps

__all__ = ["StepOps"]

_MAX_STACK_DEPTH = 256


class StepOps(ContextOps):
    """Step operations (Yao seed, "ChatStore Interface", steps part)."""

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """Insert or replace steps by ``step_id``, atomically (the buffered exit write).

        New steps get a store-assigned ``seq``, increasing within their chat.

        Args:
            steps: A list of :class:`Step` (or subclass) instances or mappings of fields.

        Returns:
            The stored steps, in input order.

        Raises:
            ChatNotFound: If a step's chat does not exist or is deleted.
            InvalidArgument: If ``steps`` is not a list or a step does not validate.
            InvalidContent: If a string holds a lone surrogate, or a float is NaN or
                infinite; nothing is written.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        given = [
            as_model(Step, step, f"steps[{i}]") for i, step in enumerate(as_items(steps, "steps"))
        ]
        for step in given:
            self.record_body(step)
        for chat_id in dict.fromkeys(s.chat_id for s in given):
            await self.get_chat(chat_id)
        return await self._save_steps(given, self._now()) if given else []

    async def update_step(self, step_id: UUID | str, /, **changes: Any) -> Step:
        """Change a step's fields (``status``, ``output``, ``error``, ``space_snapshot``...).

        Args:
            step_id: The step (a ``UUID`` or its text form).
            **changes: New field values; not ``step_id``, ``chat_id``, ``seq`` or
                ``created_at``.

        Returns:
            The stored step.

        Raises:
            StepNotFound: If there is no such step.
            InvalidArgument: If ``step_id`` is not an id, an id field or ``seq`` is
                changed, or a value does not validate.
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        step_id = as_id(step_id, "step_id")
        frozen = set(changes) & {"step_id", "chat_id", "seq", "created_at"}
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a step")
        step = await self.get_step(step_id)
        updated = validate_model(type(step), {**step.model_dump(), **changes})
        (stored,) = await self.save_steps([updated])
        return stored

    async def get_step(self, step_id: UUID | str) -> Step:
        """Return a step.

        Args:
            step_id: The step (a ``UUID`` or its text form).

        Returns:
            The step.

        Raises:
            StepNotFound: If there is no such step.
            InvalidArgument: If ``step_id`` is not an id.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        step_id = as_id(step_id, "step_id")
        step = await self._get_step(step_id)
        if step is None:
            raise StepNotFound(f"no step {step_id}")
        return step

    async def get_steps(self, chat_id: UUID | str, run_id: str) -> list[Step]:
        """Return a run's steps in seq order (an archived chat is rehydrated first).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).

        Returns:
            The steps, oldest seq first (empty if there are none).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``run_id`` is not text.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        run_id = as_text(run_id, "run_id")
        steps = await self._steps_for_run(chat_id, run_id)
        if not steps and await self._rehydrate_if_archived(chat_id):
            steps = await self._steps_for_run(chat_id, run_id)
        return steps

    async def get_last_incomplete_step(self, chat_id: UUID | str) -> Step | None:
        """Return the chat's newest step that is not ``completed`` (where a resume starts).

        An archived chat is rehydrated first.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The step, or ``None`` if every step is completed (or there are none).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        step = await self._last_incomplete_step(chat_id)
        if step is None and await self._rehydrate_if_archived(chat_id):
            step = await self._last_incomplete_step(chat_id)
        return step

    async def get_stack_steps(self, stack_id: str) -> list[Step]:
        """Return the steps of one stack node (one agent's part of a nested call), in order.

        Args:
            stack_id: The stack node (non-empty).

        Returns:
            Its steps, oldest first (empty if there are none).

        Raises:
            InvalidArgument: If ``stack_id`` is not a non-empty ``str``.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        return await self._steps_for_stack(as_text(stack_id, "stack_id"))

    async def get_stack_path(self, stack_id: str) -> list[str]:
        """Return the stack ids from the root call down to ``stack_id`` (root first).

        Args:
            stack_id: The stack node (non-empty).

        Returns:
            The path of stack ids, root first, ``stack_id`` last.

        Raises:
            StepNotFound: If no step has ``stack_id`` (or an ancestor has no steps).
            Conflict: If the parent links form a cycle or are deeper than 256.
            InvalidArgument: If ``stack_id`` is not a non-empty ``str``.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
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
