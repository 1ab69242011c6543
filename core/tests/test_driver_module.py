"""``threadkeep.driver``: the public seam for driver authors, and its rules written once."""

from __future__ import annotations

from uuid import uuid4

import pytest

import threadkeep.driver
from threadkeep import IdempotencyConflict, Message, MessageKind, Store
from threadkeep.driver import Records, fingerprint, resolve_batch


def test_all_is_sorted_and_complete() -> None:
    names = threadkeep.driver.__all__
    assert names == sorted(names)
    public = {name for name in vars(threadkeep.driver) if not name.startswith("_")}
    assert set(names) == public - {"annotations"}


@pytest.fixture
def records() -> Records:
    return Records()


def test_new_messages_resolve_to_none(records: Records) -> None:
    batch = [
        records.prepare(Message(role="user", content="a", agui_id="a")),
        records.prepare(Message(role="user", content="b")),
    ]
    assert resolve_batch(uuid4(), batch, {}.get) == [None, None]


def test_a_resend_resolves_to_the_stored_record(records: Records) -> None:
    sent = records.prepare(Message(role="user", content="a", agui_id="a"))
    held = {"a": (sent.fingerprint, "row-7")}
    again = records.prepare(Message(role="user", content="a", agui_id="a"))
    fresh = records.prepare(Message(role="user", content="b", agui_id="b"))
    assert resolve_batch(uuid4(), [again, fresh], held.get) == ["row-7", None]


def test_another_payload_raises_before_anything(records: Records) -> None:
    chat_id = uuid4()
    sent = records.prepare(Message(role="user", content="a", agui_id="a"))
    other = records.prepare(Message(role="user", content="changed", agui_id="a"))
    with pytest.raises(IdempotencyConflict, match=f"chat {chat_id}.*nothing of the batch"):
        resolve_batch(chat_id, [other], {"a": (sent.fingerprint, None)}.get)


def test_no_agui_id_never_matches_the_empty_id(records: Records) -> None:
    item = records.prepare(Message(role="user", content="a"))
    looked_up: list[str] = []

    def stored(agui_id: str) -> tuple[str, str] | None:
        looked_up.append(agui_id)
        return ("x", "row")

    assert resolve_batch(uuid4(), [item], stored) == [None]
    assert looked_up == []


def test_fingerprint_is_the_prepared_one_and_ignores_store_fields(records: Records) -> None:
    message = Message(role="user", content="a", agui_id="a", kind=MessageKind.MESSAGE)
    prepared = records.prepare(message)
    stored = message.model_copy(update={"seq": 9, "revision": 3, "chat_id": uuid4()})
    assert fingerprint(message) == prepared.fingerprint == fingerprint(stored)
    assert Records.fingerprint(stored) == fingerprint(stored)
    assert fingerprint(message.model_copy(update={"content": "b"})) != prepared.fingerprint


def test_a_declared_capability_must_be_implemented() -> None:
    """Declaring ``archive`` without its protocol's methods is refused when the store is built."""
    from threadkeep import Capabilities
    from threadkeep._memory import MemoryDriver

    class Claims(MemoryDriver):
        capabilities = Capabilities(archive=True)
        scan_messages = None  # opts out of ArchiveDriver (the protocol check sees None)

    class Honest(MemoryDriver):
        capabilities = Capabilities(archive=False)
        scan_messages = None

    with pytest.raises(TypeError, match=r"Claims.*'archive'.*scan_messages"):
        Store(Claims("memory://"))
    assert Store(Honest("memory://")).capabilities.archive is False
    assert Store(MemoryDriver("memory://")).capabilities.archive is True


def test_capability_follows_the_code_not_the_flag() -> None:
    """A driver that implements a protocol has the capability, whatever its flag says."""
    from threadkeep import Capabilities
    from threadkeep._memory import MemoryDriver

    class Quiet(MemoryDriver):
        capabilities = Capabilities(steps=False, archive=False)

    store = Store(Quiet("memory://"))
    assert (store.capabilities.steps, store.capabilities.archive) == (True, True)


def test_a_plain_def_primitive_is_refused_when_the_store_is_built() -> None:
    """A primitive the store awaits, written as ``def``, is a ``TypeError`` naming it."""
    from threadkeep._memory import MemoryDriver

    class PlainRequired(MemoryDriver):
        def get_chat(self, chat_id):  # type: ignore[override]
            return None

    class PlainOptional(MemoryDriver):  # an optional protocol's primitive
        def last_boundary(self, chat_id):  # type: ignore[override]
            return None

    with pytest.raises(TypeError, match=r"PlainRequired: its primitive 'get_chat' \(Driver"):
        Store(PlainRequired("memory://"))
    with pytest.raises(TypeError, match=r"'last_boundary' \(LastBoundaryDriver.last_boundary\)"):
        Store(PlainOptional("memory://"))
    with pytest.raises(TypeError, match=r"async def get_chat\(\.\.\.\)"):
        Store(PlainRequired("memory://"))


def test_an_object_without_the_required_methods_is_not_a_driver() -> None:
    with pytest.raises(TypeError, match="not a threadkeep driver: it lacks open, close"):
        Store(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["memory", "sql", "mongodb", "memservice"])
def test_every_shipped_driver_implements_what_it_declares(name: str) -> None:
    """Each shipped driver class has every method of each capability it declares."""
    from threadkeep.driver import CAPABILITY_PROTOCOLS, protocol_members

    classes = {
        "memory": ("threadkeep._memory", "MemoryDriver"),
        "sql": ("threadkeep_sql", "SqlDriver"),
        "mongodb": ("threadkeep_mongodb", "MongoDriver"),
        "memservice": ("threadkeep_memservice", "MemServiceDriver"),
    }
    module, attribute = classes[name]
    driver = getattr(pytest.importorskip(module), attribute)
    assert not issubclass(driver, Store)
    for capability, protocols in CAPABILITY_PROTOCOLS.items():
        if getattr(driver.capabilities, capability):
            for protocol in protocols:
                for member in protocol_members(protocol):
                    assert callable(getattr(driver, member, None)), (capability, member)
