"""What a driver can do, declared as data (``Driver.capabilities``).

The contract suite reads the declaration to skip what a driver does not claim (the skip names
the capability) and checks that each claim is honoured. The generated capability matrix
(``docs/capabilities.md``) is written from these declarations and a test run.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Capabilities"]


class Capabilities(BaseModel):
    """A driver's declared capabilities; every field is a claim the contract suite checks.

    Attributes:
        transactions: Batch appends commit atomically through a native transaction
            (otherwise the driver reaches all-or-nothing another way, for example one
            document holding the batch).
        strong_uuid_lookup: A lookup by uuid (message, tool call, reasoning) finds every
            committed record from any process. ``False`` for stores whose secondary index is
            written best-effort (the memory-service driver): a lookup may say "not found".
        steps: Steps and runs (resume, claim, sweep) are stored.
        archive: The hot-row primitives that cold archiving needs (scan, delete, restore).
        persistent: Data survives closing and reopening the store with the same URL.
        concurrent_processes: Several processes may open the same store at once.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    transactions: bool = False
    strong_uuid_lookup: bool = True
    steps: bool = False
    archive: bool = False
    persistent: bool = True
    concurrent_processes: bool = True
    notes: dict[str, str] = Field(
        default_factory=dict, description="Free-text remarks per capability, for the docs."
    )
