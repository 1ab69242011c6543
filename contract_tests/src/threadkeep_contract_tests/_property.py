"""The property-based part of the suite: the state machine run as one pytest test."""

from __future__ import annotations

from typing import ClassVar

from threadkeep import Capabilities

from ._base import ContractBase, StoreFactory
from .stateful import run_store_state_machine

__all__ = ["StateMachineTests"]


class StateMachineTests(ContractBase):
    """Random operation sequences compared with the plain-Python model (``stateful``)."""

    contract_area: ClassVar[str] = "State machine (model-based)"

    def test_state_machine(self, store_factory: StoreFactory, capabilities: Capabilities) -> None:
        """The store's rules hold after every step of random operation sequences.

        Ordering, idempotency, content and pages are checked against the model after each
        chat / message / batch / tool-call / reasoning / page / delete / restore /
        start-over / compaction / reopen step (examples per the Hypothesis profile).
        """
        run_store_state_machine(store_factory, self, capabilities=capabilities)
