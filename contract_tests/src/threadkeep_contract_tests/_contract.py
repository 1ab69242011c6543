"""``StoreContract``: every contract area in one base class a driver's test class subclasses."""

from __future__ import annotations

from ._archive import ArchiveTests
from ._arguments import ArgumentTests
from ._boundaries import BoundaryTests
from ._bulk import BulkLoadTests
from ._capabilities import CapabilityTests
from ._chat_load import ChatLoadTests
from ._content import ContentTests
from ._corrupt_rows import CorruptRowTests
from ._damaged_records import DamagedRecordTests
from ._deletion import DeletionTests
from ._idempotency import IdempotencyTests
from ._nested import NestedTests
from ._ordering import OrderingTests
from ._pages import PageTests
from ._previews import PreviewTests
from ._property import StateMachineTests
from ._reliability import ReliabilityTests
from ._seq_collisions import SeqCollisionTests
from ._steps import StepTests
from ._time import TimeTests
from ._writers import ConcurrentWriterTests

__all__ = ["AREA_MIXINS", "StoreContract"]


class StoreContract(
    OrderingTests,
    IdempotencyTests,
    BulkLoadTests,
    ChatLoadTests,
    ConcurrentWriterTests,
    ContentTests,
    PageTests,
    PreviewTests,
    BoundaryTests,
    DeletionTests,
    TimeTests,
    NestedTests,
    StepTests,
    ArchiveTests,
    ArgumentTests,
    CapabilityTests,
    CorruptRowTests,
    DamagedRecordTests,
    SeqCollisionTests,
    ReliabilityTests,
    StateMachineTests,
):
    """The whole threadkeep store contract as one pytest base class.

    Subclass it in a test module, name the subclass ``Test...``, and provide:

    * a fixture ``store_factory`` returning a synchronous ``(**options) -> Store`` that
      builds an *unopened* store on the same storage every time it is called within one
      test, and on fresh storage for every test. Tests call it with the standard options
      (``cursor_secret``, ``clock``, ``max_message_bytes``, ``message_model``) and call it
      several times to reopen the store or open a second instance.
    * ``async def raw_chats(self, store) -> list[RawChat]`` and
      ``async def raw_messages(self, store, chat_id) -> list[RawMessage]``: the back door,
      reading what is stored without the store's own read path.

    Optionally implement the back-door write ``async def damage_row(self, store, kind,
    chat_id, seq, damage) -> str | None`` (see ``BackDoor``): it damages one stored row
    (``kind`` "message", "chat", "step" or "run") the way ``damage`` names (a key of
    ``DAMAGES``) and returns the column the error must name, or ``None`` when the backend
    cannot hold that damage. Without it the corrupt-row tests skip, naming it. And
    optionally ``async def move_message(self, store, chat_id, seq, new_seq) -> str | None``
    (see ``BackDoor``): it moves a message row to a higher seq around the store, for the
    seq-collision tests.

    Optionally set ``known_divergences = {"test_name": "why"}``: those tests run as strict
    xfails, so fixing the driver makes the run fail until the entry is removed.

    Fixtures it adds: ``store`` (opened, closed after the test) and ``capabilities``
    (``store.capabilities``). Tests needing a capability skip with
    "driver does not declare capability '<name>'".
    """


AREA_MIXINS: tuple[type, ...] = (
    OrderingTests,
    IdempotencyTests,
    BulkLoadTests,
    ConcurrentWriterTests,
    ContentTests,
    PageTests,
    BoundaryTests,
    DeletionTests,
    TimeTests,
    NestedTests,
    StepTests,
    ArchiveTests,
    ArgumentTests,
    CapabilityTests,
    CorruptRowTests,
    DamagedRecordTests,
    SeqCollisionTests,
    ReliabilityTests,
    StateMachineTests,
)
"""The mixin classes, one per contract area, in the order the matrix lists them."""
