"""A Hypothesis state machine that checks a driver against a plain-Python model.

``StoreStateMachine`` runs random sequences of chat, message, batch, tool-call, reasoning,
page-walk, delete, restore, start-over, compaction, context, lookup and reopen operations on a
real store and on :class:`~threadkeep_contract_tests._model.StoreModel`, and after every step
checks the store's rules as invariants: the raw rows the driver's back door returns agree with
the model, and so does the newest page (ordering, idempotency, content fidelity, pages).

``StoreContract`` runs it as ``test_state_machine``. To run it on its own::

    from threadkeep_contract_tests.stateful import run_store_state_machine

    def test_machine(store_factory, back_door):
        run_store_state_machine(store_factory, back_door)

Rules cannot take pytest fixtures, so the factory and back door are passed to the
constructor (Hypothesis ``docs/stateful.rst``). Each machine instance owns one
``asyncio.Runner``; the store is opened inside it and closed in ``teardown()``. Every run
uses its own user, thread and tenant names, so runs can share one storage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar
from uuid import UUID, uuid4

from hypothesis import note, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from threadkeep import Capabilities, ChatNotFound, MessageNotFound, Store

from ._base import StoreFactory
from ._helpers import assert_utc, body_of
from ._machine_reads import ReadRules
from ._machine_writes import WriteRules
from ._model import StoreModel
from ._raw import BackDoor

__all__ = ["StoreStateMachine", "run_store_state_machine"]

T = TypeVar("T")


class StoreStateMachine(WriteRules, ReadRules, RuleBasedStateMachine):
    """Random operations on a store and the model, with the store's rules checked after each.

    Args:
        factory: ``(**options) -> Store``, unopened, on the test's storage.
        back_door: An object with ``raw_chats(store)`` and ``raw_messages(store, chat_id)``
            (a ``StoreContract`` subclass instance).
        capabilities: The driver's declaration; default ``store.capabilities``. With
            ``strong_uuid_lookup=False`` a lookup may say "not found" but never return another
            record; with ``persistent=False`` the ``reopen`` rule does not run.
    """

    def __init__(
        self, factory: StoreFactory, back_door: BackDoor, capabilities: Capabilities | None = None
    ) -> None:
        super().__init__()
        self._factory = factory
        self._back_door = back_door
        self._runner = asyncio.Runner()
        try:
            self.store: Store = self._runner.run(factory().open())
        except BaseException:
            self._runner.close()
            raise
        self.capabilities = capabilities or self.store.capabilities
        self.model = StoreModel()
        self.namespace = uuid4().hex[:10]
        self.touched: set[UUID] = set()
        self.chats_changed = False
        self.counter = 0

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one store call on this machine's event loop."""
        return self._runner.run(coroutine)

    def teardown(self) -> None:
        """Erase this run's users (runs share one storage; keep it small), then close."""
        try:
            try:
                for index in range(3):
                    self._runner.run(self.store.erase_user(self.user(index)))
            finally:
                self._runner.run(self.store.close())
        finally:
            self._runner.close()

    # -- reopen --------------------------------------------------------------------------

    @precondition(lambda self: self.capabilities.persistent and bool(self.model.chats))
    @rule()
    def reopen(self) -> None:
        """Close the store and open it again through the factory: nothing may be lost."""
        self.begin("reopen")
        note("reopen the store")
        self.run(self.store.close())
        self.store = self.run(self._factory().open())
        self.touched = set(self.model.chats)
        self.chats_changed = True

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def raw_rows_agree_with_model(self) -> None:
        """The back door's rows of every chat the last step touched equal the model's."""
        for chat_id in sorted(self.touched):
            chat = self.model.chats[chat_id]
            rows = sorted(
                self.run(self._back_door.raw_messages(self.store, chat_id)), key=lambda r: r.seq
            )
            got = [(r.message_id, r.seq, r.hidden, r.role, r.content, r.agui_id) for r in rows]
            want = [
                (
                    m.message_id,
                    m.seq,
                    m.hidden,
                    m.body["role"],
                    m.body.get("content", ""),
                    m.agui_id,
                )
                for m in chat.messages
            ]
            assert got == want, f"{chat.label}: stored rows differ from the model"

    @invariant()
    def raw_chats_agree_with_model(self) -> None:
        """After a chat-level step, the stored chats of this run and their flags match."""
        if not self.chats_changed:
            return
        self.chats_changed = False
        raw = self.run(self._back_door.raw_chats(self.store))
        got = {c.chat_id: c.deleted for c in raw if c.user_id.startswith(self.namespace)}
        want = {c.chat_id: c.deleted for c in self.model.chats.values()}
        assert got == want, "stored chats (or their deleted flags) differ from the model"

    @invariant()
    def newest_page_agrees_with_model(self) -> None:
        """The newest page of every chat the last step touched equals the model's tail."""
        for chat_id in sorted(self.touched):
            chat = self.model.chats[chat_id]
            if chat.deleted:
                self.expect_error(ChatNotFound, self.store.list_messages(chat_id))
                continue
            page = self.run(self.store.list_messages(chat_id))
            expected = chat.visible()[-50:]
            assert [m.message_id for m in page.items] == [m.message_id for m in expected], (
                f"{chat.label}: newest page holds other messages or another order"
            )
            for got, want in zip(page.items, expected, strict=True):
                assert got.seq == want.seq, f"{chat.label}: seq of {want.message_id} changed"
                assert body_of(got) == want.body, f"{chat.label}: body of seq {want.seq} changed"
                assert_utc(got.created_at, "message.created_at")
            assert page.has_more == (len(chat.visible()) > 50)

    # -- lookups (uuid lookups may miss on drivers with weak locators) -------------------

    def lookup(
        self,
        call: Coroutine[Any, Any, T],
        kind: str = "message",
        item_id: UUID | None = None,
    ) -> T | None:
        """Run a positive lookup; on a weak-lookup driver "not found" may be allowed (``None``).

        A driver with ``strong_uuid_lookup=False`` may miss a record whose index write was
        lost. When the back door implements ``lookup_may_miss(store, kind, item_id)``, a miss
        is accepted only if it confirms the index entry is really absent, so a driver bug
        that loses lookups for other reasons still fails the run.
        """
        if self.capabilities.strong_uuid_lookup:
            return self.run(call)
        try:
            return self.run(call)
        except MessageNotFound:
            confirm = getattr(self._back_door, "lookup_may_miss", None)
            if confirm is not None and item_id is not None:
                allowed = self.run(confirm(self.store, kind, item_id))
                assert allowed, f"{kind} {item_id} lookup missed, but its index entry exists"
            note(f"lookup of {kind} {item_id} missed (allowed: strong_uuid_lookup=False)")
            return None


def run_store_state_machine(
    factory: StoreFactory,
    back_door: BackDoor,
    *,
    capabilities: Capabilities | None = None,
    hypothesis_settings: settings | None = None,
) -> None:
    """Run :class:`StoreStateMachine` as a test (under the loaded Hypothesis profile).

    Args:
        factory: As for :class:`StoreStateMachine`.
        back_door: As for :class:`StoreStateMachine`.
        capabilities: As for :class:`StoreStateMachine`.
        hypothesis_settings: Overrides the loaded profile (``dev``/``ci``/``nightly``).

    Raises:
        AssertionError: With the shrunk sequence of steps, when the store breaks a rule.
    """
    run_state_machine_as_test(
        lambda: StoreStateMachine(factory, back_door, capabilities),  # type: ignore[arg-type]
        settings=hypothesis_settings or settings(),
    )
