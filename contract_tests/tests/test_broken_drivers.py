"""The suite catches broken drivers: one deliberately broken memory driver per rule family.

Each case runs the contract suite (selected with ``-k``, ``ci`` profile) in a pytester
sandbox against a subclass of the memory driver that breaks one SPEC section 3 rule, and
checks that exactly the expected tests fail while the unrelated ones in the selection pass.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

MODULE = """
from uuid import UUID, uuid4

import pytest
from threadkeep import ChatFilter, InvalidCursor, MessageFilter
from threadkeep._content import PreparedMessage, dump_json, load_json
from threadkeep._memory import MemoryDriver
from threadkeep.driver import store_for
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract

{driver}

if "build" not in globals():
    def build(url, **options):
        return store_for(BrokenDriver, url, **options)


class TestBroken(StoreContract):
    known_divergences = {divergences}

    @pytest.fixture
    def store_factory(self):
        url = f"memory://broken-{{uuid4().hex}}"
        return lambda **options: build(url, **options)

    async def raw_chats(self, store):
        with store.driver._state.lock:
            rows = store.driver._state.chats.values()
            return [RawChat.from_body(r.body, deleted=r.deleted) for r in rows]

    async def raw_messages(self, store, chat_id):
        with store.driver._state.lock:
            row = store.driver._state.chats.get(chat_id)
            rows = [] if row is None else list(row.messages.values())
            return [
                RawMessage.from_body(
                    m.body, chat_id=m.chat_id, seq=m.seq, hidden=m.deleted_at is not None
                )
                for m in rows
            ]
"""

REORDERS = """
class BrokenDriver(MemoryDriver):
    # Orders each page by timestamp with a random-uuid tie-breaker (SPEC section 6 pitfall).
    async def page_messages(self, chat_id, message_filter, before_seq, limit):
        rows = await super().page_messages(chat_id, message_filter, before_seq, limit)
        if rows is None:
            return None
        return sorted(rows, key=lambda m: (m.created_at, m.message_id), reverse=True)
"""

DUPLICATES = """
class BrokenDriver(MemoryDriver):
    # Never looks an agui_id up before inserting: every retry is a new row.
    async def insert_messages(self, chat_id, messages, now):
        with self._state.lock:
            for item in messages:
                self._state.agui_index.pop((chat_id, item.message.agui_id), None)
        return await super().insert_messages(chat_id, messages, now)
"""

LEAKS_DELETED = """
class BrokenDriver(MemoryDriver):
    # Forgets the soft-delete condition when listing chats.
    async def page_chats(self, chat_filter, before_seq, limit):
        if chat_filter.deleted == "exclude":
            chat_filter = chat_filter.model_copy(update={"deleted": "include"})
        return await super().page_chats(chat_filter, before_seq, limit)
"""

FOREIGN_CURSORS = """
import base64, json, struct

BrokenDriver = MemoryDriver


def build(url, **options):
    # A store whose cursor check is replaced (cursors are core's: no driver can skip the
    # check, so the case patches the store's context): it reads the position out of any
    # cursor without checking signature or scope.
    store = store_for(MemoryDriver, url, **options)
    store._ctx.decode_cursor = _decode_cursor
    return store


def _decode_cursor(cursor, scope):
        if cursor is None:
            return None
        try:
            body = cursor.split(".")[0]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            if "." not in cursor:  # version 2: version, scope digest, position, MAC
                return struct.unpack(">q", raw[17:25])[0]
            return int(json.loads(raw)["p"])
        except Exception as exc:
            raise InvalidCursor("unreadable cursor") from exc
"""

TRUNCATES = """
class BrokenDriver(MemoryDriver):
    # Stores content in a 64 KiB column, cutting what does not fit.
    async def insert_messages(self, chat_id, messages, now):
        cut = []
        for item in messages:
            body = load_json(item.body)
            body["content"] = body["content"][:65535]
            cut.append(PreparedMessage(item.message, dump_json(body), item.fingerprint))
        return await super().insert_messages(chat_id, cut, now)
