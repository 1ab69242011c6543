"""threadkeep-contract-tests: prove a threadkeep driver honours the store contract.

Install it next to your driver, write one test module, run pytest. The whole suite (named
examples for every single-store rule, capability checks, and a Hypothesis
state machine compared with a plain-Python model) runs against your driver::

    # tests/test_contract.py of a driver package
    from uuid import UUID

    import pytest
    from threadkeep_contract_tests import RawChat, RawMessage, StoreContract, require_service

    from my_driver import MyStore


    class TestMyStore(StoreContract):
        known_divergences = {
            # "test_name": "why the driver cannot do this (runs as strict xfail)",
        }

        @pytest.fixture
        def store_factory(self, tmp_path):
            server = require_service("MY_DB_URL", "MyDB")  # skip, or fail under CI
            url = f"{server}/{tmp_path.name}"  # fresh storage per test
            return lambda **options: MyStore(url, **options)

        async def raw_chats(self, store: MyStore) -> list[RawChat]:
            rows = await store.connection.fetch("SELECT body, deleted_at FROM chats")
            return [RawChat.from_body(r["body"], deleted=r["deleted_at"] is not None) for r in rows]

        async def raw_messages(self, store: MyStore, chat_id: UUID) -> list[RawMessage]:
            rows = await store.connection.fetch(
                "SELECT body, seq, deleted_at FROM messages WHERE chat_id = $1", chat_id
            )
            return [
                RawMessage.from_body(r["body"], chat_id=chat_id, seq=r["seq"],
                                     hidden=r["deleted_at"] is not None)
                for r in rows
            ]

``store_factory`` returns a synchronous ``(**options) -> Store`` building an unopened store
on the same storage every call within a test (tests reopen it, or open a second instance
with another ``cursor_secret``) and on fresh storage for each test. The back door reads what
is stored without the store's own read path. Capabilities come from
``store.capabilities``; tests needing an undeclared one skip, naming it.

Run with ``HYPOTHESIS_PROFILE=ci`` (bounded, derandomized) in CI and ``nightly`` for ten
times the examples; ``--threadkeep-require-services`` (or ``THREADKEEP_REQUIRE_SERVICES=1``)
makes :func:`require_service` fail instead of skip. ``--threadkeep-results=PATH`` records
outcomes that ``python -m threadkeep_contract_tests.matrix`` turns into
``docs/capabilities.md``. The state machine alone: :mod:`threadkeep_contract_tests.stateful`.
"""

from ._archive_base import ArchiveFactory
from ._archive_lifecycle import ArchiveLifecycleContract
from ._archive_store import ArchiveStoreContract
from ._base import StoreFactory, require_capability
from ._contract import StoreContract
from ._corrupt_rows import DAMAGED_BODIES, DAMAGED_TIMESTAMP, DAMAGES
from ._helpers import require_realdata, walk_past_damage
from ._raw import BackDoor, RawChat, RawMessage
from ._services import require_service

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 - plain sorted(), as tests/test_plugin.py checks
    "ArchiveFactory",
    "ArchiveLifecycleContract",
    "ArchiveStoreContract",
    "BackDoor",
    "DAMAGED_BODIES",
    "DAMAGED_TIMESTAMP",
    "DAMAGES",
    "RawChat",
    "RawMessage",
    "StoreContract",
    "StoreFactory",
    "__version__",
    "require_capability",
    "require_realdata",
    "require_service",
    "walk_past_damage",
]
