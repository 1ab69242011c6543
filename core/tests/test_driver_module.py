"""``threadkeep.driver``: the public seam for driver authors, and its rules written once."""

from __future__ import annotations

from uuid import uuid4

import pytest

import threadkeep.driver
from threadkeep import IdempotencyConflict, Message, MessageKind, Store
from threadkeep.driver import fingerprint, resolve_batch


def test_all_is_sorted_and_complete() -> None:
    names = threadkeep.driver.__all__
    assert names == sorted(names)
    public = {name for name in vars(threadkeep.driver) if not name.startswith("_")}
    assert set(names) == public - {"annotations"}


@pytest.fixture
def store() -> Store:
    return threadkeep.open_store("memory://")


def test_new_messages_resolve_to_none(store: Store) -> None:
    batch = [
        store.prepare(Message(role="user", content="a", agui_id="a")),
        store.prepare(Message(role="user", content="b")),
    ]
    assert resolve_batch(uuid4(), batch, {}.get) == [None, None]


def test_a_resend_resolves_to_the_stored_record(store: Store) -> None:
    sent = store.prepare(Message(role="user", content="a", agui_id="a"))
    held = {"a": (sent.fingerprint, "row-7")}
    again = store.prepare(Message(role="user", content="a", agui_id="a"))
    fresh = store.prepare(Message(role="user", content="b", agui_id="b"))
    assert resolve_batch(uuid4(), [again, fresh], held.get) == ["row-7", None]


def test_another_payload_raises_before_anything(store: Store) -> None:
    chat_id = uuid4()
    sent = store.prepare(Message(role="user", content="a", agui_id="a"))
    other = store.prepare(Message(role="user", content="changed", agui_id="a"))
    with pytest.raises(IdempotencyConflict, match=f"chat {chat_id}.*nothing of the batch"):
        resolve_batch(chat_id, [other], {"a": (sent.fingerprint, None)}.get)


def test_no_agui_id_never_matches_the_empty_id(store: Store) -> None:
    item = store.prepare(Message(role="user", content="a"))
    looked_up: list[str] = []

    def stored(agui_id: str) -> tuple[str, str] | None:
        looked_up.append(agui_id)
        return ("x", "row")

    assert resolve_batch(uuid4(), [item], stored) == [None]
    assert looked_up == []


def test_fingerprint_is_the_prepared_one_and_ignores_store_fields(store: Store) -> None:
    message = Message(role="user", content="a", agui_id="a", kind=MessageKind.MESSAGE)
    prepared = store.prepare(message)
    stored = message.model_copy(update={"seq": 9, "revision": 3, "chat_id": uuid4()})
    assert fingerprint(message) == prepared.fingerprint == fingerprint(stored)
    assert Store.fingerprint(stored) == fingerprint(stored)
    assert fingerprint(message.model_copy(update={"content": "b"})) != prepared.fingerprint


def test_a_declared_capability_must_be_implemented() -> None:
    """Declaring ``archive`` without its primitives is refused when the store is built."""
    from threadkeep import Capabilities
    from threadkeep._memory import MemoryStore
    from threadkeep.driver import DriverPrimitives, unimplemented_primitives

    class Claims(MemoryStore):
        capabilities = Capabilities(archive=True)
        _scan_messages = DriverPrimitives._scan_messages  # the raising default

    class Honest(MemoryStore):
        capabilities = Capabilities(archive=False)
        _scan_messages = DriverPrimitives._scan_messages

    assert unimplemented_primitives(Claims) == ["_scan_messages"]
    with pytest.raises(TypeError, match=r"Claims.*_scan_messages"):
        Claims("memory://")
    assert unimplemented_primitives(Honest) == []
    Honest("memory://")


@pytest.mark.parametrize("name", ["memory", "sql", "mongodb", "memservice"])
def test_every_shipped_driver_implements_what_it_declares(name: str) -> None:
    from threadkeep.driver import unimplemented_primitives

    classes = {
        "memory": ("threadkeep._memory", "MemoryStore"),
        "sql": ("threadkeep_sql", "SqlStore"),
        "mongodb": ("threadkeep_mongodb", "MongoStore"),
        "memservice": ("threadkeep_memservice", "MemServiceStore"),
    }
    module, attribute = classes[name]
    driver = getattr(pytest.importorskip(module), attribute)
    assert unimplemented_primitives(driver) == []