"""

DROPS_NUL = """
class BrokenDriver(MemoryDriver):
    # Drops U+0000 from content, as drivers writing PostgreSQL text naively do.
    async def insert_messages(self, chat_id, messages, now):
        clean = []
        for item in messages:
            body = load_json(item.body)
            body["content"] = body["content"].replace("\\x00", "")
            clean.append(PreparedMessage(item.message, dump_json(body), item.fingerprint))
        return await super().insert_messages(chat_id, clean, now)
"""

LOSES_MESSAGE = """
class BrokenDriver(MemoryDriver):
    # Acknowledges every message but never stores the fifth, tenth, ... of a chat.
    async def insert_messages(self, chat_id, messages, now):
        results = await super().insert_messages(chat_id, messages, now)
        with self._state.lock:
            chat = self._state.chats.get(chat_id)
            for message, created in results or []:
                if created and message.seq % 5 == 0:
                    row = chat.messages.pop(message.seq)
                    chat.seqs.remove(message.seq)
                    self._unindex(row)
        return results
"""

FORGETS = """
from threadkeep._memory._state import MemoryState


class BrokenDriver(MemoryDriver):
    # Declares persistent (as the memory driver's named stores are), but every instance
    # starts empty: what one store wrote is gone when the next opens.
    def __init__(self, url="memory://", **options):
        super().__init__(url, **options)
        self._state = MemoryState()
"""

PLAIN_DEF = """
class BrokenDriver(MemoryDriver):
    # A primitive written as a plain def: the store would await its None.
    def get_chat(self, chat_id):
        return None
"""


@pytest.fixture(autouse=True)
def _ci_profile(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run the inner suites under the bounded ``ci`` profile; restore the outer profile."""
    outer = settings()
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    yield
    settings.register_profile("threadkeep-outer", outer)
    settings.load_profile("threadkeep-outer")


