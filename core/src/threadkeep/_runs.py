"""Steps and runs: the execution records that make resume and retry possible.

A step records
one unit of a run (input, llm, tool, delegate, hooks) with its input, output and a snapshot of
the shared space, and the stack ids of nested agent calls. A run records who is executing it
and until when (a lease), so a crashed worker's run can be found and resumed by exactly one
other worker.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID, uuid4

from pydantic import BaseModel, ConfigDict, Field

from ._models import UTCDateTime

__all__ = ["Run", "RunStatus", "Step", "StepStatus", "StepType"]


class StepType(StrEnum):
    """Well-known step types; ``Step.type`` also accepts any other non-empty string."""

    INPUT = "input"
    HOOK_CREATE = "hook_create"
    LLM = "llm"
    TOOL = "tool"
    HOOK_NEXT = "hook_next"
    DELEGATE = "delegate"


class StepStatus(StrEnum):
    """A step's state; every state but ``completed`` can be resumed."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class RunStatus(StrEnum):
    """How a run stands: executing, or ended one of three ways."""

    ACTIVE = "active"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ERRORED = "errored"


class Step(BaseModel):
    """One execution step of a run; ``seq`` is store-assigned, increasing within a chat."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    step_id: UUID = Field(default_factory=uuid4)
    chat_id: UUID
    run_id: str | None = None
    request_id: str | None = None
    agent_id: str | None = None
    stack_id: str = Field(min_length=1)
    stack_parent_id: str | None = None
    stack_depth: int = Field(default=0, ge=0)
    type: str = Field(min_length=1)
    status: StepStatus = StepStatus.PENDING
    input: Any = None
    output: Any = None
    space_snapshot: dict[str, Any] | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = None
    created_at: UTCDateTime | None = None
    updated_at: UTCDateTime | None = None


class Run(BaseModel):
    """One agent run in a chat, keyed by ``(chat_id, run_id)``.

    ``owner`` is the worker executing it and ``lease_expires_at`` the instant after which a
    sweeper may declare it dead; ``revision`` is the compare-and-set token.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    chat_id: UUID
    run_id: str = Field(min_length=1)
    status: RunStatus = RunStatus.ACTIVE
    owner: str | None = None
    lease_expires_at: UTCDateTime | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    revision: int = 0
    created_at: UTCDateTime | None = None
    updated_at: UTCDateTime | None = None