def _run(
    pytester: pytest.Pytester, driver: str, select: str, divergences: str = "{}"
) -> tuple[set[str], set[str], pytest.RunResult]:
    """Run the suite on ``driver`` for tests matching ``select``; return failed and passed names."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    source = MODULE.format(driver=textwrap.dedent(driver), divergences=divergences)
    pytester.makepyfile(test_broken=source)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", "-q", "-k", select)
    text = result.stdout.str()
    failed = set(re.findall(r"^FAILED \S+::TestBroken::(test_\w+)", text, re.MULTILINE))
    passed = set(re.findall(r"^PASSED \S+::TestBroken::(test_\w+)", text, re.MULTILINE))
    return failed, passed, result


def test_reordering_driver_is_caught(pytester: pytest.Pytester) -> None:
    """Ordering by timestamp breaks under frozen/backward clocks and timestamp ties."""
    failed, passed, _ = _run(
        pytester, REORDERS, "clock or identical_timestamps or seq_increases or state_machine"
    )
    assert {"test_clock_never_changes_order", "test_identical_timestamps_page_exactly"} <= failed
    assert "test_state_machine" in failed
    assert "test_seq_increases_in_append_order" in passed


def test_duplicating_driver_is_caught(pytester: pytest.Pytester) -> None:
    """Inserting retries again breaks idempotency."""
    failed, _, _ = _run(pytester, DUPLICATES, "retry or retries or conflict or state_machine")
    assert {
        "test_retry_returns_stored_message",
        "test_same_agui_id_different_payload_conflicts",
        "test_batch_retry_writes_nothing_new",
        "test_state_machine",
    } <= failed
    assert "test_agui_id_is_scoped_to_its_chat" not in failed


def test_driver_leaking_deleted_chats_is_caught(pytester: pytest.Pytester) -> None:
    """Listing deleted chats breaks soft delete."""
    failed, passed, _ = _run(
        pytester, LEAKS_DELETED, "soft_delete or restore_brings or chat_pages or state_machine"
    )
    assert {"test_soft_delete_hides_from_every_read_path", "test_state_machine"} <= failed
    assert {"test_restore_brings_everything_back", "test_chat_pages_walk_exactly"} <= passed


def test_driver_accepting_foreign_cursors_is_caught(pytester: pytest.Pytester) -> None:
    """Cursors used without checking signature and scope are accepted from anywhere."""
    failed, passed, _ = _run(pytester, FOREIGN_CURSORS, "cursor or first_page_is_newest")
    assert {
        "test_foreign_cursors_are_refused",
        "test_altered_cursors_are_refused",
        "test_other_secret_cursors_are_refused",
    } <= failed
    assert "test_first_page_is_newest" in passed


def test_truncating_driver_is_caught(pytester: pytest.Pytester) -> None:
    """Content cut at 64 KiB fails the 16 MiB round trip (through the back door)."""
    failed, passed, _ = _run(pytester, TRUNCATES, "max_size or text_round_trips or nul")
    assert "test_max_size_message_is_accepted" in failed
    assert "test_nul_character_stored_exactly" in passed


def test_driver_dropping_nul_is_caught(pytester: pytest.Pytester) -> None:
    """Content losing U+0000 fails the NUL tests and the state machine."""
    failed, passed, _ = _run(
        pytester, DROPS_NUL, "nul or text_round_trips or max_size or state_machine"
    )
    assert {"test_nul_character_stored_exactly", "test_text_round_trips_exactly"} <= failed
    assert "test_state_machine" in failed
    assert "test_max_size_message_is_accepted" in passed


def test_driver_losing_messages_is_caught(pytester: pytest.Pytester) -> None:
    """A message acknowledged but not stored fails walks, the back door and the machine."""
    failed, _, _ = _run(
        pytester, LOSES_MESSAGE, "seq_increases or concurrent_appends or identical or state_machine"
    )
    assert {
        "test_seq_increases_in_append_order",
        "test_concurrent_appends_get_distinct_increasing_seqs",
        "test_identical_timestamps_page_exactly",
        "test_state_machine",
    } <= failed


def test_known_divergence_runs_as_strict_xfail(pytester: pytest.Pytester) -> None:
    """A listed divergence xfails while broken; on a fixed driver it fails (strict)."""
    divergence = '{"test_nul_character_stored_exactly": "backend column drops NUL"}'
    failed, _, result = _run(pytester, DROPS_NUL, "nul_character", divergences=divergence)
    assert not failed
    result.assert_outcomes(xfailed=1)
    fixed = "class BrokenDriver(MemoryDriver):\n    pass\n"
    failed, _, result = _run(pytester, fixed, "nul_character", divergences=divergence)
    assert failed == {"test_nul_character_stored_exactly"}
    assert "XPASS(strict)" in result.stdout.str()


def test_unknown_divergence_name_is_an_error(pytester: pytest.Pytester) -> None:
    """A misspelt ``known_divergences`` key fails collection with a clear message."""
    fixed = "class BrokenDriver(MemoryDriver):\n    pass\n"
    _, _, result = _run(pytester, fixed, "nul_character", divergences='{"test_nope": "typo"}')
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*known_divergences names 'test_nope'*"])


def test_a_broken_capability_claim_names_the_capability(pytester: pytest.Pytester) -> None:
    """A driver whose ``persistent`` claim is false fails that test, saying which claim."""
    failed, passed, result = _run(pytester, FORGETS, "persistent_capability or first_page")
    assert failed == {"test_persistent_capability_holds"}
    assert "test_first_page_is_newest" in passed
    result.stdout.fnmatch_lines(
        ["*the driver declares capability 'persistent' (Capabilities.persistent=True)*"]
    )


def test_a_plain_def_primitive_is_refused_when_the_store_is_built(
    pytester: pytest.Pytester,
) -> None:
    """Every test errors at ``Store(driver)`` with a ``TypeError`` naming the primitive."""
    _, _, result = _run(pytester, PLAIN_DEF, "first_page_is_newest")
    result.assert_outcomes(errors=1)  # in the store fixture, before the test body runs
    result.stdout.fnmatch_lines(["*TypeError*its primitive 'get_chat' (Driver.get_chat)*"])
